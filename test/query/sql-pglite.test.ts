/**
 * End-to-end check of the rewrite against a real PostgreSQL (PGlite, in memory): the rewritten
 * statements run, return only in-scope rows, and error oracles cannot see out-of-scope rows.
 */
import t from 'tap';
import { PGlite } from '@electric-sql/pglite';

import { checkAndRewrite, initSqlParser, type SqlPolicy } from '../../control-plane/query/sql/index.js';
import { legit, policy, spliceCases, viaTree } from './sql-cases.js';

await initSqlParser();

const db = new PGlite();
t.teardown(() => db.close());

await db.exec(`
  CREATE SCHEMA demo_healthcare;
  CREATE TABLE demo_healthcare.patients (id int PRIMARY KEY, name text, gender text);
  CREATE TABLE demo_healthcare.encounters (
    id int PRIMARY KEY, patient_id int, previous_id int, period_start timestamptz, status text,
    class text, cost numeric, data jsonb, tags text[]
  );
  CREATE TABLE demo_healthcare.claims (id int PRIMARY KEY, encounter_id int, amount numeric, status text);
  INSERT INTO demo_healthcare.patients SELECT g, 'p' || g, CASE WHEN g % 2 = 0 THEN 'f' ELSE 'm' END FROM generate_series(1, 20) g;
  -- 100 encounters: ids 1..40 in Q1 2024 (in scope), 41..100 outside; id 77 (out of scope) has cost 5
  INSERT INTO demo_healthcare.encounters
    SELECT g, 1 + g % 20, NULLIF(g - 1, 0),
           CASE WHEN g <= 40 THEN timestamptz '2024-01-02' + (g || ' hours')::interval
                ELSE timestamptz '2023-06-01' + (g || ' days')::interval END,
           CASE WHEN g % 3 = 0 THEN 'finished' ELSE 'planned' END,
           CASE WHEN g % 2 = 0 THEN 'AMB' ELSE 'IMP' END,
           CASE WHEN g = 77 THEN 5 ELSE 10 + g END,
           jsonb_build_object('code', 'c' || g, 'x', jsonb_build_array(1, 2), 'a', jsonb_build_object('b', g)),
           ARRAY['t' || g % 4]
    FROM generate_series(1, 100) g;
  INSERT INTO demo_healthcare.claims SELECT g, g, g * 10, 'paid' FROM generate_series(1, 100) g;
  ANALYZE;
`);

async function run(sql: string): Promise<Record<string, unknown>[]> {
  await db.exec('BEGIN READ ONLY');
  try {
    const r = await db.query<Record<string, unknown>>(sql);
    return r.rows;
  } finally {
    await db.exec('ROLLBACK');
  }
}

async function scoped(sql: string, p: SqlPolicy = policy): Promise<Record<string, unknown>[]> {
  return run(checkAndRewrite(sql, p).sql);
}

t.test('every legit statement of the corpus runs after the rewrite', async (t) => {
  for (const c of legit) {
    const { sql } = checkAndRewrite(c.sql, policy);
    try {
      await run(sql);
      t.pass(c.sql);
    } catch (err) {
      t.fail(`${c.sql}\n  rewritten: ${sql}\n  error: ${(err as Error).message}`);
    }
  }
});

t.test('spliced and deparsed, a statement answers the same rows', async (t) => {
  // both in one transaction (now() is the transaction's start); clock_timestamp() differs anyway
  const both = async (a: string, b: string): Promise<[string[], string[]]> => {
    await db.exec('BEGIN READ ONLY');
    try {
      const rows = async (sql: string) => (await db.query<Record<string, unknown>>(sql)).rows.map((r) => JSON.stringify(r)).sort();
      return [await rows(a), await rows(b)];
    } finally {
      await db.exec('ROLLBACK');
    }
  };
  let compared = 0;
  for (const c of [...legit, ...spliceCases]) {
    if (/clock_timestamp/.test(c.sql)) continue;
    const spliced = checkAndRewrite(c.sql, policy).sql;
    const tree = viaTree(() => checkAndRewrite(c.sql, policy)).sql;
    if (spliced === tree) continue; // deparsed both times: the same statement
    const [a, b] = await both(spliced, tree);
    t.same(a, b, `${c.sql}\n  spliced: ${spliced}\n  deparsed: ${tree}`);
    compared++;
  }
  t.ok(compared >= 50, `${compared} statements compared`);
});

t.test('only in-scope rows are visible', async (t) => {
  t.same(await scoped('SELECT count(*)::int AS n FROM encounters'), [{ n: 40 }]);
  t.same(await scoped('SELECT max(id) AS m FROM encounters'), [{ m: 40 }]);
  t.same(await scoped('TABLE encounters').then((r) => r.length), 40);
  t.same(await scoped('SELECT count(*)::int AS n FROM patients'), [{ n: 20 }]);
  t.same(await scoped('SELECT count(*)::int AS n FROM encounters e JOIN patients p ON p.id = e.patient_id'), [{ n: 40 }]);
  t.same(await scoped('SELECT max(rn)::int AS n FROM (SELECT row_number() OVER (ORDER BY id) AS rn FROM encounters) s'), [{ n: 40 }]);
  t.same(await scoped('SELECT count(*)::int AS n FROM encounters WHERE id > 40 OR period_start < \'2024-01-01\''), [{ n: 0 }]);
  t.same(await scoped('SELECT count(*)::int AS n FROM patients p WHERE EXISTS (SELECT 1 FROM encounters e WHERE e.id = 77 AND e.patient_id = p.id)'), [{ n: 0 }]);
  t.same(await scoped('SELECT count(*)::int AS n FROM ONLY demo_healthcare.encounters'), [{ n: 40 }]);
  t.same(await scoped('WITH RECURSIVE c AS (SELECT id FROM encounters WHERE id = 1 UNION ALL SELECT e.id FROM encounters e JOIN c ON e.previous_id = c.id) SELECT count(*)::int AS n FROM c'), [{ n: 40 }]);
  // an agent CTE named like the forbidden table is its own CTE
  t.same(await scoped('WITH claims AS (SELECT * FROM encounters) SELECT count(*)::int AS n FROM claims'), [{ n: 40 }]);
});

t.test('error oracles never see out-of-scope rows', async (t) => {
  // row 77 is out of scope and has cost = 5
  t.same(await scoped('SELECT count(*)::int AS n FROM encounters WHERE 1 / (cost - 5) > 0'), [{ n: 40 }]);
  t.same(await scoped('SELECT count(*)::int AS n FROM encounters e JOIN patients p ON p.id = e.patient_id WHERE 1 / (e.cost - 5) >= 0'), [{ n: 40 }]);

  // a predicate PostgreSQL ranks as costlier than the agent's qual (an OR of ranges): without
  // the OFFSET 0 fence the planner evaluates 1/(cost-5) first and the error leaks row 77
  const orPred = `("period_start" >= '2024-01-01'::timestamptz AND "period_start" < '2024-04-01'::timestamptz) OR ("period_start" >= '2030-01-01'::timestamptz AND "period_start" < '2030-02-01'::timestamptz)`;
  const orPolicy: SqlPolicy = {
    ...policy,
    allowed: new Map([['encounters', { name: 'encounters', schema: 'demo_healthcare', table: 'encounters', predicate: orPred }]]),
  };
  const leaky = `SELECT count(*) FROM (SELECT * FROM demo_healthcare.encounters WHERE ${orPred}) AS encounters WHERE 1 / (cost - 5) > 0`;
  await t.rejects(run(leaky), /division by zero/, 'sanity: an unfenced subquery leaks through the error');
  t.same(await scoped('SELECT count(*)::int AS n FROM encounters WHERE 1 / (cost - 5) > 0', orPolicy), [{ n: 40 }]);
  t.same(await scoped('SELECT count(*)::int AS n FROM encounters WHERE sqrt(cost - 6) IS NOT NULL', orPolicy), [{ n: 40 }]);
});
