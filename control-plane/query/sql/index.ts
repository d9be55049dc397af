/**
 * SQL policy: the first layer of scope enforcement (see docs/decisions.md, "Scope enforcement in depth").
 *
 * `checkAndRewrite(sql, policy)`:
 * 1. parses the agent's SQL with the real PostgreSQL parser (libpg_query 18, WASM);
 * 2. requires exactly one read statement (SELECT / WITH … SELECT / VALUES / TABLE / set
 *    operations, or EXPLAIN without ANALYZE of one);
 * 3. walks every node of the tree (unknown node types and fields are refused), refusing
 *    SELECT INTO, row locks, writable CTEs, functions in FROM, XMLTABLE/JSON_TABLE, parameters,
 *    casts to types outside an allow-list (reg* included), functions outside an allow-list,
 *    schema-qualified operators other than pg_catalog's;
 * 4. resolves every table reference with SQL's CTE scoping, and replaces each allowed table by
 *    `(SELECT * FROM "schema"."table" WHERE <row predicate> OFFSET 0) AS <alias>`, so the
 *    agent's own predicates, joins, window functions and error oracles never see rows outside
 *    its scopes (OFFSET 0 is the planner fence that keeps the agent's quals from being
 *    evaluated before the row predicate); a table without a predicate becomes a direct
 *    reference `"schema"."table" AS <alias>`;
 * 5. writes the rewritten statement, re-parses it and checks it again ("verify"): the SQL
 *    returned is exactly what was checked, even if it was mis-printed. Usually it is the agent's
 *    own text with each rewritten table name replaced (splice.ts); when that is doubtful or does
 *    not verify, the deparsed rewritten tree.
 *
 * Pure: no I/O, no database. Throws {@link SqlPolicyError}.
 */

import { loadModule, parseSync } from 'pgsql-parser';

import { ALLOWED_EXPLAIN_OPTIONS } from './allowlists.js';
import { deparser } from './deparse.js';
import { rewriteFailed, SqlPolicyError, violation } from './errors.js';
import type { Obj } from './grammar.js';
import { quoteIdent } from './quote.js';
import { makeResolver as makeTableResolver } from './resolver.js';
import type { Resolver, Template } from './rewrite.js';
import { splicer } from './splice.js';
import { statementName } from './statement-names.js';
import { Walker } from './walker.js';

export { SqlPolicyError } from './errors.js';
export { periodPredicate, type PeriodBounds } from './period.js';
export type { SqlPolicyErrorCode, SqlPolicyErrorDetail } from './errors.js';
export {
  ALLOWED_CAST_TYPES,
  ALLOWED_EXPLAIN_OPTIONS,
  ALLOWED_FUNCTION_NAMES,
  ALLOWED_FUNCTIONS,
  ALLOWED_SQL_VALUE_FUNCTIONS,
  ALLOWED_TABLESAMPLE_METHODS,
} from './allowlists.js';

export interface ScopedTable {
  /** the name the agent uses, lower-case, e.g. 'encounters' (or 'public.orders' style for relays later) */
  readonly name: string;
  /** the physical relation to read */
  readonly schema: string;
  readonly table: string;
  /** SQL boolean expression over the table's own columns that restricts rows, or null for all rows.
   *  Built by us (trusted), e.g. `"period_start" >= '2024-01-01T00:00:00Z'::timestamptz AND "period_start" < '2024-04-01T00:00:00Z'::timestamptz` */
  readonly predicate: string | null;
}

export interface SqlPolicy {
  /** tables the connection may read, keyed by agent-facing name */
  readonly allowed: ReadonlyMap<string, ScopedTable>;
  /**
   * every table of the target (for helpful messages: "exists but not in your scopes"), or null
   * when svc does not know them (a customer's database): a table outside the scopes is then
   * always "not in this connection's scopes", never "does not exist", so a refusal says nothing
   * of what the source holds
   */
  readonly known: readonly string[] | null;
  /** the schema names under which the agent may qualify a table name (e.g. ['demo_healthcare', 'public']); unqualified names are looked up in `allowed` */
  readonly schemas: readonly string[];
}

/**
 * Per table read (agent-facing names): the row predicate the policy enforces beneath it, or null
 * for every row. Looked up by each entry's name, which need not be a key of `allowed` (those are
 * the names as the parser reads them: `public.Sales` for the table SQL spells `public."Sales"`).
 */
export function rowFiltersOf(allowed: ReadonlyMap<string, { readonly name: string; readonly predicate: string | null }>, tables: readonly string[]): Record<string, string | null> {
  const byName = new Map<string, string | null>();
  for (const e of allowed.values()) byName.set(e.name, e.predicate);
  const rowFilters: Record<string, string | null> = {};
  for (const name of tables) rowFilters[name] = byName.get(name) ?? null;
  return rowFilters;
}

export interface CheckedQuery {
  /** the statement to execute: agent SQL with every table reference replaced by an in-scope subquery */
  readonly sql: string;
  /** agent-facing names of tables read, sorted, unique */
  readonly tables: readonly string[];
  /** 'select' | 'values' | 'explain' */
  readonly kind: string;
}

// ---------------------------------------------------------------------------------------------
// parser

let ready = false;
let loading: Promise<void> | null = null;

/** Load the WASM parser once; idempotent and safe to call concurrently. */
export async function initSqlParser(): Promise<void> {
  if (ready) return;
  loading ??= loadModule().then(
    () => {
      ready = true;
    },
    (err: unknown) => {
      loading = null;
      throw err;
    },
  );
  await loading;
}

interface RawStmt {
  stmt?: Obj;
  stmt_location?: number;
  stmt_len?: number;
}

/**
 * Parse-tree limits, checked right after the (fast, C) parse and before the walker, rewrite and
 * re-parse, whose cost grows with the tree: a statement over them is `invalid_sql`, reason
 * `too_complex`. 10,000 nodes is about a 3,000-value IN list or 1,000 CTEs; typical analytic
 * statements have a few hundred. 500 levels of nesting is far beyond any hand-written query.
 */
export const SQL_TREE_LIMITS = { maxNodes: 10_000, maxDepth: 500 } as const;

function tooComplex(why: string): SqlPolicyError {
  return new SqlPolicyError('invalid_sql', `the statement is too complex to check (${why}); split it into smaller queries or simplify it`, { reason: 'too_complex' });
}

/** Counts the tree iteratively (no recursion, so a deep tree cannot overflow here). */
function assertTreeWithinLimits(root: object): void {
  let nodes = 0;
  // two stacks of the same length, not one of [node, depth] pairs: nothing allocated per node
  const values: object[] = [root];
  const depths: number[] = [0];
  while (values.length > 0) {
    const value = values.pop() as object;
    const depth = depths.pop() as number;
    if (++nodes > SQL_TREE_LIMITS.maxNodes) throw tooComplex(`more than ${SQL_TREE_LIMITS.maxNodes} syntax nodes`);
    if (depth > SQL_TREE_LIMITS.maxDepth) throw tooComplex(`nested more than ${SQL_TREE_LIMITS.maxDepth} levels deep`);
    if (Array.isArray(value)) {
      for (const v of value as unknown[]) {
        if (v !== null && typeof v === 'object') {
          values.push(v);
          depths.push(depth + 1);
        }
      }
    } else {
      for (const k in value) {
        const v = (value as Record<string, unknown>)[k];
        if (v !== null && typeof v === 'object') {
          values.push(v);
          depths.push(depth + 1);
        }
      }
    }
  }
}

function parse(sql: string): RawStmt[] {
  const result = parseSync(sql) as unknown as { stmts?: RawStmt[] };
  return result.stmts ?? [];
}

function deparse(node: Obj): string {
  return deparser.deparse(node);
}

// ---------------------------------------------------------------------------------------------
// trusted subqueries, parsed once per (schema, table, predicate)

const TEMPLATE_CACHE_MAX = 2000;
const templates = new Map<string, Template>();

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

function templateFor(entry: ScopedTable): Template {
  const key = `${entry.schema}\u0000${entry.table}\u0000${entry.predicate ?? ''}`;
  const hit = templates.get(key);
  if (hit) return hit;

  const from = `${quoteIdent(entry.schema)}.${quoteIdent(entry.table)}`;
  let template: Template;
  if (entry.predicate === null) {
    const select = trustedSelect(`SELECT * FROM ${from}`, entry);
    template = { entry: { ...entry }, key, relation: (select['fromClause'] as Obj[])[0] as Obj, select: null, reparsed: null, text: from };
  } else {
    // OFFSET 0 is PostgreSQL's optimisation fence: the subquery is neither flattened into the
    // agent's query nor given the agent's quals, so none of the agent's expressions (e.g. an
    // error oracle such as 1/(x-5), or a leaky function) is ever evaluated on an out-of-scope
    // row. Without it the planner may order the agent's qual before the row predicate (it does,
    // e.g., when the predicate is an OR of ranges).
    const select = trustedSelect(`SELECT * FROM ${from} WHERE ${entry.predicate} OFFSET 0`, entry);
    // what the same subquery looks like after deparse → parse (the verify pass compares to this);
    // the splice (splice.ts) writes this same text
    const text = deparse({ SelectStmt: select });
    const reparsed = trustedSelect(text, entry);
    template = { entry: { ...entry }, key, relation: (select['fromClause'] as Obj[])[0] as Obj, select, reparsed, text };
  }
  deepFreeze(template);
  if (templates.size >= TEMPLATE_CACHE_MAX) templates.clear();
  templates.set(key, template);
  return template;
}

function trustedSelect(text: string, entry: ScopedTable): Obj {
  let stmts: RawStmt[];
  try {
    stmts = parse(text);
  } catch (err) {
    throw new Error(`svc: row predicate of ${entry.name} does not parse: ${(err as Error).message}`);
  }
  const sel = stmts.length === 1 ? (stmts[0]?.stmt?.['SelectStmt'] as Obj | undefined) : undefined;
  const fromClause = sel?.['fromClause'];
  const rv = Array.isArray(fromClause) ? ((fromClause[0] as Obj | undefined)?.['RangeVar'] as Obj | undefined) : undefined;
  const keys = sel ? Object.keys(sel).filter((k) => !['targetList', 'fromClause', 'whereClause', 'limitOffset', 'limitOption', 'op'].includes(k)) : ['?'];
  const predicated = entry.predicate !== null;
  if (
    !sel || keys.length > 0 || !Array.isArray(fromClause) || fromClause.length !== 1 || !rv ||
    rv['schemaname'] !== entry.schema || rv['relname'] !== entry.table ||
    predicated !== (sel['whereClause'] !== undefined) || predicated !== (sel['limitOffset'] !== undefined)
  ) {
    throw new Error(`svc: row predicate of ${entry.name} is not a single boolean expression`);
  }
  return sel;
}

// ---------------------------------------------------------------------------------------------
// resolving table names

// system schemas are refused before the allowed tables are looked up (see resolver.ts)
const makeResolver = (policy: SqlPolicy): Resolver => makeTableResolver(policy, templateFor);

// ---------------------------------------------------------------------------------------------
// the statement

const READS = 'only a single read statement (SELECT, WITH … SELECT, VALUES, TABLE, or EXPLAIN without ANALYZE) can run';

/** Check the top-level statement and walk it; returns the kind. */
function walkStatement(stmt: Obj | undefined, walker: Walker): 'select' | 'values' | 'explain' {
  const type = stmt ? Object.keys(stmt)[0] : undefined;
  if (!stmt || !type || Object.keys(stmt).length !== 1) throw rewriteFailed();
  const body = stmt[type] as Obj;

  if (type === 'SelectStmt') {
    walker.select(body);
    const values = Array.isArray(body['valuesLists']) && (body['op'] === undefined || body['op'] === 'SETOP_NONE');
    return values ? 'values' : 'select';
  }
  if (type === 'ExplainStmt') {
    for (const key of Object.keys(body)) {
      if (key !== 'query' && key !== 'options') throw violation(`EXPLAIN option ${key} is not supported`, { reason: 'construct_not_allowed', construct: 'EXPLAIN' });
    }
    const options = body['options'];
    if (options !== undefined && !Array.isArray(options)) throw rewriteFailed();
    for (const o of (options ?? []) as Obj[]) {
      const def = o['DefElem'] as Obj | undefined;
      const name = String(def?.['defname'] ?? '').toLowerCase();
      if (name === 'analyze' || name === 'analyse') {
        throw violation('EXPLAIN ANALYZE executes the statement and is not allowed; use EXPLAIN without ANALYZE', {
          reason: 'explain_analyze',
          construct: 'EXPLAIN ANALYZE',
        });
      }
      const arg = def?.['arg'] as Obj | undefined;
      const argOk =
        arg === undefined ||
        (Object.keys(arg).length === 1 && ['String', 'Boolean', 'Integer', 'Float'].includes(Object.keys(arg)[0] as string) &&
          Object.values(arg[Object.keys(arg)[0] as string] as Obj).every((v) => typeof v !== 'object'));
      if (!def || !ALLOWED_EXPLAIN_OPTIONS.has(name) || !argOk) {
        throw violation(`EXPLAIN option ${name.toUpperCase() || '?'} is not allowed; allowed: ${[...ALLOWED_EXPLAIN_OPTIONS].join(', ').toUpperCase()}`, {
          reason: 'construct_not_allowed',
          construct: `EXPLAIN ${name.toUpperCase()}`,
        });
      }
    }
    // plan costs and row estimates come from statistics over the whole table, in-scope rows or
    // not: a side channel, so EXPLAIN always runs with COSTS OFF
    body['options'] = [
      ...((options ?? []) as Obj[]).filter((o) => String((o['DefElem'] as Obj | undefined)?.['defname'] ?? '').toLowerCase() !== 'costs'),
      { DefElem: { defname: 'costs', arg: { String: { sval: 'off' } }, defaction: 'DEFELEM_UNSPEC' } },
    ];
    const query = body['query'] as Obj | undefined;
    const qtype = query ? Object.keys(query)[0] : undefined;
    if (!query || qtype !== 'SelectStmt' || Object.keys(query).length !== 1) {
      const what = qtype ? statementName(qtype, query?.[qtype] as Obj) : 'statement';
      throw violation(`EXPLAIN of ${what} is not allowed; ${READS}`, { reason: 'not_a_read', construct: `EXPLAIN ${what}` });
    }
    walker.select(query['SelectStmt'] as Obj);
    return 'explain';
  }
  const what = statementName(type, body);
  throw violation(`${what} is not allowed: ${READS}`, { reason: 'not_a_read', construct: what });
}

function parseAgentSql(sql: string): RawStmt[] {
  const nul = sql.indexOf('\u0000');
  if (nul >= 0) throw new SqlPolicyError('invalid_sql', 'the statement contains a NUL character', { reason: 'syntax_error' }, nul);
  if (sql.trim() === '') throw new SqlPolicyError('invalid_sql', 'the statement is empty', { reason: 'empty_statement' });
  let stmts: RawStmt[];
  try {
    stmts = parse(sql);
  } catch (err) {
    const e = err as { message?: string; sqlDetails?: { cursorPosition?: number } };
    const message = e.message ?? 'syntax error';
    // the parser's own limits, or the JavaScript stack while its output is read
    if (err instanceof RangeError || /memory exhausted|stack depth|call stack/i.test(message)) throw tooComplex('nested too deeply for the parser');
    const pos = e.sqlDetails?.cursorPosition;
    const position = typeof pos === 'number' && pos >= 0 ? utf16Offset(sql, pos) : undefined;
    // the position is added to the message once, where the error becomes an API answer
    throw new SqlPolicyError('invalid_sql', message, { reason: 'syntax_error' }, position);
  }
  assertTreeWithinLimits(stmts);
  return stmts;
}

/** the parser counts characters (code points); JavaScript strings count UTF-16 units */
function utf16Offset(sql: string, codePoints: number): number {
  let units = 0;
  let n = 0;
  for (const ch of sql) {
    if (n++ >= codePoints) break;
    units += ch.length;
  }
  return units;
}

/**
 * Check an agent's SQL against a connection's policy and rewrite it so that it can only read
 * in-scope rows. Throws {@link SqlPolicyError} (`invalid_sql` or `scope_violation`).
 */
export function checkAndRewrite(sql: string, policy: SqlPolicy): CheckedQuery {
  if (!ready) throw new Error('svc: initSqlParser() must be awaited before checkAndRewrite()');
  if (typeof sql !== 'string') throw new SqlPolicyError('invalid_sql', 'the statement must be a string', { reason: 'syntax_error' });

  const stmts = parseAgentSql(sql);
  if (stmts.length === 0) throw new SqlPolicyError('invalid_sql', 'the statement is empty', { reason: 'empty_statement' });
  if (stmts.length > 1) {
    throw violation(`exactly one statement can run per query; got ${stmts.length}`, { reason: 'multiple_statements' });
  }
  const stmt = stmts[0]?.stmt;

  // check + rewrite in place
  const checker = new Walker('check', makeResolver(policy));
  const kind = guard(() => walkStatement(stmt, checker));
  const tables = [...checker.tables].sort();

  // fast path: the agent's own text with the rewritten references spliced in (splice.ts), verified
  // the same way; when the splice declines, throws, or its text fails the verify pass: the tree
  if (kind !== 'explain' && checker.spliceable) {
    try {
      const spliced = splicer.splice(sql, stmts[0] as RawStmt, checker.rewritten);
      if (spliced !== null) {
        verify(spliced, checker, kind);
        return { sql: spliced, tables, kind };
      }
    } catch {
      // the deparsed tree below, verified on its own
    }
  }

  let out: string;
  try {
    out = deparse(stmt as Obj);
  } catch (err) {
    if (err instanceof RangeError || /call stack/i.test(String((err as Error)?.message))) {
      throw new SqlPolicyError('invalid_sql', 'the statement is too complex', { reason: 'too_complex' });
    }
    throw rewriteFailed();
  }
  verify(out, checker, kind);
  return { sql: out, tables, kind };
}

/** What will run is exactly what was checked: `out` re-parses to one statement of the same kind whose every table reference is a CTE or one of the check's templates. */
function verify(out: string, checker: Walker, kind: string): void {
  let again: RawStmt[];
  try {
    again = parse(out);
  } catch {
    throw rewriteFailed();
  }
  if (again.length !== 1) throw rewriteFailed();
  const verifier = new Walker('verify', { resolve: () => { throw rewriteFailed(); } });
  for (const [k, t] of checker.used) verifier.used.set(k, t);
  const kindAgain = guard(() => walkStatement(again[0]?.stmt, verifier));
  if (kindAgain !== kind) throw rewriteFailed();
}

function guard<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof RangeError) {
      throw new SqlPolicyError('invalid_sql', 'the statement is too complex', { reason: 'too_complex' });
    }
    throw err;
  }
}
