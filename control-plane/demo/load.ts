/**
 * Turning the demo datasets into SQL: one schema per dataset, a read-only role that owns nothing,
 * and the generated rows. The same script loads the embedded engine and an external PostgreSQL.
 */
import { createHash } from 'node:crypto';
import { quoteIdent, quoteLiteral } from '../query/sql/quote.js';
import type { Cell, ColumnType, DatasetDef, TableDef } from './types.js';

/** Bump when the generators change the rows they produce, or how the embedded image is built. */
export const DEMO_DATA_VERSION = 5;

/** The non-owner role demo queries run as. */
export const DEMO_READER_ROLE = 'svc_demo_reader';

const SQL_TYPE: Record<ColumnType, string> = {
  text: 'text',
  integer: 'integer',
  bigint: 'bigint',
  numeric: 'numeric(14,2)',
  boolean: 'boolean',
  date: 'date',
  timestamptz: 'timestamptz',
  jsonb: 'jsonb',
};

function literal(cell: Cell, type: ColumnType): string {
  if (cell === null) return 'NULL';
  switch (type) {
    case 'jsonb':
      return `${quoteLiteral(JSON.stringify(cell))}::jsonb`;
    case 'boolean':
      return cell ? 'true' : 'false';
    case 'integer':
    case 'bigint':
    case 'numeric':
      if (typeof cell !== 'number' || !Number.isFinite(cell)) throw new Error(`demo value ${String(cell)} is not a number`);
      return String(cell);
    default:
      return quoteLiteral(String(cell));
  }
}

/** A fingerprint of the dataset definitions and generator version: a new one rebuilds the demo data. */
export function demoFingerprint(datasets: readonly DatasetDef[]): string {
  const shape = datasets.map((d) => ({ id: d.targetId, schema: d.schema, tables: d.tables }));
  // the row-security layer is part of what a loaded database holds: a change to it reloads
  const security = [...SCOPE_FUNCTIONS, scopePolicy("'t'", 'at')];
  return createHash('sha256').update(JSON.stringify({ v: DEMO_DATA_VERSION, shape, security })).digest('hex').slice(0, 16);
}

function createTable(d: DatasetDef, t: TableDef): string {
  const cols = t.columns.map((c) => `${quoteIdent(c.name)} ${SQL_TYPE[c.type]}${c.notNull === false ? '' : ' NOT NULL'}${c.name === t.primaryKey ? ' PRIMARY KEY' : ''}`);
  return `CREATE TABLE ${quoteIdent(d.schema)}.${quoteIdent(t.name)} (${cols.join(', ')})`;
}

/** Statements run before the data: the reader role, the version table, one fresh schema per dataset. */
export function* schemaStatements(datasets: readonly DatasetDef[]): Generator<string> {
  // roles are cluster-wide: several databases (or test runs) may race to create it
  yield `DO $$ BEGIN CREATE ROLE ${DEMO_READER_ROLE} NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`;
  // the loading user must be able to SET ROLE to it (implicit for a superuser)
  yield `DO $$ BEGIN EXECUTE format('GRANT ${DEMO_READER_ROLE} TO %I', current_user); EXCEPTION WHEN OTHERS THEN NULL; END $$`;
  yield 'CREATE SCHEMA IF NOT EXISTS svc_meta';
  yield 'CREATE TABLE IF NOT EXISTS svc_meta.demo_version (fingerprint text PRIMARY KEY, loaded_at timestamptz NOT NULL DEFAULT now())';
  for (const d of datasets) {
    yield `DROP SCHEMA IF EXISTS ${quoteIdent(d.schema)} CASCADE`;
    yield `CREATE SCHEMA ${quoteIdent(d.schema)}`;
    for (const t of d.tables) yield createTable(d, t);
  }
}

/**
 * The second, independent layer of scope enforcement: row-level security on every demo table,
 * forced, for the reader role. Each transaction is told its scope by the control plane with
 * `SET LOCAL svc.tables` (comma list of schema.table), `svc.period_n` (0 = no period
 * restriction), `svc.period_lo`/`svc.period_hi` (the overall bounds, which the planner can
 * estimate) and `svc.periods` (the exact `start/end` list), written by query/scope-settings.ts;
 * anything unset allows nothing. The reader cannot call set_config (revoked), and the SQL layer
 * never lets a SET through.
 */
export const SCOPE_FUNCTIONS = [
  `CREATE OR REPLACE FUNCTION svc_meta.table_allowed(rel text) RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
     SELECT rel = ANY (string_to_array(coalesce(current_setting('svc.tables', true), ''), ','))
   $fn$`,
  // number of periods: 0 = no period restriction; unset = NULL, which lets nothing through
  `CREATE OR REPLACE FUNCTION svc_meta.period_n() RETURNS integer LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
     SELECT nullif(current_setting('svc.period_n', true), '')::integer
   $fn$`,
  `CREATE OR REPLACE FUNCTION svc_meta.period_lo() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
     SELECT nullif(current_setting('svc.period_lo', true), '')::timestamptz
   $fn$`,
  `CREATE OR REPLACE FUNCTION svc_meta.period_hi() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
     SELECT nullif(current_setting('svc.period_hi', true), '')::timestamptz
   $fn$`,
  // the exact union, consulted only when there are several periods
  `CREATE OR REPLACE FUNCTION svc_meta.period_allows(at timestamptz) RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
     SELECT at IS NOT NULL AND EXISTS (
       SELECT 1 FROM unnest(string_to_array(coalesce(current_setting('svc.periods', true), ''), ',')) AS p(r)
        WHERE r <> '' AND at >= split_part(p.r, '/', 1)::timestamptz AND at < split_part(p.r, '/', 2)::timestamptz)
   $fn$`,
];

/**
 * The row-security predicate of a table with a time column `col` (already quoted). Each setting is
 * read in a scalar sub-select, which PostgreSQL plans as an InitPlan evaluated once per statement
 * (a bare call of these STABLE functions ran once per row: a 3-table join took about 7× as long
 * as without row security). Only `period_allows`, consulted when there are several periods,
 * depends on the row.
 */
function periodPolicy(col: string): string {
  return `((SELECT svc_meta.period_n()) = 0 OR (${col} >= (SELECT svc_meta.period_lo()) AND ${col} < (SELECT svc_meta.period_hi()) AND ((SELECT svc_meta.period_n()) = 1 OR svc_meta.period_allows(${col}))))`;
}

/** A table's whole row-security predicate: the table is in scope (once per statement), and its period. */
function scopePolicy(name: string, timeColumn: string | undefined): string {
  const period = timeColumn ? ` AND ${periodPolicy(quoteIdent(timeColumn))}` : '';
  return `(SELECT svc_meta.table_allowed(${name}))${period}`;
}

/** Statements run after the data: row security, grants to the reader role, statistics, the version stamp. */
export function* finishStatements(datasets: readonly DatasetDef[], fingerprint: string): Generator<string> {
  yield* SCOPE_FUNCTIONS;
  yield `GRANT USAGE ON SCHEMA svc_meta TO ${DEMO_READER_ROLE}`;
  yield `GRANT EXECUTE ON FUNCTION svc_meta.table_allowed(text), svc_meta.period_n(), svc_meta.period_lo(), svc_meta.period_hi(), svc_meta.period_allows(timestamptz) TO ${DEMO_READER_ROLE}`;
  yield 'REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC';
  for (const d of datasets) {
    for (const t of d.tables) {
      const rel = qualified(d, t);
      const name = quoteLiteral(`${d.schema}.${t.name}`);
      yield `ALTER TABLE ${rel} ENABLE ROW LEVEL SECURITY`;
      yield `ALTER TABLE ${rel} FORCE ROW LEVEL SECURITY`;
      yield `CREATE POLICY svc_scope ON ${rel} FOR SELECT TO ${DEMO_READER_ROLE} USING (${scopePolicy(name, t.timeColumn)})`;
    }
    yield `GRANT USAGE ON SCHEMA ${quoteIdent(d.schema)} TO ${DEMO_READER_ROLE}`;
    yield `GRANT SELECT ON ALL TABLES IN SCHEMA ${quoteIdent(d.schema)} TO ${DEMO_READER_ROLE}`;
    yield `ANALYZE ${d.tables.map((t) => qualified(d, t)).join(', ')}`;
  }
  yield 'DELETE FROM svc_meta.demo_version';
  yield `INSERT INTO svc_meta.demo_version (fingerprint) VALUES (${quoteLiteral(fingerprint)})`;
}

export interface TableData {
  readonly dataset: DatasetDef;
  readonly table: TableDef;
  readonly rows: readonly Cell[][];
}

/** Every table's generated rows, one dataset at a time (each dataset's rows are dropped once yielded). */
export function* tableData(datasets: readonly DatasetDef[]): Generator<TableData> {
  for (const d of datasets) {
    const rows = d.generate();
    for (const t of d.tables) yield { dataset: d, table: t, rows: rows.get(t.name) ?? [] };
  }
}

export function qualified(d: DatasetDef, t: TableDef): string {
  return `${quoteIdent(d.schema)}.${quoteIdent(t.name)}`;
}

/** Multi-row INSERT statements for one table (the portable path, used with an external PostgreSQL). */
export function* insertStatements({ dataset, table, rows }: TableData): Generator<string> {
  const types = table.columns.map((c) => c.type);
  const head = `INSERT INTO ${qualified(dataset, table)} (${table.columns.map((c) => quoteIdent(c.name)).join(', ')}) VALUES `;
  for (let i = 0; i < rows.length; i += 1000) {
    const values = rows.slice(i, i + 1000).map((row) => `(${row.map((cell, j) => literal(cell, types[j] as ColumnType)).join(',')})`);
    yield head + values.join(',\n');
  }
}

function copyField(cell: Cell, type: ColumnType): string {
  if (cell === null) return '\\N';
  const text = type === 'jsonb' ? JSON.stringify(cell) : type === 'boolean' ? (cell ? 't' : 'f') : String(cell);
  if (text.includes('\0')) throw new Error('NUL byte in a demo value');
  return text.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r');
}

/** One table's rows in COPY text format (the fast path, used by the embedded engine). */
export function copyText({ table, rows }: TableData): string {
  const types = table.columns.map((c) => c.type);
  let out = '';
  for (const row of rows) out += `${row.map((cell, j) => copyField(cell, types[j] as ColumnType)).join('\t')}\n`;
  return out;
}

/** Every statement that creates and fills the datasets, for an external PostgreSQL. */
export function* loadScript(datasets: readonly DatasetDef[], fingerprint: string): Generator<string> {
  yield* schemaStatements(datasets);
  for (const data of tableData(datasets)) yield* insertStatements(data);
  yield* finishStatements(datasets, fingerprint);
}
