/**
 * The MySQL checker's tree walker: one SELECT's tree, walked with the allow-lists (allowlists.ts);
 * every table reference is resolved with CTE scoping against the policy and, in `check` mode,
 * replaced by its in-scope form; `verify` mode walks the re-parsed rewrite, where only CTEs and
 * the physical tables the check wrote may appear.
 */
import { SqlPolicyError } from '../../query/sql/index.js';
import { EXPR_TYPES, MYSQL_ALLOWED_FUNCTIONS, OPERATORS, REFUSED_TYPES, SELECT_KEYS, SELECT_OPTIONS, SET_OPS } from './allowlists.js';
import { rewriteFailed, violation } from './errors.js';
import { OPT, parser, type Obj } from './parse.js';
import { isMysqlSystemSchema, quoteMysqlIdent, type MysqlPolicy, type MysqlScopedTable } from './policy.js';

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

export class MysqlWalker {
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
