/**
 * A MySQL/MariaDB connection's scopes as the checker's policy (check.ts): `read:` scopes name the
 * tables, `filter:` scopes become row predicates; names keep their letter case and are compared
 * as the server compares them (`MysqlNameCase`). System schemas, and backtick quoting.
 */
import type { ParsedScopes } from '../../catalogue/index.js';
import { ApiError } from '../../errors.js';

export interface MysqlScopedTable {
  /** agent-facing name as scoped: `table` or `schema.table` */
  readonly name: string;
  /** null = the credential's database (unqualified reference) */
  readonly schema: string | null;
  readonly table: string;
  readonly predicate: string | null;
}

/**
 * How the server compares table and database names (`@@lower_case_table_names`): `exact` for 0
 * (case-sensitive: `ORDERS` and `orders` are two tables), `fold` for 1 and 2 (case-insensitive).
 */
export type MysqlNameCase = 'exact' | 'fold';

/** the comparison a server's `@@lower_case_table_names` value means (anything but 0 folds) */
export function nameCaseOf(lowerCaseTableNames: unknown): MysqlNameCase {
  return Number(lowerCaseTableNames) === 0 ? 'exact' : 'fold';
}

export interface MysqlPolicy {
  /** scoped tables keyed by the name as scoped (letter case kept), plus the bare table name when unambiguous */
  readonly allowed: ReadonlyMap<string, MysqlScopedTable>;
  readonly names: MysqlNameCase;
}

export const MYSQL_SYSTEM_SCHEMAS: ReadonlySet<string> = new Set(['information_schema', 'mysql', 'performance_schema', 'sys']);

/** a MySQL system schema, in any letter case (MySQL compares these case-insensitively) */
export function isMysqlSystemSchema(schema: string): boolean {
  return MYSQL_SYSTEM_SCHEMAS.has(schema.toLowerCase());
}

/** Backtick-quote an identifier. */
export function quoteMysqlIdent(name: string): string {
  return '`' + name.replace(/`/g, '``') + '`';
}

/**
 * A literal for a filter value: only characters that need no escaping in any sql_mode. Always a
 * string, never a bare number: MySQL compares a text column with a number as numbers, so
 * `tenant = 5` would also keep '5abc', '05' and ' 5'; `'5'` still equals 5 on a numeric column.
 */
function mysqlLiteral(value: string): string {
  if (/['\\\u0000-\u001f]/.test(value)) {
    return `X'${Buffer.from(value, 'utf8').toString('hex')}'`; // a hex literal needs no escaping at all
  }
  return `'${value}'`;
}

/**
 * `read:<table>` / `read:<schema>.<table>` and `filter:[<schema>.]<table>.<column>=<value>` scopes
 * as a policy. Names keep the letter case they were scoped with, and the rewrite reads exactly
 * that name; `names` says how the agent's references are compared with them: as the server
 * compares names (`nameCaseOf(@@lower_case_table_names)`); `fold` before the server is known.
 */
export function mysqlPolicy(scopes: ParsedScopes, names: MysqlNameCase = 'fold'): MysqlPolicy {
  if (scopes.read === 'all') throw new ApiError('invalid_scope', 'a mysql connection names its tables: read:<table> or read:<schema>.<table> (read:* is not available on databases)');
  const allowed = new Map<string, MysqlScopedTable>();
  const byName = new Map<string, number>();
  for (const t of scopes.read) {
    const table = t.includes('.') ? (t.split('.')[1] as string) : t;
    byName.set(table, (byName.get(table) ?? 0) + 1);
  }
  for (const scoped of scopes.read) {
    const [schema, table] = scoped.includes('.') ? (scoped.split('.') as [string, string]) : [null, scoped];
    if (schema !== null && isMysqlSystemSchema(schema)) throw new ApiError('invalid_scope', `${schema} is a system schema and cannot be read`, { scope: `read:${scoped}` });
    const filters = scopes.filters.filter((f) => f.table === scoped).map((f) => `${quoteMysqlIdent(f.column)} = ${mysqlLiteral(f.value)}`);
    const entry: MysqlScopedTable = { name: scoped, schema, table, predicate: filters.length ? filters.join(' AND ') : null };
    allowed.set(scoped, entry);
    if (schema !== null && byName.get(table) === 1 && !allowed.has(table)) allowed.set(table, entry);
  }
  return { allowed, names };
}
