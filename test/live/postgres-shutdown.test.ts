/**
 * A `postgres` live statement still running when the control plane shuts down: after the drain
 * (SVC_SHUTDOWN_DRAIN_MS) it is cancelled at the database, and its agent, still waiting, gets
 * `503 service_unavailable` with Retry-After; it is audited and not charged (not a timeout,
 * which is charged the query price). Needs a real PostgreSQL (the PGlite fallback cannot
 * interrupt a running statement); a second control plane on the same data dir reads what the
 * store kept after the first has closed.
 */
import fs from 'node:fs/promises';
import t from 'tap';
import pg from 'pg';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, realPostgresAvailable, signupAgent, startServer, tempDir, type TestServer } from '../helpers/server.js';
import { expectShutdownStop } from '../helpers/tap.js';

interface Body {
  error?: { code: string; message: string; details?: Record<string, unknown> };
}
interface Usage {
  queries: number;
  trial: { queries_left: number; egress_bytes_left: number; egress_bytes_held: number };
}
interface AuditEvents {
  events: { id: string; type: string; outcome: string; error_code?: string | null; cost_cents?: number }[];
}

if (!(await realPostgresAvailable())) {
  t.skip('no PostgreSQL answers at TEST_DATABASE_URL: a statement cancelled at the database by the shutdown needs a real one', () => undefined);
} else {
  t.test('a live statement still running after the shutdown drain: 503 with Retry-After, not charged, gone from the database', async (t) => {
    const db: CustomerDatabase = await customerDatabase('svc_live_shutdown');
    t.teardown(() => db.drop());
    // the embedded store, in a data dir both control planes open (a store on the customer's
    // server would make it a reserved address no credential may point at)
    const dataDir = await tempDir();
    t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    t.teardown(() => c.end());
    await c.query(`CREATE TABLE orders (id int PRIMARY KEY, total numeric(10,2) NOT NULL)`);
    await c.query(`INSERT INTO orders SELECT g, g * 1.5 FROM generate_series(1, 300) g`);

    // a deadline far past the drain: only the shutdown can stop the statement within this test
    let srv: TestServer | undefined = await startServer({ dataDir, env: { SVC_LIVE_ALLOW_PRIVATE: '1', SVC_SHUTDOWN_DRAIN_MS: '300' }, limits: { queryTimeoutMs: 120_000 } });
    t.teardown(() => srv?.close());
    const a = await signupAgent(srv.url);
    const cred = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: `${db.url}${db.url.includes('?') ? '&' : '?'}sslmode=disable` } });
    t.equal(cred.status, 201, cred.text);
    const conn = await openConnection(srv.url, a.key, 'postgres', ['read:orders']);
    const before = (await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;

    const ours = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'svc-live' AND state = 'active' AND datname = current_database()`;
    const running = async (): Promise<number> => (await c.query<{ n: number }>(ours)).rows[0]?.n ?? 0;
    const answer = api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) FROM orders a, orders b, orders c, orders d, orders e' } });
    let active = 0;
    for (let i = 0; i < 100 && active === 0; i++) {
      active = await running();
      if (active === 0) await new Promise((res) => setTimeout(res, 50));
    }
    t.equal(active, 1, 'the statement runs at the database');

    const closing = srv.close();
    const r = await answer;
    const auditId = expectShutdownStop(t, r);
    t.equal(r.headers.get('connection'), 'close', 'its keep-alive socket ends with the answer, so the close does not wait for it to idle out');
    await closing;
    srv = undefined;

    for (let i = 0; i < 50 && active > 0; i++) {
      active = await running();
      if (active > 0) await new Promise((res) => setTimeout(res, 100));
    }
    t.equal(active, 0, 'the statement was cancelled at the database');

    // what the store kept, read through another control plane on the same store
    const next = await startServer({ dataDir });
    t.teardown(() => next.close());
    const after = (await api<Usage>(next.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
    t.equal(after.trial.queries_left, before.trial.queries_left, 'no trial query used');
    t.equal(after.trial.egress_bytes_held, 0, 'its hold was given back');
    const events = (await api<AuditEvents>(next.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key })).body.events;
    const event = events.find((e) => e.id === auditId);
    t.match(event, { type: 'query', outcome: 'error', error_code: 'service_unavailable' }, 'audited as stopped by the shutdown');
    t.notOk(event && typeof event.cost_cents === 'number' && event.cost_cents > 0, `the event holds no charge: ${JSON.stringify(event)}`);
  });

  t.test('a drain longer than the web framework\'s 10 s hook limit: the close still completes', async (t) => {
    const db: CustomerDatabase = await customerDatabase('svc_live_shutdown_long');
    t.teardown(() => db.drop());
    const dataDir = await tempDir();
    t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    t.teardown(() => c.end());
    // the default drain is the statement deadline (10 s) + 5 s: past Fastify's 10 s limit for a
    // close hook, which failed the close with AVV_ERR_READY_TIMEOUT while a statement still ran
    const srv = await startServer({ dataDir, env: { SVC_LIVE_ALLOW_PRIVATE: '1', SVC_SHUTDOWN_DRAIN_MS: '10500' }, limits: { queryTimeoutMs: 60_000 } });
    const a = await signupAgent(srv.url);
    const cred = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: `${db.url}${db.url.includes('?') ? '&' : '?'}sslmode=disable` } });
    t.equal(cred.status, 201, cred.text);
    await c.query('CREATE TABLE t (id int PRIMARY KEY)');
    await c.query('INSERT INTO t SELECT generate_series(1, 300)');
    const conn = await openConnection(srv.url, a.key, 'postgres', ['read:t']);
    const answer = api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) FROM t a, t b, t c, t d, t e' } });
    const ours = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'svc-live' AND state = 'active' AND datname = current_database()`;
    for (let i = 0; i < 100 && ((await c.query<{ n: number }>(ours)).rows[0]?.n ?? 0) === 0; i++) await new Promise((res) => setTimeout(res, 50));
    const closed = srv.close().then(
      () => 'closed',
      (err: unknown) => `failed: ${(err as Error).message}`,
    );
    const r = await answer;
    t.equal(r.status, 503, r.text);
    t.equal(await closed, 'closed', 'the close completes after the drain');
  });
}
