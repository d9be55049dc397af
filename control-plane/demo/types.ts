/**
 * Shapes of the demo catalogue: packs, demo datasets (one per demo target) and their tables.
 * Generators are pure and deterministic: the same rows, in the same order, on every install.
 */

/** PostgreSQL column types the demo datasets use. */
export type ColumnType =
  | 'text'
  | 'integer'
  | 'bigint'
  | 'numeric'
  | 'boolean'
  | 'date'
  | 'timestamptz'
  | 'jsonb';

/** A value of one cell: null, or what the column's type takes (jsonb cells are plain objects/arrays). */
export type Cell = string | number | boolean | null | Record<string, unknown> | unknown[];

export interface ColumnDef {
  readonly name: string;
  readonly type: ColumnType;
  readonly description: string;
  /** false when the column may hold null; default true (NOT NULL). */
  readonly notNull?: boolean;
}

export interface TableDef {
  /** lower-case SQL identifier, unique within its dataset */
  readonly name: string;
  readonly description: string;
  readonly columns: readonly ColumnDef[];
  /** name of the primary key column (first column by convention) */
  readonly primaryKey: string;
  /**
   * The timestamp/date column that `period:` scopes restrict (half-open interval, UTC).
   * Absent for tables without one (e.g. healthcare `patients`), which `period:` does not restrict.
   */
  readonly timeColumn?: string;
}

export interface DatasetDef {
  /** target id, e.g. `demo-healthcare` */
  readonly targetId: string;
  /** pack id, e.g. `healthcare` */
  readonly pack: string;
  /** human-readable name */
  readonly name: string;
  readonly description: string;
  /** the PostgreSQL schema holding this dataset's tables, e.g. `demo_healthcare` */
  readonly schema: string;
  readonly tables: readonly TableDef[];
  /**
   * Generate every row of every table. Rows are arrays in the table's column order.
   * Deterministic: uses only the seeded PRNG, never Math.random or the clock.
   */
  generate(): Map<string, Cell[][]>;
}

export interface PackDef {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  /** ids of the demo targets in this pack */
  readonly targets: readonly string[];
}
