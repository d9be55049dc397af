/**
 * A `mysql` connection's tables from the server's `information_schema` (the connector's own
 * statement, never the agent's SQL). An unqualified scope means the credential's database
 * (`DATABASE()`), never a system schema; names are matched as the server compares them
 * (`@@lower_case_table_names`: 0 exactly, else folding case), whatever collation
 * `information_schema` compares with. `information_schema` shows only what the credential's user
 * has a privilege on, so a column it cannot read is not listed. A column is joined to its own
 * table byte for byte: `information_schema` compares names case-insensitively on MariaDB, so
 * `orders` and `Orders` (two tables on a case-sensitive server) would each get the other's columns.
 */
import type { ParsedScopes } from '../../catalogue/index.js';
import type { ReadQueryResult } from '../../results/index.js';
import { ApiError } from '../../errors.js';
import { unreadAfterCut, type SchemaColumn, type SchemaListing, type SchemaTable } from '../../query/schema.js';
import { isMysqlSystemSchema, MYSQL_SYSTEM_SCHEMAS, mysqlPolicy, nameCaseOf } from './policy.js';

export interface MysqlScopedTable {
  /** the scope's own name, as the agent writes it (`orders`, `shop.orders`) */
  readonly name: string;
  /** null: the credential's database */
  readonly schema: string | null;
  readonly table: string;
  readonly filtered: boolean;
}

/** The scoped tables, once each per scope (an unqualified and a qualified scope may still be one table: see mysqlListing). */
export function mysqlScopedTables(scopes: ParsedScopes): MysqlScopedTable[] {
  const seen = new Map<string, MysqlScopedTable>();
  for (const t of mysqlPolicy(scopes).allowed.values()) if (!seen.has(t.name)) seen.set(t.name, { name: t.name, schema: t.schema, table: t.table, filtered: t.predicate !== null });
  return [...seen.values()];
}

/** a scoped name as a string literal: scopes admit only letters, digits, `_` and `$` */
function literal(name: string): string {
  if (!/^[A-Za-z0-9_$]{1,64}$/.test(name)) throw new ApiError('internal_error', 'a scoped name is not an identifier');
  return `'${name}'`;
}

export function mysqlCatalogSql(tables: readonly MysqlScopedTable[]): string {
  // one equality per name, never an IN list: MariaDB reads `TABLE_NAME IN ('orders', 'Orders')`
  // (values equal in information_schema's case-insensitive collation) as a lookup of the first
  // name's table alone, so on a case-sensitive server `Orders` would never be found
  const anyOf = (names: readonly string[]): string => `(${names.map((n) => `c.TABLE_NAME = ${literal(n)}`).join(' OR ')})`;
  const bySchema = new Map<string | null, string[]>();
  for (const t of tables) bySchema.set(t.schema, [...(bySchema.get(t.schema) ?? []), t.table]);
  const systems = [...MYSQL_SYSTEM_SCHEMAS].map(literal).join(', ');
  const where = [...bySchema]
    .map(([schema, names]) =>
      schema === null
        ? `(c.TABLE_SCHEMA = DATABASE() AND LOWER(DATABASE()) NOT IN (${systems}) AND ${anyOf(names)})`
        : `(c.TABLE_SCHEMA = ${literal(schema)} AND ${anyOf(names)})`,
    )
    .join(' OR ');
  return `SELECT c.TABLE_SCHEMA AS schema_name, c.TABLE_NAME AS table_name, c.COLUMN_NAME AS column_name, c.COLUMN_TYPE AS column_type,
  c.IS_NULLABLE AS is_nullable, t.TABLE_TYPE AS table_type, t.TABLE_ROWS AS table_rows, DATABASE() AS current_database, @@lower_case_table_names AS name_case
FROM information_schema.COLUMNS c
JOIN information_schema.TABLES t ON BINARY t.TABLE_SCHEMA = BINARY c.TABLE_SCHEMA AND BINARY t.TABLE_NAME = BINARY c.TABLE_NAME
WHERE ${where}
ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION`;
}

export function mysqlListing(result: ReadQueryResult, tables: readonly MysqlScopedTable[]): SchemaListing {
  const first = result.rows[0];
  const fold = first !== undefined && nameCaseOf(first['name_case']) === 'fold';
  const current = first?.['current_database'];
  const database = typeof current === 'string' && !isMysqlSystemSchema(current) ? current : null;
  const norm = (s: string): string => (fold ? s.toLowerCase() : s);
  const keyOf = (r: Record<string, unknown>): string => `${norm(String(r['schema_name']))}.${norm(String(r['table_name']))}`;
  const cut = unreadAfterCut(result, keyOf);
  const found = new Map<string, { columns: SchemaColumn[]; estimate: number | undefined }>();
  for (const r of result.rows) {
    const key = keyOf(r);
    let entry = found.get(key);
    if (!entry) {
      const rows = r['table_rows'] === null || r['table_rows'] === undefined ? NaN : Number(r['table_rows']);
      found.set(key, (entry = { columns: [], estimate: r['table_type'] === 'BASE TABLE' && Number.isSafeInteger(rows) && rows >= 0 ? rows : undefined }));
    }
    entry.columns.push({ name: String(r['column_name']), type: String(r['column_type']), nullable: r['is_nullable'] === 'YES' });
  }
  // one table, however it is scoped (`orders` and `shop.orders` when the credential's database is shop)
  const byTable = new Map<string, { name: string; filtered: boolean; columns: SchemaColumn[]; estimate: number | undefined }>();
  const missing: string[] = [];
  for (const t of tables) {
    const schema = t.schema ?? database;
    const key = schema === null ? undefined : `${norm(schema)}.${norm(t.table)}`;
    const entry = key === undefined || key === cut.partial ? undefined : found.get(key);
    if (key === undefined || !entry) {
      // an unqualified scope under a system-schema database is known missing, cut or not
      if (cut.missingKnown || (key === undefined && first !== undefined)) missing.push(t.name);
      continue;
    }
    const known = byTable.get(key);
    if (known) known.filtered ||= t.filtered;
    else byTable.set(key, { name: t.name, filtered: t.filtered, columns: entry.columns, estimate: entry.estimate });
  }
  const listed: SchemaTable[] = [...byTable.values()].map((t) => ({ name: t.name, columns: t.columns, ...(t.estimate !== undefined && !t.filtered ? { row_estimate: t.estimate } : {}) }));
  return { tables: listed, missing, truncated: result.truncated };
}
