/**
 * Turning the demo datasets into SQL: one schema per dataset, a read-only role that owns nothing,
 * and the generated rows. The same script loads the embedded engine and an external PostgreSQL.
 */
import { createHash } from 'node:crypto';
import type { Cell, ColumnType, DatasetDef, TableDef } from './types.js';

/** Bump when the generators change the rows they produce. */
export const DEMO_DATA_VERSION = 1;

/** The non-owner role demo queries run as. */
export const DEMO_READER_ROLE = 'svc_demo_reader';

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

export function quoteLiteral(text: string): string {
  if (text.includes('\0')) throw new Error('NUL byte in a demo value');
  return `'${text.replace(/'/g, "''")}'`;
}

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
  return createHash('sha256').update(JSON.stringify({ v: DEMO_DATA_VERSION, shape })).digest('hex').slice(0, 16);
}

function createTable(d: DatasetDef, t: TableDef): string {
  const cols = t.columns.map((c) => `${quoteIdent(c.name)} ${SQL_TYPE[c.type]}${c.notNull === false ? '' : ' NOT NULL'}${c.name === t.primaryKey ? ' PRIMARY KEY' : ''}`);
  return `CREATE TABLE ${quoteIdent(d.schema)}.${quoteIdent(t.name)} (${cols.join(', ')})`;
}

/** Statements that create and fill every dataset; yields them in batches to bound memory. */
export function* loadScript(datasets: readonly DatasetDef[], fingerprint: string): Generator<string> {
  yield `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${DEMO_READER_ROLE}') THEN CREATE ROLE ${DEMO_READER_ROLE} NOLOGIN; END IF; END $$`;
  yield 'CREATE SCHEMA IF NOT EXISTS svc_meta';
  yield 'CREATE TABLE IF NOT EXISTS svc_meta.demo_version (fingerprint text PRIMARY KEY, loaded_at timestamptz NOT NULL DEFAULT now())';
  for (const d of datasets) {
    yield `DROP SCHEMA IF EXISTS ${quoteIdent(d.schema)} CASCADE`;
    yield `CREATE SCHEMA ${quoteIdent(d.schema)}`;
    for (const t of d.tables) yield createTable(d, t);
    const rows = d.generate();
    for (const t of d.tables) {
      const data = rows.get(t.name) ?? [];
      const types = t.columns.map((c) => c.type);
      const head = `INSERT INTO ${quoteIdent(d.schema)}.${quoteIdent(t.name)} (${t.columns.map((c) => quoteIdent(c.name)).join(', ')}) VALUES `;
      for (let i = 0; i < data.length; i += 1000) {
        const values = data.slice(i, i + 1000).map((row) => `(${row.map((cell, j) => literal(cell, types[j] as ColumnType)).join(',')})`);
        yield head + values.join(',\n');
      }
    }
    yield `GRANT USAGE ON SCHEMA ${quoteIdent(d.schema)} TO ${DEMO_READER_ROLE}`;
    yield `GRANT SELECT ON ALL TABLES IN SCHEMA ${quoteIdent(d.schema)} TO ${DEMO_READER_ROLE}`;
    yield `ANALYZE ${d.tables.map((t) => `${quoteIdent(d.schema)}.${quoteIdent(t.name)}`).join(', ')}`;
  }
  yield `DELETE FROM svc_meta.demo_version`;
  yield `INSERT INTO svc_meta.demo_version (fingerprint) VALUES (${quoteLiteral(fingerprint)})`;
}
