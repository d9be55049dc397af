/**
 * The tree walker of the SQL policy layer.
 *
 * Works on the raw parse tree of libpg_query (protobuf-JSON shape: a node is `{Type: {...}}`,
 * fields whose protobuf type is a specific message hold that message bare). Every node type and
 * every field the walker may meet is declared in {@link SPECS}; an unknown node type or an
 * unknown field is refused, so nothing can hide a table reference or a function call from it.
 *
 * Two modes:
 * - `check`: the agent's statement. Table references are resolved against the policy and each
 *   allowed one is replaced (in place) by a subquery over the physical table with its row
 *   predicate.
 * - `verify`: the re-parsed rewritten statement, i.e. exactly what will run. The only table
 *   references allowed are CTE references and the trusted subqueries produced by `check`
 *   (matched structurally), so a deparser bug cannot smuggle anything past the policy.
 */

import {
  ALLOWED_CAST_TYPES,
  ALLOWED_FUNCTION_NAMES,
  ALLOWED_SQL_VALUE_FUNCTIONS,
  ALLOWED_TABLESAMPLE_METHODS,
} from './allowlists.js';
import { SqlPolicyError, violation } from './errors.js';
import { quoteIdent } from './quote.js';

export type Obj = Record<string, unknown>;

/** Field kinds: `v` scalar, `n` one wrapped node, `l` list of wrapped nodes, else a bare struct type. */
type Kind = 'v' | 'n' | 'l' | string;

function spec(fields: Record<string, Kind>): ReadonlyMap<string, Kind> {
  return new Map(Object.entries(fields));
}

const V = 'v';
const N = 'n';
const L = 'l';

/** Node types the walker accepts, with every field they may carry. */
const SPECS: ReadonlyMap<string, ReadonlyMap<string, Kind>> = new Map([
  ['String', spec({ sval: V })],
  ['Integer', spec({ ival: V })],
  ['Float', spec({ fval: V })],
  ['Boolean', spec({ boolval: V })],
  ['BitString', spec({ bsval: V })],
  ['List', spec({ items: L })],
  ['A_Const', spec({ ival: 'Integer', fval: 'Float', boolval: 'Boolean', sval: 'String', bsval: 'BitString', isnull: V, location: V })],
  ['Alias', spec({ aliasname: V, colnames: L })],
  ['RangeVar', spec({ catalogname: V, schemaname: V, relname: V, inh: V, relpersistence: V, alias: 'Alias', location: V })],
  ['JoinExpr', spec({ jointype: V, isNatural: V, larg: N, rarg: N, usingClause: L, join_using_alias: 'Alias', quals: N, alias: 'Alias', rtindex: V })],
  ['RangeSubselect', spec({ lateral: V, subquery: N, alias: 'Alias' })],
  ['RangeTableSample', spec({ relation: N, method: L, args: L, repeatable: N, location: V })],
  ['SelectStmt', spec({
    distinctClause: L, targetList: L, fromClause: L, whereClause: N, groupClause: L, groupDistinct: V,
    havingClause: N, windowClause: L, valuesLists: L, sortClause: L, limitOffset: N, limitCount: N,
    limitOption: V, op: V, all: V, larg: 'SelectStmt', rarg: 'SelectStmt',
    // handled before the generic walk (refused when present / scoped):
    intoClause: 'IntoClause', lockingClause: L, withClause: 'WithClause',
  })],
  ['CTESearchClause', spec({ search_col_list: L, search_breadth_first: V, search_seq_column: V, location: V })],
  ['CTECycleClause', spec({
    cycle_col_list: L, cycle_mark_column: V, cycle_mark_value: N, cycle_mark_default: N, cycle_path_column: V,
    location: V, cycle_mark_type: V, cycle_mark_typmod: V, cycle_mark_collation: V, cycle_mark_neop: V,
  })],
  ['ResTarget', spec({ name: V, indirection: L, val: N, location: V })],
  ['ColumnRef', spec({ fields: L, location: V })],
  ['A_Star', spec({})],
  ['A_Indices', spec({ is_slice: V, lidx: N, uidx: N })],
  ['A_Indirection', spec({ arg: N, indirection: L })],
  ['A_ArrayExpr', spec({ elements: L, list_start: V, list_end: V, location: V })],
  ['A_Expr', spec({ kind: V, name: L, lexpr: N, rexpr: N, rexpr_list_start: V, rexpr_list_end: V, location: V })],
  ['TypeCast', spec({ arg: N, typeName: 'TypeName', location: V })],
  ['TypeName', spec({ names: L, typeOid: V, setof: V, pct_type: V, typmods: L, typemod: V, arrayBounds: L, location: V })],
  ['FuncCall', spec({
    funcname: L, args: L, agg_order: L, agg_filter: N, over: 'WindowDef', agg_within_group: V, agg_star: V,
    agg_distinct: V, func_variadic: V, funcformat: V, location: V,
  })],
  ['NamedArgExpr', spec({ xpr: N, arg: N, name: V, argnumber: V, location: V })],
  ['WindowDef', spec({ name: V, refname: V, partitionClause: L, orderClause: L, frameOptions: V, startOffset: N, endOffset: N, location: V })],
  ['SortBy', spec({ node: N, sortby_dir: V, sortby_nulls: V, useOp: L, location: V })],
  ['SubLink', spec({ xpr: N, subLinkType: V, subLinkId: V, testexpr: N, operName: L, subselect: N, location: V })],
  ['CaseExpr', spec({ xpr: N, casetype: V, casecollid: V, arg: N, args: L, defresult: N, location: V })],
  ['CaseWhen', spec({ xpr: N, expr: N, result: N, location: V })],
  ['CoalesceExpr', spec({ xpr: N, coalescetype: V, coalescecollid: V, args: L, location: V })],
  ['MinMaxExpr', spec({ xpr: N, minmaxtype: V, minmaxcollid: V, inputcollid: V, op: V, args: L, location: V })],
  ['NullTest', spec({ xpr: N, arg: N, nulltesttype: V, argisrow: V, location: V })],
  ['BooleanTest', spec({ xpr: N, arg: N, booltesttype: V, location: V })],
  ['BoolExpr', spec({ xpr: N, boolop: V, args: L, location: V })],
  ['SQLValueFunction', spec({ xpr: N, op: V, type: V, typmod: V, location: V })],
  ['GroupingSet', spec({ kind: V, content: L, location: V })],
  ['GroupingFunc', spec({ xpr: N, args: L, refs: L, agglevelsup: V, location: V })],
  ['RowExpr', spec({ xpr: N, args: L, row_typeid: V, row_format: V, colnames: L, location: V })],
  ['CollateClause', spec({ arg: N, collname: L, location: V })],
  ['JsonValueExpr', spec({ raw_expr: N, formatted_expr: N, format: 'JsonFormat' })],
  ['JsonFormat', spec({ format_type: V, encoding: V, location: V })],
  ['JsonReturning', spec({ format: 'JsonFormat', typid: V, typmod: V })],
  ['JsonOutput', spec({ typeName: 'TypeName', returning: 'JsonReturning' })],
  ['JsonObjectConstructor', spec({ exprs: L, output: 'JsonOutput', absent_on_null: V, unique: V, location: V })],
  ['JsonArrayConstructor', spec({ exprs: L, output: 'JsonOutput', absent_on_null: V, location: V })],
  ['JsonArrayQueryConstructor', spec({ query: N, output: 'JsonOutput', format: 'JsonFormat', absent_on_null: V, location: V })],
  ['JsonAggConstructor', spec({ output: 'JsonOutput', agg_filter: N, agg_order: L, over: 'WindowDef', location: V })],
  ['JsonObjectAgg', spec({ constructor: 'JsonAggConstructor', arg: 'JsonKeyValue', absent_on_null: V, unique: V })],
  ['JsonArrayAgg', spec({ constructor: 'JsonAggConstructor', arg: 'JsonValueExpr', absent_on_null: V })],
  ['JsonKeyValue', spec({ key: N, value: 'JsonValueExpr' })],
  ['JsonIsPredicate', spec({ expr: N, format: 'JsonFormat', item_type: V, unique_keys: V, location: V })],
  ['JsonParseExpr', spec({ expr: 'JsonValueExpr', output: 'JsonOutput', unique_keys: V, location: V })],
  ['JsonScalarExpr', spec({ expr: N, output: 'JsonOutput', location: V })],
  ['JsonSerializeExpr', spec({ expr: 'JsonValueExpr', output: 'JsonOutput', location: V })],
]);

/** Node types refused outright, with the construct name and a message. */
const REFUSED: ReadonlyMap<string, { construct: string; message: string; reason?: string }> = new Map([
  ['ParamRef', { construct: 'parameter', message: 'parameters ($1, $2, …) are not supported; write the values inline' }],
  ['CurrentOfExpr', { construct: 'WHERE CURRENT OF', message: 'WHERE CURRENT OF is not allowed' }],
  ['RangeFunction', {
    construct: 'function in FROM',
    message: 'functions in FROM (generate_series, unnest, json_to_recordset, …) are not allowed; call an allowed set-returning function in the select list instead, e.g. FROM (SELECT unnest(x) AS v) s',
  }],
  ['RangeTableFunc', { construct: 'XMLTABLE', message: 'XMLTABLE is not allowed' }],
  ['JsonTable', { construct: 'JSON_TABLE', message: 'JSON_TABLE is not allowed' }],
  ['XmlExpr', { construct: 'XML function', message: 'XML functions are not allowed' }],
  ['XmlSerialize', { construct: 'XMLSERIALIZE', message: 'XML functions are not allowed' }],
  ['JsonFuncExpr', {
    construct: 'JSON_VALUE/JSON_QUERY/JSON_EXISTS',
    message: 'JSON_VALUE, JSON_QUERY and JSON_EXISTS are not supported; use the ->, ->> and #>> operators or jsonb_path_query_first / jsonb_path_exists',
  }],
  ['IntoClause', { construct: 'SELECT INTO', reason: 'select_into', message: 'SELECT … INTO creates a table and is not allowed; only reads can run' }],
  ['LockingClause', { construct: 'FOR UPDATE/SHARE', reason: 'locking_clause', message: 'row locking clauses (FOR UPDATE, FOR SHARE, …) are not allowed; only plain reads can run' }],
  ['MultiAssignRef', { construct: 'MultiAssignRef', message: 'this construct is not allowed in a read' }],
  ['SetToDefault', { construct: 'DEFAULT', message: 'DEFAULT is not allowed in a read' }],
  ['MergeSupportFunc', { construct: 'MERGE_ACTION', message: 'MERGE_ACTION() is not allowed' }],
]);

const LOCK_NAMES: Record<string, string> = {
  LCS_FORKEYSHARE: 'FOR KEY SHARE',
  LCS_FORSHARE: 'FOR SHARE',
  LCS_FORNOKEYUPDATE: 'FOR NO KEY UPDATE',
  LCS_FORUPDATE: 'FOR UPDATE',
};

// ---------------------------------------------------------------------------------------------
// Policy-facing types (mirrored in index.ts)

export interface ScopedTableLike {
  readonly name: string;
  readonly schema: string;
  readonly table: string;
  readonly predicate: string | null;
}

/**
 * How one scoped table is read, parsed once and frozen: a table with a row predicate is read
 * through `SELECT * FROM "schema"."table" WHERE predicate OFFSET 0`; a table without one is
 * referenced directly as `"schema"."table"` (nothing to hide, and the planner keeps primary-key
 * functional dependencies, indexes and statistics).
 */
export interface Template {
  readonly entry: ScopedTableLike;
  /** cache key: schema, table, predicate */
  readonly key: string;
  /** the RangeVar node (wrapped) of the physical table, frozen */
  readonly relation: Obj;
  /** the SelectStmt body (frozen); null when the table has no predicate */
  readonly select: Obj | null;
  /** the select as it comes back from deparse → parse (what the verify pass compares with) */
  readonly reparsed: Obj | null;
}

export interface Resolver {
  /** resolve a non-CTE RangeVar to a template (throws a SqlPolicyError when out of scope) */
  resolve(rv: Obj): { template: Template; name: string };
}

interface Scope {
  readonly names: { has(name: string): boolean };
  readonly parent: Scope | null;
}

/** The first `count` names of a WITH list, without copying them (a copy per CTE was quadratic). */
function firstNames(index: ReadonlyMap<string, number>, count: number): { has(name: string): boolean } {
  return { has: (name) => (index.get(name) ?? Infinity) < count };
}

function inScope(scope: Scope | null, name: string): boolean {
  for (let s = scope; s; s = s.parent) if (s.names.has(name)) return true;
  return false;
}

export const MAX_DEPTH = 800;

export class Walker {
  readonly tables = new Set<string>();
  /** templates used by the rewrite (check mode) / allowed to appear (verify mode), by key */
  readonly used = new Map<string, Template>();
  private depth = 0;

  constructor(
    private readonly mode: 'check' | 'verify',
    private readonly resolver: Resolver,
  ) {}

  // -------------------------------------------------------------------------------------------
  // entry points

  /** walk a top-level SelectStmt body (no enclosing scope) */
  select(sel: Obj): void {
    if (this.mode === 'check') {
      this.visitStruct('SelectStmt', sel, null);
      return;
    }
    // verify: the agent's statement already passed the check; any refusal here means the rewrite
    // did not come back as checked, which is the rewriter's limitation (still refused, never run)
    try {
      this.visitStruct('SelectStmt', sel, null);
    } catch (err) {
      if (err instanceof SqlPolicyError && err.code === 'scope_violation') throw rewriteFailed();
      throw err;
    }
  }

  // -------------------------------------------------------------------------------------------

  /** Visit a wrapped node; returns a replacement wrapper when the node is rewritten. */
  private visitNode(wrapper: unknown, scope: Scope | null): Obj | undefined {
    if (typeof wrapper !== 'object' || wrapper === null || Array.isArray(wrapper)) {
      throw unsupported('malformed parse tree');
    }
    const keys = Object.keys(wrapper);
    if (keys.length === 0) return undefined; // NIL placeholder, e.g. plain DISTINCT
    if (keys.length !== 1) throw unsupported('malformed parse tree');
    const type = keys[0] as string;
    const body = (wrapper as Obj)[type];
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw unsupported(type);

    if (++this.depth > MAX_DEPTH) {
      throw new SqlPolicyError('invalid_sql', `the statement is nested too deeply (more than ${MAX_DEPTH} levels)`, { reason: 'too_complex' });
    }
    try {
      switch (type) {
        case 'RangeVar':
          return this.rangeVar(body as Obj, scope);
        case 'RangeTableSample':
          return this.tableSample(body as Obj, scope);
        case 'RangeSubselect':
          if (this.mode === 'verify' && this.trustedSubselect(body as Obj, scope)) return undefined;
          break;
      }
      this.visitStruct(type, body as Obj, scope);
      return undefined;
    } finally {
      this.depth--;
    }
  }

  /** Visit a node body (or a bare struct) of a known type. */
  private visitStruct(type: string, obj: Obj, scope: Scope | null): void {
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) throw unsupported(type);
    const refused = REFUSED.get(type);
    if (refused) {
      throw violation(refused.message, { reason: refused.reason ?? 'construct_not_allowed', construct: refused.construct });
    }
    const fields = SPECS.get(type);
    if (!fields) throw unsupported(type);

    switch (type) {
      case 'SelectStmt':
        scope = this.selectPrologue(obj, scope);
        break;
      case 'FuncCall':
        this.checkFunction(obj);
        break;
      case 'TypeName':
        checkType(obj);
        break;
      case 'A_Expr':
        checkOperator(obj['name']);
        break;
      case 'SortBy':
        checkOperator(obj['useOp']);
        break;
      case 'SubLink':
        checkOperator(obj['operName']);
        break;
      case 'SQLValueFunction':
        checkSqlValueFunction(obj);
        break;
    }

    for (const key of Object.keys(obj)) {
      const kind = fields.get(key);
      if (kind === undefined) throw unsupported(`${type}.${key}`);
      if (type === 'SelectStmt' && (key === 'withClause' || key === 'intoClause' || key === 'lockingClause')) continue;
      this.visitField(obj, key, kind, scope, type);
    }
  }

  private visitField(obj: Obj, key: string, kind: Kind, scope: Scope | null, type: string): void {
    const value = obj[key];
    if (value === undefined || value === null) return;
    if (kind === V) {
      if (typeof value === 'object') throw unsupported(`${type}.${key}`);
      return;
    }
    if (kind === N) {
      const r = this.visitNode(value, scope);
      if (r) obj[key] = r;
      return;
    }
    if (kind === L) {
      if (!Array.isArray(value)) throw unsupported(`${type}.${key}`);
      for (let i = 0; i < value.length; i++) {
        const r = this.visitNode(value[i], scope);
        if (r) value[i] = r;
      }
      return;
    }
    // bare struct
    if (++this.depth > MAX_DEPTH) {
      throw new SqlPolicyError('invalid_sql', `the statement is nested too deeply (more than ${MAX_DEPTH} levels)`, { reason: 'too_complex' });
    }
    try {
      this.visitStruct(kind, value as Obj, scope);
    } finally {
      this.depth--;
    }
  }

  // -------------------------------------------------------------------------------------------
  // SELECT, WITH

  /** refuse INTO / locking; process WITH; return the scope for the rest of the statement */
  private selectPrologue(sel: Obj, scope: Scope | null): Scope | null {
    if (sel['intoClause'] !== undefined) {
      throw violation('SELECT … INTO creates a table and is not allowed; only reads can run', { reason: 'select_into', construct: 'SELECT INTO' });
    }
    const locking = sel['lockingClause'];
    if (Array.isArray(locking) && locking.length > 0) {
      const first = (locking[0] as Obj | undefined)?.['LockingClause'] as Obj | undefined;
      const name = LOCK_NAMES[String(first?.['strength'])] ?? 'FOR UPDATE/SHARE';
      throw violation(`${name} locks rows and is not allowed; only plain reads can run`, { reason: 'locking_clause', construct: name });
    } else if (locking !== undefined && !Array.isArray(locking)) {
      throw unsupported('SelectStmt.lockingClause');
    }
    const w = sel['withClause'];
    if (w === undefined) return scope;
    return this.withClause(w as Obj, scope);
  }

  private withClause(w: Obj, outer: Scope | null): Scope {
    if (typeof w !== 'object' || w === null) throw unsupported('WithClause');
    for (const key of Object.keys(w)) {
      if (key !== 'ctes' && key !== 'recursive' && key !== 'location') throw unsupported(`WithClause.${key}`);
    }
    const ctes = w['ctes'];
    if (!Array.isArray(ctes)) throw unsupported('WithClause.ctes');
    const recursive = w['recursive'] === true;
    const bodies: Obj[] = [];
    const names: string[] = [];
    for (const c of ctes) {
      const cte = (c as Obj | undefined)?.['CommonTableExpr'];
      if (typeof cte !== 'object' || cte === null || Object.keys(c as Obj).length !== 1) throw unsupported('WithClause.ctes');
      const name = (cte as Obj)['ctename'];
      if (typeof name !== 'string') throw unsupported('CommonTableExpr.ctename');
      names.push(name);
      bodies.push(cte as Obj);
    }
    const all: Scope = { names: new Set(names), parent: outer };
    const firstIndex = new Map<string, number>();
    names.forEach((n, i) => {
      if (!firstIndex.has(n)) firstIndex.set(n, i);
    });
    for (let i = 0; i < bodies.length; i++) {
      const cte = bodies[i] as Obj;
      // WITH RECURSIVE: every CTE of the list is visible in every body (PostgreSQL reorders
      // forward references); plain WITH: only the CTEs defined before this one.
      const bodyScope: Scope = recursive ? all : { names: firstNames(firstIndex, i), parent: outer };
      this.cte(cte, bodyScope, names[i] as string);
    }
    return all;
  }

  private cte(cte: Obj, scope: Scope, name: string): void {
    for (const key of Object.keys(cte)) {
      const value = cte[key];
      switch (key) {
        case 'ctename': case 'ctematerialized': case 'location': case 'cterecursive': case 'cterefcount':
          if (typeof value === 'object' && value !== null) throw unsupported(`CommonTableExpr.${key}`);
          break;
        case 'aliascolnames': case 'ctecolnames': case 'ctecoltypes': case 'ctecoltypmods': case 'ctecolcollations':
          this.visitField(cte, key, L, scope, 'CommonTableExpr');
          break;
        case 'search_clause':
          this.visitField(cte, key, 'CTESearchClause', scope, 'CommonTableExpr');
          break;
        case 'cycle_clause':
          this.visitField(cte, key, 'CTECycleClause', scope, 'CommonTableExpr');
          break;
        case 'ctequery': {
          const q = value as Obj;
          const kind = typeof q === 'object' && q !== null ? Object.keys(q)[0] : undefined;
          if (kind !== 'SelectStmt' || Object.keys(q).length !== 1) {
            const what = kind ? statementName(kind, (q as Obj)[kind] as Obj) : 'statement';
            throw violation(`WITH ${quoteIdent(name)} contains ${what}; data-modifying statements in WITH are not allowed, only reads`, {
              reason: 'writable_cte',
              construct: what,
            });
          }
          this.visitField(cte, key, N, scope, 'CommonTableExpr');
          break;
        }
        default:
          throw unsupported(`CommonTableExpr.${key}`);
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // table references

  private rangeVar(rv: Obj, scope: Scope | null): Obj | undefined {
    const resolved = this.resolveTable(rv, scope);
    if (!resolved) return undefined;
    const { template, inner } = resolved;
    if (!template.select) return { RangeVar: { ...inner, alias: aliasOf(rv) } };
    return subselect({ ...template.select, fromClause: [{ RangeVar: inner }] }, rv);
  }

  /**
   * Check a table reference and resolve it: undefined for a CTE reference (or, in verify mode, one
   * of the trusted direct references the rewrite made); else the scoped table it stands for and
   * the physical RangeVar to read it through. Refuses anything the policy does not allow.
   */
  private resolveTable(rv: Obj, scope: Scope | null): { template: Template; inner: Obj } | undefined {
    this.visitStruct('RangeVar', rv, scope); // field shapes, alias column names
    const relname = rv['relname'];
    if (typeof relname !== 'string') throw unsupported('RangeVar.relname');
    if (rv['catalogname'] === undefined && rv['schemaname'] === undefined && inScope(scope, relname)) return undefined;
    if (this.mode === 'verify') {
      if (this.physical(rv)) return undefined;
      throw rewriteFailed();
    }
    const { template, name } = this.resolver.resolve(rv);
    this.tables.add(name);
    this.used.set(template.key, template);
    return { template, inner: physicalRangeVar(template, rv) };
  }

  /** verify mode: a direct reference to one of the used tables that have no row predicate */
  private physical(rv: Obj): boolean {
    if (rv['catalogname'] !== undefined) return false;
    for (const t of this.used.values()) {
      if (!t.select && rv['schemaname'] === t.entry.schema && rv['relname'] === t.entry.table) return true;
    }
    return false;
  }

  private tableSample(ts: Obj, scope: Scope | null): Obj | undefined {
    this.checkSampleMethod(ts);
    const relation = ts['relation'] as Obj | undefined;
    const rv = relation?.['RangeVar'] as Obj | undefined;
    if (!relation || !rv || Object.keys(relation).length !== 1) throw unsupported('RangeTableSample.relation');
    // arguments are expressions (may hold sublinks): walk them like everything else
    for (const key of Object.keys(ts)) {
      if (key === 'relation' || key === 'method') continue;
      const kind = SPECS.get('RangeTableSample')?.get(key);
      if (kind === undefined) throw unsupported(`RangeTableSample.${key}`);
      this.visitField(ts, key, kind, scope, 'RangeTableSample');
    }
    const resolved = this.resolveTable(rv, scope); // on a CTE: PostgreSQL rejects TABLESAMPLE itself
    if (!resolved) return undefined;
    const { template, inner } = resolved;
    const sample: Obj = {};
    for (const key of ['method', 'args', 'repeatable', 'location']) if (ts[key] !== undefined) sample[key] = ts[key];
    if (!template.select) {
      return { RangeTableSample: { ...sample, relation: { RangeVar: { ...inner, alias: aliasOf(rv) } } } };
    }
    sample['relation'] = { RangeVar: inner };
    return subselect({ ...template.select, fromClause: [{ RangeTableSample: sample }] }, rv);
  }

  private checkSampleMethod(ts: Obj): void {
    const method = ts['method'];
    const names = Array.isArray(method) ? method.map(stringValue) : [];
    const name = names.join('.');
    if (names.length !== 1 || !ALLOWED_TABLESAMPLE_METHODS.has(names[0] ?? '')) {
      throw violation(`TABLESAMPLE method ${quoteIdent(name || '?')} is not allowed; use BERNOULLI or SYSTEM`, {
        reason: 'tablesample_method',
        construct: `TABLESAMPLE ${name}`,
      });
    }
  }

  /** verify mode: is this RangeSubselect one of the trusted subqueries the rewrite produced? */
  private trustedSubselect(rs: Obj, scope: Scope | null): boolean {
    const sub = rs['subquery'] as Obj | undefined;
    const sel = sub?.['SelectStmt'] as Obj | undefined;
    if (!sub || !sel || Object.keys(sub).length !== 1) return false;
    const from = sel['fromClause'];
    if (!Array.isArray(from) || from.length !== 1) return false;
    const item = from[0] as Obj;
    let relation: Obj = item;
    let sample: Obj | undefined;
    if (item['RangeTableSample'] !== undefined) {
      sample = item['RangeTableSample'] as Obj;
      relation = sample['relation'] as Obj;
      if (!relation) return false;
    }
    const rv = relation['RangeVar'] as Obj | undefined;
    if (!rv || typeof rv['schemaname'] !== 'string') return false;
    const shape = { ...sel, fromClause: [relation] };
    let match = false;
    for (const t of this.used.values()) {
      if (t.reparsed && sameTree(shape, t.reparsed)) {
        match = true;
        break;
      }
    }
    if (!match) return false;
    if (sample) {
      this.checkSampleMethod(sample);
      for (const k of Object.keys(sample)) {
        if (k === 'relation' || k === 'method') continue;
        const kind = SPECS.get('RangeTableSample')?.get(k);
        if (kind === undefined) throw unsupported(`RangeTableSample.${k}`);
        this.visitField(sample, k, kind, scope, 'RangeTableSample');
      }
    }
    for (const k of Object.keys(rs)) {
      if (k === 'subquery') continue;
      const kind = SPECS.get('RangeSubselect')?.get(k);
      if (kind === undefined) throw unsupported(`RangeSubselect.${k}`);
      this.visitField(rs, k, kind, scope, 'RangeSubselect');
    }
    return true;
  }

  // -------------------------------------------------------------------------------------------
  // functions

  private checkFunction(fc: Obj): void {
    const names = listStrings(fc['funcname'], 'FuncCall.funcname');
    const name = names[names.length - 1];
    const written = names.join('.');
    const qualifiedOk = names.length === 1 || (names.length === 2 && names[0] === 'pg_catalog');
    if (!name || !qualifiedOk || !ALLOWED_FUNCTION_NAMES.has(name)) {
      throw violation(`function ${written}() is not allowed: only allow-listed functions (aggregates, window, math, string, date/time, JSON and array functions) can be used`, {
        reason: 'function_not_allowed',
        function: written,
      });
    }
    if (name === 'extract') {
      // EXTRACT(field FROM x): the field must be a plain word (the deparser prints it raw)
      const args = fc['args'];
      const first = Array.isArray(args) ? (args[0] as Obj | undefined) : undefined;
      const field = ((first?.['A_Const'] as Obj | undefined)?.['sval'] as Obj | undefined)?.['sval'];
      if (fc['funcformat'] === 'COERCE_SQL_SYNTAX' && (typeof field !== 'string' || !/^[A-Za-z_]+$/.test(field))) {
        throw violation('EXTRACT needs a plain field name such as YEAR, MONTH, DAY, EPOCH', {
          reason: 'construct_not_allowed',
          construct: 'EXTRACT',
          function: written,
        });
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// helpers

function stringValue(n: unknown): string {
  const s = (n as Obj | undefined)?.['String'] as Obj | undefined;
  const v = s?.['sval'];
  return typeof v === 'string' ? v : '';
}

function listStrings(list: unknown, where: string): string[] {
  if (!Array.isArray(list)) throw unsupported(where);
  return list.map((n) => {
    const s = (n as Obj | undefined)?.['String'] as Obj | undefined;
    const v = s?.['sval'];
    if (typeof v !== 'string') throw unsupported(where);
    return v;
  });
}

function checkOperator(name: unknown): void {
  if (name === undefined) return;
  const names = listStrings(name, 'operator');
  if (names.length === 1) return;
  if (names.length === 2 && names[0] === 'pg_catalog') return;
  const written = `OPERATOR(${names.join('.')})`;
  throw violation(`${written} is not allowed: operators may only be qualified with pg_catalog`, {
    reason: 'operator_not_allowed',
    construct: written,
  });
}

function checkType(tn: Obj): void {
  const names = listStrings(tn['names'], 'TypeName.names');
  const name = names[names.length - 1] ?? '';
  const written = names.join('.') + (tn['pct_type'] ? '%TYPE' : '');
  const qualifiedOk = names.length === 1 || (names.length === 2 && names[0] === 'pg_catalog');
  if (!qualifiedOk || !ALLOWED_CAST_TYPES.has(name) || tn['pct_type'] === true || tn['setof'] === true) {
    const reg = /^reg[a-z]*$/.test(name) ? ' (reg* types look up system catalogs)' : '';
    throw violation(`type ${written} is not allowed${reg}; values can be cast to text, varchar, char, integer types, numeric, real/double precision, boolean, date, time, timestamp, timestamptz, interval, json, jsonb, uuid, bytea and arrays of these`, {
      reason: 'type_not_allowed',
      construct: written,
    });
  }
}

function checkSqlValueFunction(svf: Obj): void {
  const op = String(svf['op']);
  if (!ALLOWED_SQL_VALUE_FUNCTIONS.has(op)) {
    const name = op.replace(/^SVFOP_/, '').toLowerCase();
    throw violation(`${name.toUpperCase()} is not allowed: only allow-listed functions can be used`, {
      reason: 'function_not_allowed',
      function: name,
    });
  }
}

function unsupported(what: string): SqlPolicyError {
  const construct = what.replace(/\..*$/, '');
  return violation(`the SQL construct ${construct} is not supported by svc's read-only query checker`, {
    reason: 'construct_not_allowed',
    construct,
  });
}

/**
 * The rewriter could not reproduce a statement it had accepted (deparse → parse → verify did not
 * give back what was checked). The statement is refused, never run altered; it is the checker's
 * limitation, not a scope violation: `400 invalid_sql` with reason `unsupported`.
 */
export function rewriteFailed(): SqlPolicyError {
  return new SqlPolicyError(
    'invalid_sql',
    "this statement uses syntax that svc's scope rewriter cannot reproduce faithfully, so it is not supported (nothing ran); write the expression another way, e.g. move a subscript or field access on a parenthesised ARRAY[…]/ROW(…) expression into a subquery or CTE",
    { reason: 'unsupported', construct: 'rewrite' },
  );
}

/** the agent's alias (with its column list), or the table's own name so `t.col` keeps working */
function aliasOf(rv: Obj): Obj {
  return (rv['alias'] as Obj | undefined) ?? { aliasname: rv['relname'] };
}

function subselect(select: Obj, rv: Obj): Obj {
  return { RangeSubselect: { subquery: { SelectStmt: select }, alias: aliasOf(rv) } };
}

/** the physical RangeVar body, keeping the agent's ONLY (marked by the absence of `inh`) */
function physicalRangeVar(template: Template, rv: Obj): Obj {
  const body = template.relation['RangeVar'] as Obj;
  if (rv['inh'] === true) return body;
  const { inh: _inh, ...only } = body;
  return only;
}

/** structural equality of parse trees, ignoring source locations and ONLY (`inh`) */
export function sameTree(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameTree(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ao = a as Obj;
  const bo = b as Obj;
  let n = 0;
  for (const k of Object.keys(ao)) {
    if (k === 'location' || k === 'inh') continue;
    if (!Object.prototype.hasOwnProperty.call(bo, k) || !sameTree(ao[k], bo[k])) return false;
    n++;
  }
  for (const k of Object.keys(bo)) if (k !== 'location' && k !== 'inh') n--;
  return n === 0;
}

const STATEMENT_NAMES: Record<string, string> = {
  InsertStmt: 'INSERT', UpdateStmt: 'UPDATE', DeleteStmt: 'DELETE', MergeStmt: 'MERGE',
  CopyStmt: 'COPY', DoStmt: 'DO', CallStmt: 'CALL', LockStmt: 'LOCK', ListenStmt: 'LISTEN',
  UnlistenStmt: 'UNLISTEN', NotifyStmt: 'NOTIFY', PrepareStmt: 'PREPARE', ExecuteStmt: 'EXECUTE',
  DeallocateStmt: 'DEALLOCATE', VariableShowStmt: 'SHOW', CreateStmt: 'CREATE TABLE',
  CreateTableAsStmt: 'CREATE TABLE AS', DropStmt: 'DROP', TruncateStmt: 'TRUNCATE',
  GrantStmt: 'GRANT/REVOKE', GrantRoleStmt: 'GRANT/REVOKE', CheckPointStmt: 'CHECKPOINT',
  DiscardStmt: 'DISCARD', DeclareCursorStmt: 'DECLARE CURSOR', FetchStmt: 'FETCH',
  ClosePortalStmt: 'CLOSE', LoadStmt: 'LOAD', IndexStmt: 'CREATE INDEX', ViewStmt: 'CREATE VIEW',
  CreateFunctionStmt: 'CREATE FUNCTION', RenameStmt: 'ALTER … RENAME', CommentStmt: 'COMMENT',
  ExplainStmt: 'EXPLAIN',
};

const TRANSACTION_NAMES: Record<string, string> = {
  TRANS_STMT_BEGIN: 'BEGIN', TRANS_STMT_START: 'START TRANSACTION', TRANS_STMT_COMMIT: 'COMMIT',
  TRANS_STMT_ROLLBACK: 'ROLLBACK', TRANS_STMT_SAVEPOINT: 'SAVEPOINT', TRANS_STMT_RELEASE: 'RELEASE',
  TRANS_STMT_ROLLBACK_TO: 'ROLLBACK TO SAVEPOINT', TRANS_STMT_PREPARE: 'PREPARE TRANSACTION',
  TRANS_STMT_COMMIT_PREPARED: 'COMMIT PREPARED', TRANS_STMT_ROLLBACK_PREPARED: 'ROLLBACK PREPARED',
};

/** A human name for a statement node, e.g. `INSERT`, `SET`, `COMMIT`, `CREATE FUNCTION`. */
export function statementName(type: string, body: Obj | undefined): string {
  if (type === 'TransactionStmt') return TRANSACTION_NAMES[String(body?.['kind'])] ?? 'transaction control';
  if (type === 'VariableSetStmt') {
    const kind = String(body?.['kind']);
    if (kind.startsWith('VAR_RESET')) return 'RESET';
    return body?.['name'] === 'role' ? 'SET ROLE' : body?.['name'] === 'session_authorization' ? 'SET SESSION AUTHORIZATION' : 'SET';
  }
  if (type === 'VacuumStmt') return body?.['is_vacuumcmd'] === true ? 'VACUUM' : 'ANALYZE';
  const known = STATEMENT_NAMES[type];
  if (known) return known;
  return type
    .replace(/Stmt$/, '')
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toUpperCase();
}
