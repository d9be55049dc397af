/**
 * What a connection may read, as tables and columns (`GET /v1/connections/{id}/schema`): the
 * listing's shape, and how each kind of source is described. Never the agent's SQL: the demo and
 * API targets from the definitions svc holds (dataset and REST specs), PostgreSQL (`postgres`,
 * `postgres-relay`) from its own catalog with the statement below, sent by the control plane
 * itself. A leaf: the connectors and backends import it, it imports none of them.
 */
import { quoteLiteralAnySetting } from './sql/quote.js';
import type { ReadQueryResult } from '../results/index.js';

export interface SchemaColumn {
  readonly name: string;
  /** a readable type name, as the source spells it (`integer`, `timestamp with time zone`, `varchar(255)`) */
  readonly type: string;
  readonly nullable: boolean;
}

export interface SchemaTable {
  /** the name the agent writes in SQL (`public.orders` on PostgreSQL, as in `scope_applied`) */
  readonly name: string;
  readonly columns: readonly SchemaColumn[];
  /** the source's own estimate of its rows, when cheaply known (omitted when unknown or rows are filtered) */
  readonly row_estimate?: number;
}

export interface SchemaListing {
  readonly tables: readonly SchemaTable[];
  /** scoped tables the source does not show: they do not exist, or the credential cannot read any of their columns */
  readonly missing: readonly string[];
  /** the catalog answer was longer than the caps below: the listing stops early */
  readonly truncated: boolean;
}

/** At most this many columns are read from a source's catalog for one listing (64 scoped tables of 1,600 columns). */
export const SCHEMA_MAX_COLUMNS = 102_400;

/** The caps of a catalog read: every column of the scoped tables, within the deadline and the response's byte cap. */
export function catalogLimits(limits: { readonly timeoutMs: number; readonly maxBytes: number }): { timeoutMs: number; maxRows: number; maxBytes: number } {
  return { timeoutMs: limits.timeoutMs, maxRows: SCHEMA_MAX_COLUMNS, maxBytes: limits.maxBytes };
}

/** The readable names of the SQL types svc's own tables use (demo datasets, API and file tables). */
const TYPE_NAMES: Readonly<Record<string, string>> = { timestamptz: 'timestamp with time zone' };

export function readableType(type: string): string {
  return TYPE_NAMES[type] ?? type;
}

/** A table as svc defines it (demo dataset, REST spec, file header), with whether each column may hold null. */
export function definedTable<C extends { readonly name: string; readonly type: string }>(name: string, columns: readonly C[], nullable: (c: C) => boolean): SchemaTable {
  return { name, columns: columns.map((c) => ({ name: c.name, type: readableType(c.type), nullable: nullable(c) })) };
}

/** A table of a PostgreSQL scope: its agent-facing name, where it lives, and whether a `filter:` restricts its rows. */
export interface PostgresScopedTable {
  readonly name: string;
  readonly schema: string;
  readonly table: string;
  readonly filtered: boolean;
}

/**
 * One catalog statement for the scoped tables: every column the credential's role may select
 * (`has_column_privilege`, so a column-level grant lists only its columns) in a schema it may use
 * (`has_schema_privilege … USAGE`: without it every query of the table is refused, whatever the
 * table's grants), in column order, with `format_type` names and the planner's row estimate.
 * Names compare exactly, as the rewritten statements quote them. The statement is svc's own text,
 * sent as it is (not through the checker): each name is a literal that reads the same whatever the
 * database's standard_conforming_strings (a quoted scope's name may hold `\` and `'`).
 */
export function postgresCatalogSql(tables: readonly PostgresScopedTable[]): string {
  const wanted = tables.map((t) => `(${quoteLiteralAnySetting(t.schema, 'a scoped name')}, ${quoteLiteralAnySetting(t.table, 'a scoped name')})`).join(', ');
  return `SELECT n.nspname AS schema_name, c.relname AS table_name, c.relkind::text AS relkind, c.reltuples::float8 AS reltuples,
  a.attname AS column_name, pg_catalog.format_type(a.atttypid, a.atttypmod) AS column_type, NOT a.attnotnull AS nullable
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND (n.nspname, c.relname) IN (VALUES ${wanted})
  AND pg_catalog.has_schema_privilege(n.oid, 'USAGE')
  AND pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT')
ORDER BY n.nspname, c.relname, a.attnum`;
}

/** Tables with stored rows, whose reltuples estimates them (-1: never analyzed). */
const ESTIMATED = new Set(['r', 'm']);

/**
 * What a catalog answer cut by the caps (`truncated`) still says: the table its last row belongs
 * to may have lost columns, and a scoped table not read may exist after the cut. So that table is
 * not listed, and unread tables are not called missing: they are neither (`truncated: true` says
 * some scoped tables were not read).
 */
export function unreadAfterCut(result: ReadQueryResult, keyOf: (row: Record<string, unknown>) => string): { readonly partial: string | undefined; readonly missingKnown: boolean } {
  const last = result.rows[result.rows.length - 1];
  return result.truncated ? { partial: last === undefined ? undefined : keyOf(last), missingKnown: false } : { partial: undefined, missingKnown: true };
}

/** The listing from the catalog statement's rows, in the order of the scopes. */
export function postgresListing(result: ReadQueryResult, tables: readonly PostgresScopedTable[]): SchemaListing {
  const keyOf = (r: Record<string, unknown>): string => `${String(r['schema_name'])}.${String(r['table_name'])}`;
  const cut = unreadAfterCut(result, keyOf);
  const found = new Map<string, { columns: SchemaColumn[]; relkind: string; reltuples: number }>();
  for (const r of result.rows) {
    const key = keyOf(r);
    let entry = found.get(key);
    if (!entry) found.set(key, (entry = { columns: [], relkind: String(r['relkind']), reltuples: Number(r['reltuples']) }));
    entry.columns.push({ name: String(r['column_name']), type: String(r['column_type']), nullable: r['nullable'] === true });
  }
  const listed: SchemaTable[] = [];
  const missing: string[] = [];
  for (const t of tables) {
    const key = `${t.schema}.${t.table}`;
    const entry = key === cut.partial ? undefined : found.get(key);
    if (!entry) {
      if (cut.missingKnown) missing.push(t.name);
      continue;
    }
    const estimate = ESTIMATED.has(entry.relkind) && !t.filtered && Number.isFinite(entry.reltuples) && entry.reltuples >= 0 ? Math.round(entry.reltuples) : undefined;
    listed.push({ name: t.name, columns: entry.columns, ...(estimate !== undefined ? { row_estimate: estimate } : {}) });
  }
  return { tables: listed, missing, truncated: result.truncated };
}
