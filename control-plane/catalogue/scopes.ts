/**
 * Scope grammar and parsing (docs/scopes-and-queries.md): `read:<table>` / `read:*`,
 * `period:<YYYY>` / `period:<YYYY>-Q<1-4>` / `period:<YYYY>-<MM>` (half-open UTC intervals), and
 * the target's own scopes (e.g. `relay:<relay_id>`).
 */
import { ApiError } from '../errors.js';

export interface ScopeRule {
  readonly name: string;
  readonly pattern: string;
  readonly description: string;
  readonly required: boolean;
  readonly examples: readonly string[];
}

export interface Interval {
  readonly label: string;
  /** inclusive, ISO 8601 UTC */
  readonly start: string;
  /** exclusive, ISO 8601 UTC */
  readonly end: string;
}

export interface ParsedScopes {
  /** tables the connection may read (agent-facing names), or every table of the target */
  readonly read: 'all' | ReadonlySet<string>;
  /** row periods; empty means no period restriction; several are a union */
  readonly periods: readonly Interval[];
  readonly relay: string | undefined;
  /** row filters (relay): rows of `table` whose `column` equals `value` */
  readonly filters: readonly { table: string; column: string; value: string }[];
  /** the scopes as given, de-duplicated, in order */
  readonly normalized: readonly string[];
}

export interface ScopeTarget {
  readonly id: string;
  readonly grammar: readonly ScopeRule[];
  /** tables that `read:` may name; null when any `<table>` / `<schema>.<table>` is allowed (databases) */
  readonly tableNames: readonly string[] | null;
  /**
   * Databases: the schemas no scope may name (system catalogs), compared case-insensitively;
   * `pg_temp*` / `pg_toast_temp*` are covered by prefix for PostgreSQL.
   */
  readonly systemSchemas?: 'postgres' | 'mysql';
  /**
   * Databases: the schema an unqualified `<table>` means (`public` on PostgreSQL), so that
   * `orders` and `public.orders` are one table in every scope kind; null when it is only known at
   * query time (MySQL: the credential's database).
   */
  readonly defaultSchema?: string | null;
  /** MySQL: table names keep their letter case (the server decides how they compare) */
  readonly preserveCase?: boolean;
}

export const POSTGRES_SYSTEM_SCHEMAS: ReadonlySet<string> = new Set(['pg_catalog', 'information_schema', 'pg_toast']);
export const MYSQL_SYSTEM_SCHEMAS: ReadonlySet<string> = new Set(['information_schema', 'mysql', 'performance_schema', 'sys']);

/**
 * Whether a schema name is a system schema of that kind of database, in any letter case:
 * PostgreSQL `pg_catalog`, `information_schema`, `pg_toast`, `pg_temp*`, `pg_toast_temp*` (and any
 * other `pg_*` schema: PostgreSQL reserves the prefix for itself); MySQL `mysql`,
 * `information_schema`, `performance_schema`, `sys`.
 */
export function isSystemSchema(kind: 'postgres' | 'mysql', schema: string): boolean {
  const s = schema.toLowerCase();
  if (kind === 'mysql') return MYSQL_SYSTEM_SCHEMAS.has(s);
  return POSTGRES_SYSTEM_SCHEMAS.has(s) || s.startsWith('pg_');
}

const MAX_SCOPES = 64;
const IDENT = /^[a-z_][a-z0-9_$]{0,62}$/;
const IDENT_CASED = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/;

/** PostgreSQL's longest identifier, in bytes (NAMEDATALEN - 1: a longer one is cut to this) */
const PG_MAX_IDENT_BYTES = 63;

/**
 * A dotted name of a PostgreSQL scope, as PostgreSQL reads it: an unquoted part
 * (`[A-Za-z_][A-Za-z0-9_$]*`) is folded to lower case, a double-quoted one (`"Sales"`) is kept as
 * written. A quoted part may hold any character but `"`, `.` and control characters (so the
 * parts joined with `.` stay one unambiguous name), at most 63 bytes. Reads from the start of
 * `text` up to the end or the first `=` after a part; null when it is not such a name.
 */
export function readPgPath(text: string): { readonly parts: string[]; readonly rest: string } | null {
  const parts: string[] = [];
  let at = 0;
  for (;;) {
    let part: string;
    if (text[at] === '"') {
      const close = text.indexOf('"', at + 1);
      if (close < 0) return null;
      part = text.slice(at + 1, close);
      if (part === '' || /["\.\u0000-\u001f\u007f]/.test(part) || Buffer.byteLength(part) > PG_MAX_IDENT_BYTES) return null;
      at = close + 1;
    } else {
      const m = /^[A-Za-z_][A-Za-z0-9_$]{0,62}/.exec(text.slice(at));
      if (!m) return null;
      part = m[0].toLowerCase();
      at += m[0].length;
    }
    parts.push(part);
    if (at === text.length || text[at] === '=') return { parts, rest: text.slice(at) };
    if (text[at] !== '.') return null;
    at++;
  }
}

/**
 * PostgreSQL's keywords that cannot begin a name unquoted (its kwlist.h: the reserved ones and
 * the type_func_name ones): `user.accounts` is a syntax error, `"user".accounts` is not. After a
 * dot any keyword reads as a name (`public.order`).
 */
const PG_KEYWORDS_NOT_A_NAME: ReadonlySet<string> = new Set(
  (
    'all analyse analyze and any array as asc asymmetric both case cast check collate column constraint create current_catalog ' +
    'current_date current_role current_time current_timestamp current_user default deferrable desc distinct do else end except ' +
    'false fetch for foreign from grant group having in initially intersect into lateral leading limit localtime localtimestamp ' +
    'not null offset on only or order placing primary references returning select session_user some symmetric system_user table ' +
    'then to trailing true union unique user using variadic when where window with ' +
    'authorization binary collation concurrently cross current_schema freeze full ilike inner is isnull join left like natural ' +
    'notnull outer overlaps right similar tablesample verbose'
  ).split(' '),
);

/**
 * A PostgreSQL name as SQL spells it: each part as it is when it reads back the same unquoted
 * (lower case; the first part also no keyword that cannot begin a name), else double-quoted
 * (`public."Sales"`, `"user".accounts`). The name the agent writes, and the one svc answers with
 * (`scope_applied`, the schema listing).
 */
export function pgSqlName(parts: readonly string[]): string {
  return parts.map((p, i) => (IDENT.test(p) && !(i === 0 && PG_KEYWORDS_NOT_A_NAME.has(p)) ? p : `"${p.replace(/"/g, '""')}"`)).join('.');
}

export function periodInterval(value: string): Interval | undefined {
  if (value.startsWith('0000')) return undefined; // there is no year 0
  let m = /^(\d{4})$/.exec(value);
  if (m) {
    const y = Number(m[1]);
    return { label: value, start: iso(y, 1), end: iso(y + 1, 1) };
  }
  m = /^(\d{4})-Q([1-4])$/.exec(value);
  if (m) {
    const y = Number(m[1]);
    const q = Number(m[2]);
    const startMonth = (q - 1) * 3 + 1;
    return { label: value, start: iso(y, startMonth), end: startMonth + 3 > 12 ? iso(y + 1, 1) : iso(y, startMonth + 3) };
  }
  m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(value);
  if (m) {
    const y = Number(m[1]);
    const mo = Number(m[2]);
    return { label: value, start: iso(y, mo), end: mo === 12 ? iso(y + 1, 1) : iso(y, mo + 1) };
  }
  return undefined;
}

function iso(year: number, month: number): string {
  return `${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}-01T00:00:00.000Z`;
}

export function grammarText(target: ScopeTarget): string {
  return target.grammar.map((r) => `${r.pattern}${r.required ? ' (required)' : ''}`).join('; ');
}

export function parseScopes(target: ScopeTarget, scopes: readonly string[]): ParsedScopes {
  const fail = (message: string, scope?: string): never => {
    throw new ApiError('invalid_scope', `${message}. Scope grammar of ${target.id}: ${grammarText(target)}`, {
      ...(scope !== undefined ? { scope } : {}),
      grammar: target.grammar,
      ...(target.tableNames ? { tables: target.tableNames } : {}),
    });
  };
  if (scopes.length === 0) fail('at least one scope is required');
  if (scopes.length > MAX_SCOPES) fail(`at most ${MAX_SCOPES} scopes`);

  const ruleNames = new Set(target.grammar.map((r) => r.name));
  // PostgreSQL databases: names fold to lower case unless double-quoted, as in SQL
  const pgNames = target.systemSchemas === 'postgres';
  const spell = (t: string): string => (pgNames ? pgSqlName(t.split('.')) : t);
  const reads = new Set<string>();
  let readAll = false;
  const periods: Interval[] = [];
  let relay: string | undefined;
  const filters: { table: string; column: string; value: string }[] = [];
  const normalized: string[] = [];

  const systemSchemaCheck = (parts: readonly string[], raw: string): void => {
    if (!target.systemSchemas || parts.length < 2) return;
    const schema = parts[0] as string;
    if (isSystemSchema(target.systemSchemas, schema)) {
      fail(`${JSON.stringify(raw)} names ${schema}, a system schema: system catalogs (${target.systemSchemas === 'mysql' ? [...MYSQL_SYSTEM_SCHEMAS].join(', ') : 'pg_catalog, information_schema, pg_toast, pg_temp*'}) can never be read through a scope`, raw);
    }
  };

  for (const raw of scopes) {
    const scope = raw.trim();
    const colon = scope.indexOf(':');
    if (colon <= 0) fail(`scope ${JSON.stringify(raw)} is not of the form <name>:<value>`, raw);
    const name = scope.slice(0, colon);
    const value = scope.slice(colon + 1);
    if (!ruleNames.has(name)) fail(`unknown scope ${JSON.stringify(name)}`, raw);
    if (value === '') fail(`scope ${JSON.stringify(raw)} has an empty value`, raw);
    if (normalized.includes(scope)) continue;
    normalized.push(scope);
    switch (name) {
      case 'read': {
        if (value === '*') {
          readAll = true;
          break;
        }
        if (pgNames) {
          const path = readPgPath(value);
          if (!path || path.rest !== '' || path.parts.length > 2) fail(`${JSON.stringify(raw)} must name a table as read:<table> or read:<schema>.<table>; a name with capitals or other characters is written in double quotes, as in SQL (read:public."Sales")`, raw);
          else {
            systemSchemaCheck(path.parts, raw);
            reads.add(path.parts.join('.'));
          }
          break;
        }
        const table = target.preserveCase ? value : value.toLowerCase();
        if (target.tableNames) {
          if (!target.tableNames.includes(table)) fail(`unknown table ${JSON.stringify(value)} in ${JSON.stringify(raw)}; tables of ${target.id}: ${target.tableNames.join(', ')}`, raw);
        } else {
          const parts = table.split('.');
          if (parts.length > 2 || !parts.every((p) => (target.preserveCase ? IDENT_CASED : IDENT).test(p))) fail(`${JSON.stringify(raw)} must name a table as read:<table> or read:<schema>.<table>`, raw);
          systemSchemaCheck(parts, raw);
        }
        reads.add(table);
        break;
      }
      case 'period': {
        const interval = periodInterval(value);
        if (!interval) fail(`${JSON.stringify(raw)} is not a period: use period:<YYYY>, period:<YYYY>-Q<1-4> or period:<YYYY>-<MM>`, raw);
        else periods.push(interval);
        break;
      }
      case 'relay': {
        if (!/^[A-Za-z0-9_-]{1,64}$/.test(value)) fail(`${JSON.stringify(raw)} must name a relay id`, raw);
        if (relay !== undefined && relay !== value) fail('only one relay: scope per connection', raw);
        relay = value;
        break;
      }
      case 'filter': {
        // filter:<schema>.<table>.<column>=<value>, or filter:<table>.<column>=<value> (the
        // unqualified table, as read:<table> names it)
        if (pgNames) {
          const path = readPgPath(value);
          const n = path?.parts.length ?? 0;
          if (!path || n < 2 || n > 3 || !/^=.{0,200}$/.test(path.rest)) {
            fail(`${JSON.stringify(raw)} must be filter:<schema>.<table>.<column>=<value> or filter:<table>.<column>=<value>; a name with capitals or other characters is written in double quotes, as in SQL (filter:public."Sales"."Region"=eu)`, raw);
          } else {
            const tableParts = path.parts.slice(0, -1);
            systemSchemaCheck(tableParts, raw);
            filters.push({ table: tableParts.join('.'), column: path.parts[n - 1] as string, value: path.rest.slice(1) });
          }
          break;
        }
        const id = target.preserveCase ? '[A-Za-z_][A-Za-z0-9_$]{0,62}' : '[a-z_][a-z0-9_$]{0,62}';
        const eq = value.indexOf('=');
        const path = eq < 0 ? value : value.slice(0, eq);
        const m = new RegExp(`^(?:(${id})\\.)?(${id})\\.(${id})=(.{0,200})$`).exec(`${target.preserveCase ? path : path.toLowerCase()}${eq < 0 ? '' : value.slice(eq)}`);
        if (!m) fail(`${JSON.stringify(raw)} must be filter:<schema>.<table>.<column>=<value> or filter:<table>.<column>=<value>`, raw);
        else {
          const table = m[1] !== undefined ? `${m[1]}.${m[2]}` : (m[2] as string);
          systemSchemaCheck(table.split('.'), raw);
          filters.push({ table, column: m[3] as string, value: m[4] as string });
        }
        break;
      }
      default:
        fail(`scope ${JSON.stringify(name)} is not supported yet`, raw);
    }
  }

  if (!readAll && reads.size === 0) fail('at least one read: scope is required (read:<table> or read:*)');
  for (const rule of target.grammar) {
    if (rule.required && !normalized.some((s) => s.startsWith(`${rule.name}:`))) fail(`a ${rule.name}: scope is required`);
  }
  // one table, however it is written: `orders` and `public.orders` (databases whose unqualified
  // names have a known schema) are the same table in read: and filter: scopes alike
  const canonical = (t: string): string => (target.defaultSchema && !t.includes('.') ? `${target.defaultSchema}.${t}` : t);
  const readCanonical = new Set([...reads].map(canonical));
  const canonicalFilters = filters.map((f) => ({ ...f, table: canonical(f.table) }));
  for (const f of canonicalFilters) {
    if (readAll || !readCanonical.has(f.table)) {
      // MySQL: `orders` is a table of the credential's database, which is known only when a query
      // runs (and changes with the credential), so `orders` and `shop.orders` cannot be said to be
      // one table here: the filter must spell the table as its read: scope does
      const bare = f.table.includes('.') ? (f.table.split('.')[1] as string) : f.table;
      const other = target.defaultSchema === null && !readAll ? [...reads].find((r) => (r.includes('.') ? r.split('.')[1] : r) === bare) : undefined;
      const spelled = f.table.includes('.') ? f.table : `${f.table} (the credential's database)`;
      fail(
        other !== undefined
          ? `filter on ${spelled} does not name the table of read:${other}: an unqualified name means the credential's database, known only when a query runs, so a filter must spell its table as the read: scope does; write filter:${other}.${f.column}=… or read:${f.table}`
          : `filter on ${spell(f.table)} needs read:${spell(f.table)} in the same connection`,
      );
    }
  }
  return { read: readAll ? 'all' : reads, periods, relay, filters: canonicalFilters, normalized };
}
