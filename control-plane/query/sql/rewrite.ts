/**
 * How the SQL policy rewrites a table reference: each allowed table is read through a
 * {@link Template} (a subquery over the physical table with its row predicate, or the physical
 * table itself), under the agent's alias; and how the verify pass recognizes those trusted
 * subqueries in the re-parsed statement (structural equality, {@link sameTree}).
 */
import type { Obj } from './grammar.js';

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
  /**
   * the template as text, for the splice (splice.ts): the select as deparsed (the text
   * `reparsed` was parsed from), or the quoted physical name `"schema"."table"` when there is no
   * select
   */
  readonly text: string;
}

export interface Resolver {
  /** resolve a non-CTE RangeVar to a template (throws a SqlPolicyError when out of scope) */
  resolve(rv: Obj): { template: Template; name: string };
}

/** the agent's alias (with its column list), or the table's own name so `t.col` keeps working */
export function aliasOf(rv: Obj): Obj {
  return (rv['alias'] as Obj | undefined) ?? { aliasname: rv['relname'] };
}

export function subselect(select: Obj, rv: Obj): Obj {
  return { RangeSubselect: { subquery: { SelectStmt: select }, alias: aliasOf(rv) } };
}

/** the physical RangeVar body, keeping the agent's ONLY (marked by the absence of `inh`) */
export function physicalRangeVar(template: Template, rv: Obj): Obj {
  const body = template.relation['RangeVar'] as Obj;
  if (rv['inh'] === true) return body;
  const { inh: _inh, ...only } = body;
  return only;
}

const hasOwn = Object.prototype.hasOwnProperty;

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
  // own keys only: the trees are JSON.parse's plain objects (for…in: no key arrays allocated)
  let n = 0;
  for (const k in ao) {
    if (!hasOwn.call(ao, k) || k === 'location' || k === 'inh') continue;
    if (!hasOwn.call(bo, k) || !sameTree(ao[k], bo[k])) return false;
    n++;
  }
  for (const k in bo) if (hasOwn.call(bo, k) && k !== 'location' && k !== 'inh') n--;
  return n === 0;
}
