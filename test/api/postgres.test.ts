/**
 * The core flow with a real PostgreSQL for both the control-plane state (DATABASE_URL) and the
 * demo datasets (SVC_DEMO_DATABASE_URL): scoping, concurrency of billing and audit under real
 * row locks, server-side statement timeouts, tampering. Skipped when no server answers.
 */
import t from 'tap';
import pg from 'pg';
import { generateKeyAndCsr } from '../../pki/index.js';
import { TENANT_SPACE } from '../../control-plane/demo/external.js';
import { watchPlaces } from '../helpers/advisory.js';
import { api, freshDatabase, openConnection, realPostgresAvailable, signupAgent, startServer, type TestServer } from '../helpers/server.js';

if (!(await realPostgresAvailable())) {
  t.comment('no PostgreSQL answers at TEST_DATABASE_URL: skipped');
  t.skip('no PostgreSQL', () => undefined);
} else {
  const state = await freshDatabase('svc_state');
  const demo = await freshDatabase('svc_demo');
  let srv: TestServer;
  t.before(async () => {
    srv = await startServer({ databaseUrl: state.url, env: { SVC_DEMO_DATABASE_URL: demo.url }, limits: { queryTimeoutMs: 1000 } });
  });
  t.teardown(async () => {
    await srv.close();
    await state.drop();
    await demo.drop();
  });

  t.test('stores run on PostgreSQL', async (t) => {
    t.equal(srv.svc.store.kind, 'postgres');
    t.equal((await srv.svc.demoReady).kind, 'postgres');
  });

  t.test('period scopes return exactly the in-scope rows', async (t) => {
    const a = await signupAgent(srv.url);
    const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters', 'period:2024-Q1']);
    const r = await api<{ rows: { n: number }[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) AS n FROM encounters WHERE true OR 1/0 = 1' } });
    t.equal(r.status, 200, r.status === 200 ? '200' : r.text);
    const c = new pg.Client({ connectionString: demo.url });
    await c.connect();
    const truth = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM demo_healthcare.encounters WHERE period_start >= '2024-01-01Z' AND period_start < '2024-04-01Z'`);
    // the query ran as the reader role, which cannot write even if a statement got through
    const priv = await c.query<{ w: boolean }>(`SELECT has_table_privilege('svc_demo_reader', 'demo_healthcare.encounters', 'INSERT') AS w`);
    await c.end();
    t.equal(r.body.rows[0]?.n, truth.rows[0]?.n);
    t.equal(priv.rows[0]?.w, false);
  });

  t.test('120 queries, 20 at a time, on a fresh account: exactly 100 succeed and the chain has 120 events', async (t) => {
    const a = await signupAgent(srv.url);
    const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
    const statuses: number[] = [];
    const others: string[] = [];
    for (let round = 0; round < 6; round++) {
      const batch = await Promise.all(
        Array.from({ length: 20 }, () => api<{ error?: { code: string; details?: Record<string, unknown> } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) FROM patients' } })),
      );
      statuses.push(...batch.map((r) => r.status));
      for (const r of batch) if (r.status !== 200 && r.status !== 402) others.push(`${r.status} ${r.body.error?.code ?? ''} ${JSON.stringify(r.body.error?.details ?? {})}`);
    }
    t.equal(statuses.filter((s) => s === 200).length, 100, 'exactly the trial\'s 100 queries answered');
    // on a loaded machine a statement may find no place on the demo database before its 1 s
    // deadline: 503, not charged (so it does not count against the trial)
    t.ok(others.every((o) => o.startsWith('503 service_unavailable')), `the others are 402, or 503 for no place in time: ${others.join(' | ')}`);
    t.equal(statuses.filter((s) => s === 402).length + others.length, 20);
    const v = await api<{ verified: boolean; events_checked: number }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key });
    t.match(v.body, { verified: true, events_checked: 120 });
  });

  t.test('two replicas on one demo database: an organization holds no more of it through both than through one', async (t) => {
    const other = await startServer({ databaseUrl: state.url, env: { SVC_DEMO_DATABASE_URL: demo.url }, limits: { queryTimeoutMs: 1000 } });
    t.teardown(() => other.close());
    const engine = await srv.svc.demoReady;
    const share = (engine as { gate?: { perTenant: number } }).gate?.perTenant ?? 0;
    t.ok(share >= 1, `the per-organization share of one replica's engine: ${share}`);
    const a = await signupAgent(srv.url);
    await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 10_000 } });
    const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
    const watcher = new pg.Client({ connectionString: demo.url });
    await watcher.connect();
    t.teardown(() => watcher.end());
    // the organization's places held: its granted advisory locks in the tenant space
    const watch = watchPlaces(watcher, TENANT_SPACE);
    const flood = await Promise.all(
      Array.from({ length: share * 4 }, (_, i) =>
        api<{ error?: { code: string } }>((i % 2 ? other : srv).url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: `SELECT count(*) FROM encounters a, encounters b, encounters c WHERE ${i} = ${i}` } }),
      ),
    );
    const most = await watch.stop();
    t.ok(most >= 1 && most <= share, `at most ${share} of its statements held a place on the shared database at once through two replicas: ${most} (a share per replica would allow ${share * 2})`);
    t.ok(flood.every((r) => r.status === 504 || r.status === 503), `each was cancelled at its deadline or found no place: ${[...new Set(flood.map((r) => `${r.status} ${r.body.error?.code ?? ''}`))].join(', ')}`);
    t.ok(flood.some((r) => r.status === 503), 'some waited for a place until their deadline (503, nothing charged)');
  });

  t.test('free statements across replicas: one address flooding through one replica leaves places for other addresses on another', async (t) => {
    const other = await startServer({ databaseUrl: state.url, env: { SVC_DEMO_DATABASE_URL: demo.url }, limits: { queryTimeoutMs: 1000 } });
    t.teardown(() => other.close());
    const [a, b] = [await srv.svc.demoReady, await other.svc.demoReady];
    const q = (address: string, sql: string) => ({ sql, direct: false, settings: [], timeoutMs: 4000, maxRows: 10, maxBytes: 100_000, tenant: `org-${address}`, trial: true, address });
    // the flooder keeps more slow free statements in flight through replica a than the free class has places
    const flood = Array.from({ length: 6 }, () => a.run(q('198.51.100.7', 'SELECT pg_sleep(2.5) AS slept')).catch((err: unknown) => err));
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    const victim = await b.run(q('203.0.113.9', 'SELECT 1 AS one'));
    t.same(victim.rows, [{ one: 1 }], 'a free statement from another address, through the other replica, runs');
    t.ok(Date.now() - started < 1000, `without waiting for the flood (2.5 s) to end: ${Date.now() - started} ms`);
    await Promise.all(flood);
  });

  t.test('a statement past its deadline is cancelled by the server (504)', async (t) => {
    const a = await signupAgent(srv.url);
    const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
    const r = await api<{ error: { code: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) FROM encounters a, encounters b, encounters c' } });
    t.equal(r.status, 504);
    t.equal(r.body.error.code, 'query_timeout');
    const after = await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT 1 AS one' } });
    t.equal(after.status, 200);
  });

  t.test('registrations racing with one enrollment token: exactly one wins under real row locks', async (t) => {
    const a = await signupAgent(srv.url);
    const tok = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: {} })).body.token;
    const { csrPem } = generateKeyAndCsr();
    const results = await Promise.all(Array.from({ length: 6 }, () => api(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok, csr_pem: csrPem } })));
    t.same(results.map((r) => r.status).sort(), [201, 409, 409, 409, 409, 409]);
  });

  t.test('tampering with stored events is found', async (t) => {
    const a = await signupAgent(srv.url);
    const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
    for (let i = 0; i < 4; i++) await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: `SELECT ${i} AS i` } });
    await srv.svc.store.query('DELETE FROM audit_events WHERE connection_id = $1 AND seq = 4', [conn]);
    const v = await api<{ verified: boolean; broken_at: number }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key });
    t.match(v.body, { verified: false, broken_at: 4 });
  });
}
