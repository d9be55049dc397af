/**
 * The tree walker of the SQL policy layer: it visits every node of a statement, checking each
 * against the grammar (grammar.ts) and the allow-lists (checks.ts), with SQL's CTE scoping.
 *
 * Two modes:
 * - `check`: the agent's statement. Table references are resolved against the policy and each
 *   allowed one is replaced (in place) by a subquery over the physical table with its row
 *   predicate (rewrite.ts).
 * - `verify`: the re-parsed rewritten statement, i.e. exactly what will run. The only table
 *   references allowed are CTE references and the trusted subqueries produced by `check`
 *   (matched structurally), so a deparser bug cannot smuggle anything past the policy.
 */

import { checkFunction, checkIndirection, checkOperator, checkSampleMethod, checkSqlValueFunction, checkType } from './checks.js';
import { rewriteFailed, SqlPolicyError, unsupported, violation } from './errors.js';
import { type Kind, L, LOCK_NAMES, N, type Obj, REFUSED, SPECS, V } from './grammar.js';
import { quoteIdent } from './quote.js';
import { aliasOf, physicalRangeVar, type Resolver, sameTree, subselect, type Template } from './rewrite.js';
import type { Rewritten } from './splice.js';
import { statementName } from './statement-names.js';

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

const hasOwn = Object.prototype.hasOwnProperty;

export class Walker {
  readonly tables = new Set<string>();
  /** templates used by the rewrite (check mode) / allowed to appear (verify mode), by key */
  readonly used = new Map<string, Template>();
  /** check mode: every table reference rewritten, in visit order (for the text splice, splice.ts) */
  readonly rewritten: Rewritten[] = [];
  /** check mode: false once the statement has a rewrite the splice does not make (TABLESAMPLE) */
  spliceable = true;
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
    // its one key (for…in: no key array allocated per node)
    let type: string | undefined;
    for (const key in wrapper) {
      if (!hasOwn.call(wrapper, key)) continue;
      if (type !== undefined) throw unsupported('malformed parse tree');
      type = key;
    }
    if (type === undefined) return undefined; // NIL placeholder, e.g. plain DISTINCT
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
        checkFunction(obj);
        break;
      case 'TypeName':
        checkType(obj);
        break;
      case 'A_Indirection':
        checkIndirection(obj);
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

    for (const key in obj) {
      if (!hasOwn.call(obj, key)) continue;
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
    this.rewritten.push({ rv, template });
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
    this.spliceable = false;
    checkSampleMethod(ts);
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
      // the name first (equal trees have it): the full comparison only for the one template
      if (t.reparsed && rv['relname'] === t.entry.table && rv['schemaname'] === t.entry.schema && sameTree(shape, t.reparsed)) {
        match = true;
        break;
      }
    }
    if (!match) return false;
    if (sample) {
      checkSampleMethod(sample);
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
}
