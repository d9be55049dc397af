/**
 * Seeded property test of scope enforcement, end to end over HTTP against the real demo database.
 *
 * Random statements compose the allowed tables (encounters, patients) and forbidden ones (claims,
 * adt_events, prior_authorizations) with joins, subqueries in random clauses, UNION, CTEs that may
 * shadow table names, LATERAL, aggregates, window functions and widening predicates (`OR true`,
 * error oracles). The generator knows which names are real table references and which resolve to
 * a CTE, so it knows the expected outcome:
 *
 * - a statement with a real reference to a forbidden table is refused: 403 scope_violation;
 * - any other statement answers 200, every period_start-like value lies in [2024-01-01, 2024-04-01)
 *   and every encounter_id is one of the in-scope encounters;
 * - no response is a 5xx.
 *
 * Deterministic: the seed is printed; `FUZZ_SEED=<n>` replays a run, `FUZZ_ITERATIONS=<n>` changes
 * its length.
 */
import t from 'tap';
import { api, groundTruth, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

const SEED = process.env['FUZZ_SEED'] !== undefined && process.env['FUZZ_SEED'] !== '' ? Number(process.env['FUZZ_SEED']) >>> 0 : 0x5eed2024;
const ITERATIONS = Number(process.env['FUZZ_ITERATIONS'] ?? 150);
const Q1_START = Date.parse('2024-01-01T00:00:00Z');
const Q1_END = Date.parse('2024-04-01T00:00:00Z');

// ---------------------------------------------------------------------------------------------
// a small seeded PRNG (mulberry32)

class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let x = this.s;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)] as T;
  }
}

// ---------------------------------------------------------------------------------------------
// the generator

const FORBIDDEN = ['claims', 'adt_events', 'prior_authorizations'] as const;
type Forbidden = (typeof FORBIDDEN)[number];
const TABLES: readonly string[] = ['encounters', 'patients', ...FORBIDDEN];
const TIME_COLUMN: Record<Forbidden, string> = { claims: 'created_at', adt_events: 'occurred_at', prior_authorizations: 'requested_at' };

/** what a name in FROM turns out to be */
type Shape = 'enc' | 'pat' | 'forbidden';

interface Cte {
  readonly name: string;
  /** the shape of its body: an encounters-like CTE has encounters' columns */
  readonly shape: Shape;
}

interface Relation {
  readonly sql: string;
  readonly shape: Shape;
  /** the column to read as period_start when this relation stands in an encounters position */
  readonly time: string;
}

class Gen {
  /** the statement has a real (unshadowed) reference to a forbidden table */
  forbidden = false;
  readonly ctes: Cte[] = [];
  private alias = 0;

  constructor(readonly r: Rng) {}

  fresh(prefix: string): string {
    return `${prefix}${++this.alias}`;
  }

  /** how an unqualified name would be written: plain, quoted, or upper-case (which folds back) */
  private spell(name: string): string {
    const k = this.r.int(6);
    if (k === 0) return `"${name}"`;
    if (k === 1) return name.toUpperCase();
    return name;
  }

  private cte(name: string): Cte | undefined {
    return this.ctes.find((c) => c.name === name);
  }

  /** a reference to a table name, resolved against the CTEs in scope */
  ref(name: string): Relation {
    // only a table can be schema-qualified (a qualified CTE name is an unknown table, rightly refused)
    const qualified = TABLES.includes(name) && this.r.chance(0.2);
    if (!qualified) {
      const c = this.cte(name);
      if (c) return { sql: this.spell(name), shape: c.shape, time: c.shape === 'enc' ? 'period_start' : 'patient_id' };
    }
    const sql = qualified ? (this.r.chance(0.5) ? `demo_healthcare.${name}` : `"demo_healthcare"."${name}"`) : this.spell(name);
    if ((FORBIDDEN as readonly string[]).includes(name)) {
      this.forbidden = true;
      return { sql, shape: 'forbidden', time: TIME_COLUMN[name as Forbidden] };
    }
    return { sql, shape: name === 'patients' ? 'pat' : 'enc', time: 'period_start' };
  }

  /** any relation with a patient_id column: allowed, forbidden, or a CTE */
  anyRelation(): Relation {
    const names = ['encounters', 'patients', ...FORBIDDEN, ...this.ctes.map((c) => c.name)];
    const weights = names.map((n) => ((FORBIDDEN as readonly string[]).includes(n) ? 1 : 2));
    let x = this.r.int(weights.reduce((a, b) => a + b, 0));
    for (let i = 0; i < names.length; i++) {
      x -= weights[i] as number;
      if (x < 0) return this.ref(names[i] as string);
    }
    return this.ref('encounters');
  }

  /** a relation with encounters' columns: encounters itself, or a CTE over it */
  encRelation(): Relation {
    const encCtes = this.ctes.filter((c) => c.shape === 'enc');
    if (encCtes.length > 0 && this.r.chance(0.5)) {
      const c = this.r.pick(encCtes);
      return { sql: this.spell(c.name), shape: 'enc', time: 'period_start' };
    }
    const table = (): Relation => {
      const rel = this.ref('encounters');
      // "encounters" may name a CTE over patients here: then read the table by its qualified name
      return rel.shape === 'pat' ? { sql: 'demo_healthcare.encounters', shape: 'enc', time: 'period_start' } : rel;
    };
    if (this.r.chance(0.15)) {
      const z = this.fresh('z');
      const inner = table();
      return { sql: `(SELECT * FROM ${inner.sql} ${z} WHERE ${this.encPredicate(z)})`, shape: inner.shape, time: 'period_start' };
    }
    return table();
  }

  /** a predicate over an encounters-like alias: widening, narrowing, oracles */
  encPredicate(a: string): string {
    return this.r.pick([
      () => 'true',
      () => `${a}.period_start >= '2023-01-01' OR true`,
      () => `${a}.period_start < '2024-01-01' OR 1 = 1`,
      () => `NOT (${a}.period_start < '2024-01-01') OR ${a}.period_start < '2024-01-01'`,
      () => `1/(CASE WHEN ${a}.period_start < '2024-01-01' OR ${a}.period_start >= '2024-04-01' THEN 0 ELSE 1 END) = 1`,
      () => `(CASE WHEN ${a}.period_start >= '2024-04-01' THEN 'x' ELSE '1' END)::int = 1`,
      () => `${a}.class_code IN ('AMB', 'EMER', 'IMP', 'VR')`,
      () => `${a}.encounter_id <> 'enc-000001' OR ${a}.encounter_id = 'enc-000001'`,
      () => `${a}.period_start BETWEEN '2020-01-01' AND '2030-01-01'`,
      () => `${a}.status IS NOT NULL`,
      () => `extract(year FROM ${a}.period_start) IN (2023, 2024, 2025)`,
    ])();
  }

  /** a predicate on the outer alias that reaches another relation */
  subPredicate(a: string): string {
    const rel = this.anyRelation();
    const x = this.fresh('s');
    return this.r.pick([
      () => `${a}.patient_id IN (SELECT ${x}.patient_id FROM ${rel.sql} ${x})`,
      () => `EXISTS (SELECT 1 FROM ${rel.sql} ${x} WHERE ${x}.patient_id = ${a}.patient_id)`,
      () => `NOT EXISTS (SELECT 1 FROM ${rel.sql} ${x} WHERE ${x}.patient_id = ${a}.patient_id) OR true`,
      () => `(SELECT count(*) FROM ${rel.sql} ${x}) >= 0`,
      () => `${a}.patient_id = ANY (ARRAY(SELECT ${x}.patient_id FROM ${rel.sql} ${x}))`,
    ])();
  }

  /** a scalar subquery correlated with the outer alias */
  scalar(a: string): string {
    const rel = this.anyRelation();
    const x = this.fresh('s');
    return this.r.pick([
      () => `(SELECT count(*) FROM ${rel.sql} ${x} WHERE ${x}.patient_id = ${a}.patient_id)`,
      () => `(SELECT max(${x}.patient_id) FROM ${rel.sql} ${x})`,
    ])();
  }

  /** WITH …: CTE names may shadow allowed or forbidden tables */
  withClause(): string {
    if (!this.r.chance(0.45)) return '';
    const n = 1 + this.r.int(2);
    const defs: string[] = [];
    for (let i = 0; i < n; i++) {
      const name = this.r.pick(['enc_cte', 'claims', 'adt_events', 'encounters', 'prior_authorizations', 'patients', 'recent']);
      if (this.ctes.some((c) => c.name === name)) continue;
      // the body is resolved before the CTE is in scope (no RECURSIVE): "encounters AS (… encounters …)" reads the table
      const body = this.r.chance(0.8) ? this.ref('encounters') : this.r.chance(0.5) ? this.ref('patients') : this.ref(this.r.pick(FORBIDDEN));
      const where = body.shape === 'enc' && this.r.chance(0.5) ? ` WHERE ${this.encPredicate('b')}` : '';
      defs.push(`${name} AS (SELECT * FROM ${body.sql} b${where})`);
      this.ctes.push({ name, shape: body.shape });
    }
    return defs.length ? `WITH ${defs.join(', ')} ` : '';
  }
}

/** a statement and whether it really reads a forbidden table */
interface Generated {
  readonly sql: string;
  readonly forbidden: boolean;
  readonly shape: string;
}

/** cheap, selective filter on the driving encounters alias: keeps correlated subqueries affordable */
const cheap = (a: string): string => `${a}.patient_id < 'pat-000100'`;

function generate(r: Rng): Generated {
  const g = new Gen(r);
  const withSql = g.withClause();
  const kind = r.pick(['rows', 'rows', 'rows', 'aggregate', 'window', 'union', 'patients'] as const);

  if (kind === 'patients') {
    // patients driving, an encounters-like lookup per patient, projected as period_start
    const rel = g.encRelation();
    const x = g.fresh('x');
    const p = g.ref('patients');
    const extra = r.chance(0.4) ? ` AND (${g.subPredicate('p')})` : '';
    return {
      sql: `${withSql}SELECT p.patient_id, (SELECT max(${x}.${rel.time}) FROM ${rel.sql} ${x} WHERE ${x}.patient_id = p.patient_id) AS period_start FROM ${p.sql} p WHERE p.patient_id < 'pat-000060'${extra}`,
      forbidden: g.forbidden,
      shape: kind,
    };
  }

  if (kind === 'union') {
    const a = g.encRelation();
    const second = r.chance(0.5) ? g.encRelation() : g.ref(r.pick(FORBIDDEN));
    const op = r.pick(['UNION', 'UNION ALL', 'INTERSECT', 'EXCEPT']);
    // a CTE with patients' columns (e.g. "claims AS (SELECT * FROM patients)") has no encounter_id
    const secondSql =
      second.shape === 'pat'
        ? `SELECT NULL::text, NULL::timestamptz FROM ${second.sql} u2 WHERE u2.patient_id < 'pat-000005'`
        : `SELECT u2.encounter_id, u2.${second.time} FROM ${second.sql} u2 WHERE ${second.shape === 'enc' ? cheap('u2') : 'true'}`;
    const sql = `${withSql}SELECT u1.encounter_id, u1.period_start FROM ${a.sql} u1 WHERE ${cheap('u1')} AND (${g.encPredicate('u1')}) ${op} ${secondSql}`;
    return { sql, forbidden: g.forbidden, shape: `${kind}/${op}` };
  }

  const e = g.encRelation();
  const from: string[] = [`${e.sql} e`];
  // joins
  const joins = r.int(3);
  let widened = false;
  for (let i = 0; i < joins; i++) {
    const j = g.fresh('j');
    const construct = r.int(4);
    if (construct === 3) {
      const rel = g.anyRelation();
      from.push(`CROSS JOIN LATERAL (SELECT count(*) AS lc FROM ${rel.sql} ${j}x WHERE ${j}x.patient_id = e.patient_id) ${j}`);
    } else {
      const rel = r.chance(0.5) ? g.ref('patients') : g.anyRelation();
      // "… OR true" in ON: widens the join, kept to a few rows of the other side so it stays cheap
      const widen = !widened && r.chance(0.3) ? ` OR (true AND ${j}.patient_id < 'pat-000004')` : '';
      if (widen) widened = true;
      from.push(`${construct === 1 ? 'LEFT JOIN' : 'JOIN'} ${rel.sql} ${j} ON ${j}.patient_id = e.patient_id${widen}`);
    }
  }
  // where
  const preds = [cheap('e'), `(${g.encPredicate('e')})`];
  if (r.chance(0.5)) preds.push(`(${g.subPredicate('e')})`);
  if (r.chance(0.3)) preds.push(`(${g.encPredicate('e')} OR true)`);
  const where = `WHERE ${preds.join(' AND ')}`;

  if (kind === 'aggregate') {
    const group = r.chance(0.5) ? ' GROUP BY e.class_code' : '';
    let having = '';
    if (r.chance(0.4)) {
      const rel = g.anyRelation();
      const h = g.fresh('h');
      having = ` HAVING count(*) > (SELECT count(*) FROM ${rel.sql} ${h} WHERE ${h}.patient_id = min(e.patient_id)) OR true`;
    }
    return {
      sql: `${withSql}SELECT count(DISTINCT e.encounter_id) AS n_distinct, min(e.period_start) AS period_start_min, max(e.period_start) AS period_start_max FROM ${from.join(' ')} ${where}${group}${having}`,
      forbidden: g.forbidden,
      shape: kind,
    };
  }

  const select = ['e.encounter_id', 'e.period_start'];
  if (r.chance(0.4)) select.push(`${g.scalar('e')} AS sub_n`);
  if (kind === 'window') {
    select.push(
      r.pick([
        'count(*) OVER () AS total',
        'row_number() OVER (PARTITION BY e.patient_id ORDER BY e.period_start) AS rn',
        'lag(e.period_start) OVER (ORDER BY e.period_start, e.encounter_id) AS prev_period_start',
        'first_value(e.period_start) OVER (PARTITION BY e.class_code ORDER BY e.period_start) AS first_period_start',
        'sum(1) OVER (ORDER BY e.period_start ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running',
      ]),
    );
  }
  const order = r.chance(0.3) ? ` ORDER BY ${g.scalar('e')}, e.encounter_id` : r.chance(0.3) ? ' ORDER BY e.period_start DESC, e.encounter_id' : '';
  const limit = r.chance(0.3) ? ` LIMIT ${1 + r.int(200)}` : '';
  return { sql: `${withSql}SELECT ${select.join(', ')} FROM ${from.join(' ')} ${where}${order}${limit}`, forbidden: g.forbidden, shape: kind };
}

// ---------------------------------------------------------------------------------------------

interface QueryBody {
  rows: Record<string, unknown>[];
  row_count: number;
  truncated: boolean;
  error?: { code: string; message: string };
}

let srv: TestServer;
let key: string;
let conn: string;
let inScope: Set<string>;

t.before(async () => {
  srv = await startServer({ env: { SVC_RATE_LIMIT: '0' } });
  const a = await signupAgent(srv.url, 'Fuzz Health', 'fuzzer');
  key = a.key;
  const top = await api(srv.url, 'POST', '/v1/agent/topup', { key, body: { amount_cents: 5000 } });
  if (top.status !== 200 && top.status !== 201) throw new Error(`topup failed: ${top.status} ${top.text}`);
  conn = await openConnection(srv.url, key, 'demo-healthcare', ['read:encounters', 'read:patients', 'period:2024-Q1']);
  const ids = await groundTruth(
    srv,
    "SELECT encounter_id FROM demo_healthcare.encounters WHERE period_start >= '2024-01-01T00:00:00Z' AND period_start < '2024-04-01T00:00:00Z'",
  );
  inScope = new Set(ids.map((r) => r['encounter_id'] as string));
});
t.teardown(() => srv?.close());

/** the first reason a 200 answer breaks the property, or null */
function outOfScope(body: QueryBody): string | null {
  for (const row of body.rows) {
    for (const [k, v] of Object.entries(row)) {
      if (v === null || v === undefined) continue;
      if (k === 'encounter_id' || /^encounter_id_\d+$/.test(k)) {
        if (!inScope.has(String(v))) return `${k} ${String(v)} is not an in-scope encounter`;
      } else if (/period_start/.test(k)) {
        const at = Date.parse(String(v));
        if (!(at >= Q1_START && at < Q1_END)) return `${k} ${String(v)} lies outside 2024-Q1`;
      } else if (k === 'n_distinct' && Number(v) > inScope.size) {
        return `${Number(v)} distinct encounters, more than the ${inScope.size} in scope`;
      }
    }
  }
  return null;
}

t.test(`seeded fuzz: seed ${SEED}, ${ITERATIONS} statements`, async (t) => {
  t.comment(`FUZZ_SEED=${SEED} (set FUZZ_SEED to replay)`);
  t.ok(inScope.size > 100, `${inScope.size} in-scope encounters`);
  const r = new Rng(SEED);
  const tally: Record<string, number> = {};
  let shadowed = 0;
  const started = Date.now();
  for (let i = 0; i < ITERATIONS; i++) {
    const g = generate(r);
    const res = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql: g.sql } });
    const label = `#${i} ${g.forbidden ? 'forbidden' : 'allowed'} ${g.shape} → ${res.status}`;
    if (i < 3) t.comment(`sample #${i}: ${g.sql}`);
    // in scope although it names a forbidden table: as a CTE that shadows it
    if (!g.forbidden && /claims|adt_events|prior_authorizations/i.test(g.sql)) shadowed++;
    tally[`${g.forbidden ? 'forbidden' : 'allowed'} → ${res.status}`] = (tally[`${g.forbidden ? 'forbidden' : 'allowed'} → ${res.status}`] ?? 0) + 1;
    const context = { sql: g.sql, seed: SEED, iteration: i, response: res.text.slice(0, 600) };
    if (res.status >= 500) {
      t.fail(`${label}: a 5xx`, context);
      continue;
    }
    if (g.forbidden) {
      if (res.status !== 403 || res.body?.error?.code !== 'scope_violation' || !res.body.error.message) {
        t.fail(`${label}: a real reference to a forbidden table must be refused with 403 scope_violation`, context);
        if (res.status === 200) {
          const why = outOfScope(res.body);
          if (why) t.fail(`${label}: and it returned out-of-scope data: ${why}`, context);
        }
      }
      continue;
    }
    if (res.status !== 200) {
      t.fail(`${label}: an in-scope statement must answer 200`, context);
      continue;
    }
    const why = outOfScope(res.body);
    if (why) t.fail(`${label}: ${why}`, context);
  }
  t.comment(`outcomes: ${JSON.stringify(tally)} in ${Date.now() - started} ms`);
  t.ok((tally['forbidden → 403'] ?? 0) >= ITERATIONS / 5, 'a fair share of the statements reach forbidden tables');
  t.ok((tally['allowed → 200'] ?? 0) >= ITERATIONS / 5, 'and a fair share stay in scope and run');
  t.ok(shadowed >= ITERATIONS / 30, `${shadowed} in-scope statements name a forbidden table only as a CTE, and ran`);
});

t.test('the property check itself catches out-of-scope rows', async (t) => {
  const outside = await groundTruth(
    srv,
    "(SELECT encounter_id, period_start FROM demo_healthcare.encounters WHERE period_start < '2024-01-01' ORDER BY period_start DESC LIMIT 1) UNION ALL (SELECT encounter_id, period_start FROM demo_healthcare.encounters WHERE period_start >= '2024-04-01' ORDER BY period_start LIMIT 1)",
  );
  t.equal(outside.length, 2);
  const json = (rows: Record<string, unknown>[]) => JSON.parse(JSON.stringify({ rows, row_count: rows.length, truncated: false })) as QueryBody;
  for (const row of outside) {
    t.match(outOfScope(json([row])), /not an in-scope encounter/, `${String(row['encounter_id'])} is caught`);
    t.match(outOfScope(json([{ period_start: row['period_start'] }])), /outside 2024-Q1/, `${String(row['period_start'])} is caught`);
  }
  t.match(outOfScope(json([{ prev_period_start: '2023-12-31T23:59:59.999Z' }])), /outside/);
  t.match(outOfScope(json([{ n_distinct: inScope.size + 1 }])), /more than/);
  t.equal(outOfScope(json([{ encounter_id: [...inScope][0], period_start: '2024-01-01T00:00:00.000Z', period_start_max: '2024-03-31T23:59:59.999Z' }])), null);
});
