/**
 * A read statement's result as every backend gives it (the demo engines, the embedded and live
 * databases, the REST connectors, a relay) and as an agent receives it.
 */

export type Row = Record<string, unknown>;

export interface ColumnInfo {
  /** the name the rows are keyed by (duplicates in a result get `_2`, `_3` … suffixes) */
  readonly name: string;
  /** PostgreSQL type OID */
  readonly type_oid: number;
}

export interface ReadQueryResult {
  readonly columns: readonly ColumnInfo[];
  /** rows keyed by column name, values already JSON-safe */
  readonly rows: readonly Row[];
  readonly truncated: boolean;
  /** byte length (UTF-8) of JSON.stringify(rows), exactly what the agent receives */
  readonly bytes: number;
}
