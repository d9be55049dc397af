/**
 * The second layer on its own: even a statement that was never rewritten (as if the SQL layer had
 * failed) sees only the rows of the transaction's scope, enforced by forced row-level security for
 * the reader role. Runs on the embedded engine and, when one answers, on a real PostgreSQL.
 */
import t from 'tap';
import type { TapTest } from '../helpers/tap.js';
import { Catalogue } from '../../control-plane/catalogue/index.js';
import { EmbeddedDemoEngine } from '../../control-plane/demo/engine.js';
import type { DemoEngine, DemoQuery } from '../../control-plane/demo/query.js';
import { PostgresDemoEngine } from '../../control-plane/demo/external.js';
import { scopeSettings } from '../../control-plane/query/scope-settings.js';
import { demoImage, freshDatabase, realPostgresAvailable } from '../helpers/server.js';

const datasets = new Catalogue().datasets;
const all = datasets.flatMap((d) => d.tables.map((x) => ({ schema: d.schema, table: x.name })));
const enc = { schema: 'demo_healthcare', table: 'encounters' };
const q1 = { start: '2024-01-01T00:00:00.000Z', end: '2024-04-01T00:00:00.000Z' };
const q3 = { start: '2024-07-01T00:00:00.000Z', end: '2024-10-01T00:00:00.000Z' };

function query(sql: string, settings: string[]): DemoQuery {
  return { sql, direct: false, settings, tenant: 'test', timeoutMs: 10_000, maxRows: 100_000, maxBytes: 50_000_000 };
}

async function count(engine: DemoEngine, sql: string, settings: string[]): Promise<number> {
  const r = await engine.run(query(sql, settings));
  return Number((r.rows[0] as { n: number }).n);
}

async function exercise(t: TapTest, engine: DemoEngine): Promise<void> {
  const truthQ1 = await count(engine, `SELECT count(*) AS n FROM demo_healthcare.encounters WHERE period_start >= '${q1.start}' AND period_start < '${q1.end}'`, scopeSettings(all, []));
  const truthQ3 = await count(engine, `SELECT count(*) AS n FROM demo_healthcare.encounters WHERE period_start >= '${q3.start}' AND period_start < '${q3.end}'`, scopeSettings(all, []));
  const everything = await count(engine, 'SELECT count(*) AS n FROM demo_healthcare.encounters', scopeSettings(all, []));
  t.ok(truthQ1 > 0 && truthQ1 < everything);

  t.equal(await count(engine, 'SELECT count(*) AS n FROM demo_healthcare.encounters', scopeSettings([enc], [q1])), truthQ1, 'unrewritten statement: period enforced');
  t.equal(await count(engine, 'SELECT count(*) AS n FROM demo_healthcare.encounters WHERE true OR 1/0 = 1', scopeSettings([enc], [q1, q3])), truthQ1 + truthQ3, 'periods are a union');
  t.equal(await count(engine, 'SELECT count(*) AS n FROM demo_healthcare.claims', scopeSettings([enc], [q1])), 0, 'a table outside the scope shows no rows');
  t.equal(await count(engine, 'SELECT count(*) AS n FROM demo_healthcare.patients', scopeSettings([enc], [q1])), 0, 'a table without a time column is still table-scoped');
  t.equal(await count(engine, 'SELECT count(*) AS n FROM demo_healthcare.encounters', []), 0, 'no scope told: nothing visible (fail closed)');
  t.equal(await count(engine, 'SELECT count(*) AS n FROM demo_healthcare.encounters', [`SET LOCAL "svc.tables" = 'demo_healthcare.encounters'`]), 0, 'periods unset: nothing visible');
  // an error oracle cannot probe hidden rows: the policy qual runs first (leakproof ordering)
  const oracle = await engine.run(query(`SELECT count(*) AS n FROM demo_healthcare.encounters WHERE 1 / (CASE WHEN period_start < '${q1.start}' THEN 0 ELSE 1 END) = 1`, scopeSettings([enc], [q1])));
  t.equal(Number((oracle.rows[0] as { n: number }).n), truthQ1, 'no division by zero from out-of-scope rows');

  const refused = async (sql: string, sqlState: string, name: string): Promise<void> => {
    await t.rejects(engine.run(query(sql, scopeSettings([enc], [q1]))), { code: 'DEMO_ERR_SQL', sqlState }, name);
  };
  await refused(`SELECT set_config('svc.tables', 'demo_healthcare.claims', true)`, '42501', 'the reader cannot call set_config');
  await refused('SELECT * FROM svc_meta.demo_version', '42501', 'the reader cannot read the control tables');
  // the extended protocol runs one statement per round trip, whatever the text holds
  await t.rejects(engine.run({ ...query('SELECT 1 AS n; SELECT 2 AS n', scopeSettings([enc], [])), direct: true }), { code: 'DEMO_ERR_SQL' }, 'no second statement');
  await t.rejects(engine.run(query('SELECT 1 AS n; COMMIT', scopeSettings([enc], []))), { code: 'DEMO_ERR_SQL' }, 'no COMMIT smuggled after the cursor');
  // a write cannot even be declared as a cursor, and the role has no write privilege either
  await t.rejects(engine.run({ ...query(`INSERT INTO demo_healthcare.encounters (encounter_id) VALUES ('x')`, scopeSettings([enc], [])), direct: true }), { code: 'DEMO_ERR_SQL' }, 'no writes');
}

t.test('embedded engine', async (t) => {
  const engine = await EmbeddedDemoEngine.start(await demoImage(), { min: 1, max: 1 });
  t.teardown(() => engine.close());
  await exercise(t, engine);
  // template0 and template1 are dropped from the image (IMAGE_ONLY_POSTGRES): about 15 MB less in memory
  const dbs = await engine.run(query(`SELECT string_agg(datname, ',') AS dbs FROM pg_database`, scopeSettings([enc], [])));
  t.same(dbs.rows, [{ dbs: 'postgres' }], 'the demo image holds only the postgres database');
});

t.test('PostgreSQL', async (t) => {
  if (!(await realPostgresAvailable())) {
    t.skip('no PostgreSQL answers at TEST_DATABASE_URL', () => undefined);
    return;
  }
  const db = await freshDatabase('svc_rls');
  const engine = await PostgresDemoEngine.start(db.url, datasets);
  t.teardown(async () => {
    await engine.close();
    await db.drop();
  });
  await exercise(t, engine);
});

t.test('the row-security settings are read once per statement (InitPlans), not once per row', async (t) => {
  const engine = await EmbeddedDemoEngine.start(await demoImage(), { min: 1, max: 1 });
  t.teardown(() => engine.close());
  const settings = scopeSettings([enc], [q1]);
  const plan = await engine.run({ ...query(`EXPLAIN SELECT count(*) FROM demo_healthcare.encounters`, settings), direct: true });
  const text = plan.rows.map((r) => String(Object.values(r)[0])).join('\n');
  t.match(text, /InitPlan/, 'the settings are InitPlans');
  t.notMatch(text, /current_setting|table_allowed\(|period_lo\(\)|period_hi\(\)|period_n\(\)/, `no setting is a per-row call:\n${text}`);
  t.equal(await count(engine, `SELECT count(*) AS n FROM demo_healthcare.encounters WHERE period_start < '${q1.start}'`, settings), 0, 'and still nothing outside the period');
});
