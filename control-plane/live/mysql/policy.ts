/**
 * The MySQL/MariaDB statement checker: the agent's SQL is parsed with a MySQL-dialect parser
 * (node-sql-parser, MariaDB grammar), exactly one SELECT is accepted, and its tree is walked with
 * allow-lists (node types, operators, functions, SELECT options); every table reference is
 * resolved with CTE scoping against the connection's `read:` scopes. A table with `filter:`
 * scopes is replaced by an in-scope derived table:
 * `(SELECT * FROM `schema`.`table` WHERE <filters> LIMIT 18446744073709551615)` — the LIMIT keeps
 * MySQL from merging the derived table into the agent's query, so none of the agent's expressions
 * is evaluated on an out-of-scope row; a table without filters (every row in scope) is named as
 * scoped, `schema`.`table` AS alias, so its indexes serve the statement. What runs is the regenerated text
 * (comments, executable comments and hints in the agent's text are gone), and that text is parsed
 * and checked again ("verify"), its table list checked against a white list of the physical
 * tables in scope. Refused: INTO (OUTFILE, DUMPFILE, variables), locking reads, user and system
 * variables, assignments, placeholders, functions outside the allow-list (SLEEP, BENCHMARK,
 * LOAD_FILE, GET_LOCK, DATABASE(), USER(), …), system schemas (in any letter case, checked before
 * the scoped tables are looked up), other schemas. Table and database names keep their letter
 * case; the agent's references are compared as the server compares them (`MysqlNameCase`, from
 * `@@lower_case_table_names`). A statement the checker cannot reproduce is `invalid_sql`
 * (`unsupported`), and a parse error names the construct where parsing stopped.
 *
 * Pure: no I/O. Throws SqlPolicyError (`invalid_sql` / `scope_violation`).
 */
import nodeSqlParser from 'node-sql-parser';
import type { ParsedScopes } from '../../catalogue/index.js';
import { ApiError } from '../../errors.js';
import { lexMysql } from './lexer.js';
import { SqlPolicyError, type SqlPolicyErrorDetail } from '../../query/sql/index.js';

const { Parser } = nodeSqlParser;
const parser = new Parser();
const OPT = { database: 'MariaDB' } as const;

type Obj = Record<string, unknown>;

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

export interface MysqlChecked {
  readonly sql: string;
  readonly tables: readonly string[];
  /**
   * databases the statement named a table scoped without a schema with (`read:orders`, written
   * `shop.orders`): it reads the credential's database's table, so it runs only if the
   * credential's database is that one (checked when the query runs, see checkForServer)
   */
  readonly assumedDatabases: readonly string[];
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

/** A literal for a filter value: only characters that need no escaping in any sql_mode. */
function mysqlLiteral(value: string): string {
  if (/^-?\d{1,18}$/.test(value)) return value;
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

// ---------------------------------------------------------------------------------------------
// allow-lists

const SELECT_KEYS = new Set(['with', 'type', 'options', 'distinct', 'columns', 'into', 'from', 'where', 'groupby', 'having', 'orderby', 'collate', 'limit', 'locking_read', 'window', '_next', 'set_op', 'parentheses_symbol', '_parentheses']);
const SELECT_OPTIONS = new Set(['SQL_NO_CACHE', 'SQL_SMALL_RESULT', 'SQL_BIG_RESULT', 'SQL_BUFFER_RESULT', 'STRAIGHT_JOIN', 'ALL', 'DISTINCT', 'DISTINCTROW']);
const SET_OPS = new Set(['union', 'union all', 'union distinct', 'intersect', 'except', 'intersect all', 'except all', 'minus']);

const EXPR_TYPES = new Set([
  'column_ref', 'number', 'single_quote_string', 'double_quote_string', 'natural_string', 'hex_string', 'full_hex_string', 'bit_string', 'bool', 'null',
  'star', 'binary_expr', 'unary_expr', 'function', 'aggr_func', 'case', 'when', 'else', 'cast', 'interval', 'expr_list', 'extract', 'datatype', 'collate',
  'window', 'default', 'ASC', 'DESC', 'window_frame', 'date', 'datetime', 'time', 'timestamp', 'bigint', 'backticks_quote_string',
]);
const REFUSED_TYPES: Readonly<Record<string, string>> = {
  var: 'user and system variables (@x, @@x)',
  assign: 'assignments (:=)',
  param: 'placeholders',
  into: 'INTO',
};

const OPERATORS = new Set([
  '=', '<>', '!=', '<', '<=', '>', '>=', '<=>', 'AND', 'OR', 'XOR', '&&', '||', 'NOT', '!', '+', '-', '*', '/', '%', 'DIV', 'MOD', '&', '|', '^', '<<', '>>', '~',
  'IS', 'IS NOT', 'IN', 'NOT IN', 'LIKE', 'NOT LIKE', 'REGEXP', 'NOT REGEXP', 'RLIKE', 'NOT RLIKE', 'BETWEEN', 'NOT BETWEEN', 'EXISTS', 'NOT EXISTS', 'ESCAPE', 'SOUNDS LIKE',
]);

export const MYSQL_ALLOWED_FUNCTIONS: ReadonlySet<string> = new Set([
  // aggregates and windows
  'COUNT', 'SUM', 'AVG', 'MIN', 'MAX', 'GROUP_CONCAT', 'STD', 'STDDEV', 'STDDEV_POP', 'STDDEV_SAMP', 'VARIANCE', 'VAR_POP', 'VAR_SAMP', 'BIT_AND', 'BIT_OR', 'BIT_XOR',
  'JSON_ARRAYAGG', 'JSON_OBJECTAGG', 'ROW_NUMBER', 'RANK', 'DENSE_RANK', 'NTILE', 'LAG', 'LEAD', 'FIRST_VALUE', 'LAST_VALUE', 'NTH_VALUE', 'PERCENT_RANK', 'CUME_DIST',
  // control flow
  'IF', 'IFNULL', 'NULLIF', 'COALESCE', 'ISNULL', 'GREATEST', 'LEAST', 'EXISTS', 'NOT EXISTS',
  // strings
  'CONCAT', 'CONCAT_WS', 'LOWER', 'UPPER', 'LCASE', 'UCASE', 'LENGTH', 'CHAR_LENGTH', 'CHARACTER_LENGTH', 'OCTET_LENGTH', 'BIT_LENGTH', 'SUBSTRING', 'SUBSTR', 'MID',
  'SUBSTRING_INDEX', 'LEFT', 'RIGHT', 'TRIM', 'LTRIM', 'RTRIM', 'REPLACE', 'REVERSE', 'LPAD', 'RPAD', 'LOCATE', 'INSTR', 'POSITION', 'FORMAT', 'HEX', 'UNHEX', 'STRCMP',
  'FIELD', 'FIND_IN_SET', 'ELT', 'ASCII', 'ORD', 'CHAR', 'SOUNDEX', 'QUOTE', 'INSERT', 'REGEXP_REPLACE', 'REGEXP_SUBSTR', 'REGEXP_INSTR', 'MD5', 'SHA1', 'SHA2', 'CRC32',
  'TO_BASE64', 'FROM_BASE64', 'CONVERT',
  // numbers
  'ABS', 'CEIL', 'CEILING', 'FLOOR', 'ROUND', 'TRUNCATE', 'MOD', 'POW', 'POWER', 'SQRT', 'EXP', 'LN', 'LOG', 'LOG10', 'LOG2', 'SIGN', 'PI', 'DEGREES', 'RADIANS',
  'SIN', 'COS', 'TAN', 'ASIN', 'ACOS', 'ATAN', 'ATAN2', 'COT', 'CONV', 'BIN', 'OCT',
  // dates
  'NOW', 'CURDATE', 'CURRENT_DATE', 'CURTIME', 'CURRENT_TIME', 'CURRENT_TIMESTAMP', 'UTC_DATE', 'UTC_TIME', 'UTC_TIMESTAMP', 'LOCALTIME', 'LOCALTIMESTAMP', 'SYSDATE',
  'DATE', 'TIME', 'YEAR', 'MONTH', 'DAY', 'DAYOFMONTH', 'DAYOFWEEK', 'DAYOFYEAR', 'WEEK', 'WEEKDAY', 'WEEKOFYEAR', 'YEARWEEK', 'QUARTER', 'HOUR', 'MINUTE', 'SECOND',
  'MICROSECOND', 'MONTHNAME', 'DAYNAME', 'DATE_FORMAT', 'TIME_FORMAT', 'DATE_ADD', 'DATE_SUB', 'ADDDATE', 'SUBDATE', 'ADDTIME', 'SUBTIME', 'DATEDIFF', 'TIMEDIFF',
  'TIMESTAMPDIFF', 'TIMESTAMPADD', 'STR_TO_DATE', 'UNIX_TIMESTAMP', 'FROM_UNIXTIME', 'LAST_DAY', 'MAKEDATE', 'MAKETIME', 'TO_DAYS', 'FROM_DAYS', 'PERIOD_ADD',
  'PERIOD_DIFF', 'SEC_TO_TIME', 'TIME_TO_SEC', 'TIMESTAMP', 'EXTRACT',
  // JSON
  'JSON_EXTRACT', 'JSON_UNQUOTE', 'JSON_LENGTH', 'JSON_CONTAINS', 'JSON_CONTAINS_PATH', 'JSON_KEYS', 'JSON_OBJECT', 'JSON_ARRAY', 'JSON_VALUE', 'JSON_TYPE', 'JSON_VALID',
  'JSON_QUOTE', 'JSON_SEARCH', 'JSON_DEPTH',
]);

// ---------------------------------------------------------------------------------------------

const violation = (message: string, detail: Partial<SqlPolicyErrorDetail> = {}): SqlPolicyError =>
  new SqlPolicyError('scope_violation', message, { reason: 'construct_not_allowed', ...detail });
/** the checker could not reproduce a statement it accepted: its limitation, not a scope violation (nothing runs) */
const rewriteFailed = (): SqlPolicyError =>
  new SqlPolicyError('invalid_sql', "this statement uses syntax that svc's MySQL checker cannot reproduce faithfully, so it is not supported (nothing ran); write it another way, e.g. with a subquery or CTE", {
    reason: 'unsupported',
    construct: 'rewrite',
  });

interface Template {
  readonly entry: MysqlScopedTable;
  readonly ast: Obj;
  readonly physical: string;
}

function templateFor(entry: MysqlScopedTable): Template {
  const from = `${entry.schema !== null ? `${quoteMysqlIdent(entry.schema)}.` : ''}${quoteMysqlIdent(entry.table)}`;
  const text = `SELECT * FROM ${from}${entry.predicate !== null ? ` WHERE ${entry.predicate}` : ''} LIMIT 18446744073709551615`;
  const ast = parser.astify(text, OPT) as unknown as Obj;
  return { entry, ast, physical: `select::${entry.schema ?? 'null'}::${entry.table}` };
}

const unquote = (name: string): string => name.replace(/``/g, '`');
const ASCII = /^[\x00-\x7f]*$/;

class MysqlWalker {
  readonly tables = new Set<string>();
  readonly assumedDatabases = new Set<string>();
  readonly physical = new Set<string>();
  readonly cteNames = new Set<string>();
  constructor(
    private readonly policy: MysqlPolicy,
    private readonly mode: 'check' | 'verify',
  ) {}

  /** a name as the server compares it (CTE names, table lookups) */
  key(name: string): string {
    return this.policy.names === 'fold' ? name.toLowerCase() : name;
  }

  /**
   * Whether a table reference names a CTE in scope. When the server folds case, only an ASCII
   * name can (CTE names are ASCII there): a reference JavaScript would fold onto a CTE name (the
   * Kelvin sign onto k, …) is looked up as a table and rewritten to the scoped name, or refused.
   */
  private isCte(table: string, ctes: readonly ReadonlySet<string>[]): boolean {
    if (this.policy.names === 'fold' && !ASCII.test(table)) return false;
    return ctes.some((f) => f.has(this.key(table)));
  }

  /** the scoped table a reference names: exactly as written, or (when the server folds case) the one scoped name it folds to */
  private lookup(written: string): MysqlScopedTable | undefined {
    const exact = this.policy.allowed.get(written);
    if (exact || this.policy.names === 'exact') return exact;
    const hits = new Set<MysqlScopedTable>();
    for (const [k, e] of this.policy.allowed) if (k.toLowerCase() === written.toLowerCase()) hits.add(e);
    if (hits.size > 1) {
      throw new SqlPolicyError('scope_violation', `table "${written}" matches several scoped tables that differ only in letter case (${[...hits].map((e) => e.name).join(', ')}); write the name exactly as scoped`, { reason: 'table_not_in_scope', table: written });
    }
    return [...hits][0];
  }

  private readable(): string {
    const names = [...new Set([...this.policy.allowed.values()].map((e) => e.name))].sort();
    return names.length ? `readable tables: ${names.join(', ')}` : 'this connection cannot read any table';
  }

  /** the top-level statement: in verify mode, any refusal means the rewrite did not come back as checked */
  statement(node: unknown): void {
    if (this.mode === 'check') return this.select(node, []);
    try {
      this.select(node, []);
    } catch (err) {
      if (err instanceof SqlPolicyError && err.code === 'scope_violation') throw rewriteFailed();
      throw err;
    }
  }

  select(node: unknown, ctes: readonly ReadonlySet<string>[]): void {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) throw rewriteFailed();
    const s = node as Obj;
    if (s['type'] !== 'select') throw violation(`${String(s['type'] ?? 'this statement').toUpperCase()} is not allowed: only a single SELECT can run`, { reason: 'not_a_read' });
    for (const [k, v] of Object.entries(s)) {
      if (!SELECT_KEYS.has(k) && v !== null && v !== undefined) throw violation(`the SELECT clause ${k} is not supported`);
    }
    const options = s['options'];
    if (options !== null && options !== undefined) {
      for (const o of Array.isArray(options) ? options : [options]) {
        if (typeof o !== 'string' || !SELECT_OPTIONS.has(o.toUpperCase())) throw violation(`SELECT option ${String(typeof o === 'string' ? o : '?')} is not allowed`);
      }
    }
    const into = s['into'] as Obj | null | undefined;
    if (into && Object.entries(into).some(([k, v]) => k !== 'position' && v !== null && v !== undefined)) {
      throw violation('SELECT … INTO (OUTFILE, DUMPFILE or variables) is not allowed: results come back in the response', { construct: 'INTO' });
    }
    if (into && into['position'] !== null && into['position'] !== undefined) throw violation('SELECT … INTO is not allowed', { construct: 'INTO' });
    if (s['locking_read'] !== null && s['locking_read'] !== undefined) throw violation('locking reads (FOR UPDATE, LOCK IN SHARE MODE) are not allowed', { construct: 'FOR UPDATE' });
    const setOp = s['set_op'];
    if (setOp !== null && setOp !== undefined && (typeof setOp !== 'string' || !SET_OPS.has(setOp.toLowerCase()))) throw violation(`set operation ${String(setOp)} is not allowed`);

    // WITH: each CTE sees the ones before it (and itself when RECURSIVE)
    let scope = ctes;
    const withList = s['with'];
    if (withList !== null && withList !== undefined) {
      if (!Array.isArray(withList)) throw rewriteFailed();
      const frame = new Set<string>();
      scope = [...ctes, frame];
      for (const cte of withList as Obj[]) {
        const name = ((cte['name'] as Obj | undefined)?.['value'] ?? cte['name']) as unknown;
        if (typeof name !== 'string') throw rewriteFailed();
        const raw = unquote(name);
        if (this.policy.names === 'fold' && !ASCII.test(raw)) {
          // JavaScript folds letter case differently from the server beyond ASCII (ẞ, Georgian
          // capitals, …): the checker could take a table reference for this CTE that the server
          // reads as the table
          throw new SqlPolicyError('invalid_sql', `CTE names must be ASCII on a server that compares table names case-insensitively (lower_case_table_names = 1 or 2): rename "${raw}"`, {
            reason: 'unsupported',
            construct: 'CTE name',
          });
        }
        const key = this.key(raw);
        if (cte['recursive'] === true) frame.add(key);
        const stmt = cte['stmt'] as Obj | undefined;
        if (!stmt || typeof stmt !== 'object') throw rewriteFailed();
        this.select(stmt['ast'] ?? stmt, scope);
        this.expr(cte['columns'], scope);
        frame.add(key);
        this.cteNames.add(key);
      }
    }
    const from = s['from'];
    if (from !== null && from !== undefined) {
      // a lone parenthesised join is given as one object, not a list
      if (Array.isArray(from)) this.fromList(from as Obj[], scope);
      else if (typeof from === 'object' && Array.isArray((from as Obj)['expr'])) this.fromList([from as Obj], scope);
      else throw rewriteFailed();
    }
    for (const k of ['columns', 'where', 'groupby', 'having', 'orderby', 'limit', 'window', 'collate', 'distinct']) this.expr(s[k], scope);
    // the next member of a set operation sees only the enclosing CTEs: whether this member's own
    // WITH reaches it depends on parentheses the tree does not keep (MySQL 8 scopes a WITH inside
    // parentheses to its member), so a name defined there is looked up as a table in later members
    if (s['_next'] !== null && s['_next'] !== undefined) this.select(s['_next'], ctes);
  }

  private fromList(items: Obj[], ctes: readonly ReadonlySet<string>[]): void {
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as Obj;
      this.expr(item['on'], ctes);
      if (item['using'] !== undefined && item['using'] !== null) this.expr(item['using'], ctes);
      if (item['type'] === 'dual') continue;
      if ('table' in item && typeof item['table'] === 'string') {
        items[i] = this.tableRef(item, ctes);
        continue;
      }
      const e = item['expr'];
      if (Array.isArray(e)) {
        const joins = item['joins'];
        if (Array.isArray(joins) && joins.length > 0) throw violation('this form of parenthesised join is not supported; write the joins without parentheses');
        this.fromList(e as Obj[], ctes); // parenthesised join
        continue;
      }
      if (e && typeof e === 'object' && 'ast' in (e as Obj)) {
        this.select((e as Obj)['ast'], ctes);
        continue;
      }
      throw violation('this kind of FROM item is not supported (table functions, JSON_TABLE, VALUES …)');
    }
  }

  private tableRef(item: Obj, ctes: readonly ReadonlySet<string>[]): Obj {
    for (const [k, v] of Object.entries(item)) {
      if (!['db', 'table', 'as', 'join', 'on', 'using', 'schema'].includes(k) && v !== null && v !== undefined) throw violation(`table option ${k} is not supported`);
    }
    const dbRaw = item['db'] as string | null;
    const table = unquote(item['table'] as string);
    const db = dbRaw === null || dbRaw === undefined ? null : unquote(dbRaw);
    const written = db === null ? table : `${db}.${table}`;
    // system schemas first, in any letter case: no scope makes them readable
    if (db !== null && isMysqlSystemSchema(db)) {
      if (this.mode === 'verify') throw rewriteFailed();
      throw new SqlPolicyError('scope_violation', `table "${written}" is in the system schema ${db} and cannot be read; ${this.readable()}`, { reason: 'system_catalog', table: written });
    }
    if (this.mode === 'verify') {
      // the verify pass sees only what the check pass wrote: CTE names and our own templates' tables (exactly as written)
      if (db === null && this.isCte(table, ctes)) return item;
      const phys = `select::${db ?? 'null'}::${table}`;
      if (!this.physical.has(phys)) throw rewriteFailed();
      return item;
    }
    if (db === null && this.isCte(table, ctes)) return item;
    let entry = this.lookup(written);
    if (!entry && db !== null) {
      // `shop.orders` for `read:orders`: the same table if the credential's database is shop
      const bare = this.lookup(table);
      if (bare && bare.schema === null) {
        entry = bare;
        this.assumedDatabases.add(db);
      }
    }
    if (!entry) {
      throw new SqlPolicyError('scope_violation', `table "${written}" is not in this connection's scopes${this.policy.names === 'exact' ? ' (this server compares table names case-sensitively: write them exactly as scoped)' : ''}; ${this.readable()}`, { reason: 'table_not_in_scope', table: written });
    }
    this.tables.add(entry.name);
    const alias = typeof item['as'] === 'string' ? item['as'] : entry.table;
    let out: Obj;
    if (entry.predicate === null) {
      // every row of the table is in scope: it is read as itself, exactly as scoped (a derived
      // table with LIMIT would be materialized whole for every statement, index or not)
      this.physical.add(`select::${entry.schema ?? 'null'}::${entry.table}`);
      out = { db: entry.schema, table: entry.table, as: alias };
    } else {
      const t = templateFor(entry);
      this.physical.add(t.physical);
      out = { expr: { ast: t.ast, parentheses: true }, as: alias };
    }
    if (item['join'] !== undefined) out['join'] = item['join'];
    if (item['on'] !== undefined) out['on'] = item['on'];
    if (item['using'] !== undefined) out['using'] = item['using'];
    return out;
  }

  expr(v: unknown, ctes: readonly ReadonlySet<string>[]): void {
    if (v === null || v === undefined || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      for (const x of v) this.expr(x, ctes);
      return;
    }
    const o = v as Obj;
    if ('ast' in o) {
      this.select(o['ast'], ctes);
      return;
    }
    const type = o['type'];
    if (typeof type === 'string') {
      if (type in REFUSED_TYPES) throw violation(`${REFUSED_TYPES[type]} are not allowed`, { construct: type });
      if (type === 'origin') {
        if (String(o['value']).toLowerCase() !== 'with rollup') throw violation(`${JSON.stringify(String(o['value']).slice(0, 40))} is not allowed here`);
        return;
      }
      if (!EXPR_TYPES.has(type)) throw violation(`the construct ${type} is not supported`, { construct: type });
      if (type === 'binary_expr' || type === 'unary_expr') {
        const op = String(o['operator']).toUpperCase();
        if (!OPERATORS.has(op)) throw violation(`operator ${op} is not allowed`, { construct: op });
      }
      if (type === 'function') {
        this.functionName(o['name']);
        for (const [k, x] of Object.entries(o)) if (k !== 'name') this.expr(x, ctes);
        return;
      }
      if (type === 'aggr_func') {
        const name = String(o['name']).toUpperCase();
        if (!MYSQL_ALLOWED_FUNCTIONS.has(name)) throw violation(`function ${name} is not allowed`, { reason: 'function_not_allowed', function: name });
      }
      if (type === 'column_ref' && typeof o['column'] === 'string' && o['column'].startsWith('@')) throw violation('variables are not allowed');
    }
    for (const [k, x] of Object.entries(o)) if (k !== 'type') this.expr(x, ctes);
  }

  private functionName(name: unknown): void {
    const n = name as { name?: { value?: unknown }[]; schema?: unknown } | undefined;
    const parts = Array.isArray(n?.name) ? n.name : [];
    if (n?.schema || parts.length !== 1) throw violation('schema-qualified functions are not allowed', { reason: 'function_not_allowed' });
    const fn = String(parts[0]?.value ?? '').toUpperCase();
    if (!MYSQL_ALLOWED_FUNCTIONS.has(fn)) throw violation(`function ${fn} is not allowed`, { reason: 'function_not_allowed', function: fn });
  }
}

function parseMysql(sql: string): Obj[] {
  if (sql.includes('\u0000')) throw new SqlPolicyError('invalid_sql', 'the statement contains a NUL character', { reason: 'syntax_error' });
  if (sql.trim() === '') throw new SqlPolicyError('invalid_sql', 'the statement is empty', { reason: 'empty_statement' });
  let ast: unknown;
  try {
    ast = parser.astify(sql, OPT);
  } catch (err) {
    throw parseFailure(sql, err);
  }
  return (Array.isArray(ast) ? ast : [ast]) as Obj[];
}

/**
 * A parser failure as the agent should read it: where, and which construct (the words at that
 * point) is not supported, never the grammar's list of expected tokens. The position is in
 * `position` (the API adds "at character N" once).
 */
const CLAUSE_WORDS = new Set(['SELECT', 'FROM', 'WHERE', 'AND', 'OR', 'NOT', 'ON', 'BY', 'JOIN', 'AS', 'WITH', 'HAVING', 'LIMIT', 'OFFSET', 'UNION', 'ALL', 'DISTINCT', 'IN', 'IS', 'NULL', 'CASE', 'WHEN', 'THEN', 'ELSE', 'END', 'USING', 'LEFT', 'RIGHT', 'INNER', 'OUTER', 'CROSS', 'GROUP', 'ORDER']);

function parseFailure(sql: string, err: unknown): SqlPolicyError {
  const e = err as { location?: { start?: { offset?: number } } };
  const at = typeof e.location?.start?.offset === 'number' ? Math.max(0, Math.min(sql.length, e.location.start.offset)) : undefined;
  if (at === undefined) return new SqlPolicyError('invalid_sql', "the statement is not valid MySQL, or uses syntax svc's MySQL checker does not support; only a single SELECT (WITH, JOIN, subqueries, UNION, window functions) can run", { reason: 'syntax_error' });
  const rest = sql.slice(at).trimStart();
  if (rest === '') {
    return new SqlPolicyError('invalid_sql', 'the statement ends unexpectedly (is a clause, a closing parenthesis or an operand missing?)', { reason: 'syntax_error' }, at);
  }
  // the construct: the keyword(s) or symbol where parsing stopped, e.g. `RETURNING`, `LATERAL (`, `::`
  const words = /^([A-Za-z_][A-Za-z0-9_$]*(?:\s+[A-Za-z_][A-Za-z0-9_$]*)?|::|[^\sA-Za-z0-9_$]{1,3})/.exec(rest)?.[1] ?? rest.slice(0, 1);
  // the word before is often the unsupported keyword, read as an alias (e.g. `TABLESAMPLE (`, `WINDOW w`)
  const before = /([A-Za-z_][A-Za-z0-9_$]*)\s*$/.exec(sql.slice(0, at))?.[1] ?? '';
  const prev = before && !CLAUSE_WORDS.has(before.toUpperCase()) ? before : '';
  const construct = `${prev ? `${prev} ` : ''}${words}`.replace(/\s+/g, ' ').slice(0, 40);
  const context = `${at > 30 ? '…' : ''}${sql.slice(Math.max(0, at - 30), at)}${sql.slice(at, at + 30)}${at + 30 < sql.length ? '…' : ''}`.replace(/\s+/g, ' ');
  const first = /^\s*\(*\s*([A-Za-z]+)/.exec(sql)?.[1]?.toUpperCase();
  const hint = first && first !== 'SELECT' && first !== 'WITH' ? ` (${first} statements are not supported: only a single SELECT can run)` : '';
  return new SqlPolicyError(
    'invalid_sql',
    `the statement does not parse as MySQL near ${JSON.stringify(construct)} (in ${JSON.stringify(context)}): this construct is not supported by svc's MySQL checker, or is not valid MySQL here${hint}`,
    { reason: 'syntax_error', construct },
    at,
  );
}

/** Nesting the MySQL checker accepts (its parser's time grows about 3x a level of CAST-like calls). */
export const MAX_SPECIAL_DEPTH = 2;
export const MAX_PAREN_DEPTH = 64;

/** Check one MySQL statement against the policy and rewrite it to read only in-scope rows. */
export function checkMysql(sql: string, policy: MysqlPolicy): MysqlChecked {
  // executable comments and optimizer hints would be gone from what runs; refuse them so the
  // agent is never surprised, and so that nothing depends on how a comment is lexed
  if (/\/\*(?:[!+]|M!)/i.test(sql)) throw violation('executable comments and optimizer hints (/*! … */, /*M! … */, /*+ … */) are not allowed', { construct: 'executable comment' });
  // where the server and the checker's parser would split the text differently, refuse before
  // parsing: what the parser reads as a comment or an escaped character the server would run
  const lexed = lexMysql(sql);
  if (lexed.specialDepth > MAX_SPECIAL_DEPTH || lexed.parenDepth > MAX_PAREN_DEPTH) {
    // the parser backtracks through nested CAST(… AS …)-like calls in exponential time (a
    // 244-byte statement of 16 nested CASTs held the check for minutes)
    throw new SqlPolicyError(
      'invalid_sql',
      lexed.specialDepth > MAX_SPECIAL_DEPTH
        ? `CAST, CONVERT, TRIM, SUBSTRING, EXTRACT, POSITION and CHAR calls can be nested at most ${MAX_SPECIAL_DEPTH} deep on the mysql target (this statement nests them ${lexed.specialDepth} deep); use a subquery or CTE for the inner part`
        : `parentheses can be nested at most ${MAX_PAREN_DEPTH} deep on the mysql target (this statement nests them ${lexed.parenDepth} deep)`,
      { reason: 'too_complex' },
    );
  }
  if (lexed.undefinedEscapes > 0) throw literalReadDifferently();
  if (lexed.bareDashes > 0) {
    throw new SqlPolicyError(
      'invalid_sql',
      "`--` not followed by a space is two minus signs to MySQL but the start of a comment to svc's MySQL checker, so it is not supported (nothing ran); write `- -1` for a double negation, or `-- ` (with a space) for a comment",
      { reason: 'unsupported', construct: '--' },
    );
  }
  const stmts = parseMysql(sql);
  if (stmts.length !== 1) throw new SqlPolicyError('scope_violation', `exactly one statement can run per query; got ${stmts.length}`, { reason: 'multiple_statements' });
  const stmt = stmts[0] as Obj;
  const checker = new MysqlWalker(policy, 'check');
  guard(() => checker.statement(stmt));
  let out: string;
  try {
    out = parser.sqlify(stmt as unknown as Parameters<typeof parser.sqlify>[0], OPT);
  } catch {
    throw rewriteFailed();
  }
  assertServerReadsAsChecked(sql, out, policy);
  // verify what runs: one SELECT, the same checks, and only our own physical tables and CTEs
  let again: Obj[];
  try {
    again = parseMysql(out);
  } catch {
    throw rewriteFailed();
  }
  if (again.length !== 1) throw rewriteFailed();
  const verifier = new MysqlWalker(policy, 'verify');
  for (const p of checker.physical) verifier.physical.add(p);
  guard(() => verifier.statement(again[0]));
  try {
    const white = [...checker.physical, ...[...checker.cteNames].map((c) => `select::null::${c}`)];
    parser.whiteListCheck(out, white.length ? white : ['select::null::dual'], { ...OPT, type: 'table' });
  } catch {
    throw rewriteFailed();
  }
  return { sql: out, tables: [...checker.tables].sort(), assumedDatabases: [...checker.assumedDatabases].sort() };
}

/**
 * The rewritten text is what the server runs, so it must mean to the server what the checker
 * checked: lexed as the server lexes it (lexer.ts), it holds no comment, and each of its string
 * literals is one the agent wrote (as the server decodes it) or a scope filter's own value. The
 * parser decodes some escapes the server does not (`\u0027` becomes a quote), which would
 * otherwise turn a literal into SQL the checker never saw.
 */
function assertServerReadsAsChecked(input: string, out: string, policy: MysqlPolicy): void {
  const written = lexMysql(input);
  const runs = lexMysql(out);
  const left = new Map<string, number>();
  for (const v of written.literals) left.set(v, (left.get(v) ?? 0) + 1);
  const ours = new Set<string>();
  for (const e of new Set(policy.allowed.values())) if (e.predicate !== null) for (const v of lexMysql(e.predicate).literals) ours.add(v);
  for (const v of runs.literals) {
    const n = left.get(v) ?? 0;
    if (n > 0) left.set(v, n - 1);
    else if (!ours.has(v)) throw literalReadDifferently();
  }
  if (runs.comments > 0 || runs.bareDashes > 0 || runs.undefinedEscapes > 0 || runs.unterminated) throw rewriteFailed();
}

function literalReadDifferently(): SqlPolicyError {
  return new SqlPolicyError(
    'invalid_sql',
    "a string literal of this statement would be read differently by the server than by svc's MySQL checker (a backslash escape such as \\u or \\f that MySQL does not define), so it is not supported (nothing ran); write the literal without that escape",
    { reason: 'unsupported', construct: 'string literal escape' },
  );
}

function guard<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof RangeError) throw new SqlPolicyError('invalid_sql', 'the statement is too complex', { reason: 'too_complex' });
    throw err;
  }
}
