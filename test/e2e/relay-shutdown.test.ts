/**
 * A `postgres-relay` statement still running when the control plane shuts down is treated as a
 * live `postgres` one (test/live/postgres-shutdown.test.ts): after the drain (SVC_SHUTDOWN_DRAIN_MS)
 * it is cancelled at the relay's database and its agent gets `503 service_unavailable` with
 * Retry-After, audited and not charged. It ran on instead until the relay's own statement ceiling
 * (answered 504 query_timeout and charged), holding the close that long: under `npm start` the
 * forced exit at drain + 10 s would have cut it with no answer at all. Needs a real PostgreSQL (the
 * PGlite fallback cannot interrupt a running statement).
 */
import t from 'tap';
import { ordersOnRealPostgres } from '../helpers/customer-db.js';
import { startRelay } from '../helpers/relay.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import { eventually, expectShutdownStop } from '../helpers/tap.js';

interface Body {
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

t.test('a relay statement still running after the shutdown drain: 503 with Retry-After, not charged, cancelled at the database', async (t) => {
  const customer = await ordersOnRealPostgres(t, 'svc_relay_shutdown', 2000);
  if (!customer) return;
  const { db, client: c } = customer;

  // a deadline far past the drain: only the shutdown can stop the statement within this test
  let srv: TestServer | undefined = await startServer({ env: { SVC_SHUTDOWN_DRAIN_MS: '300' }, limits: { queryTimeoutMs: 120_000 } });
  t.teardown(() => srv?.close());
  const a = await signupAgent(srv.url);
  const relay = await startRelay(srv, a.key, db.url, { applicationName: 'svc-relay-shutdown' });
  t.teardown(() => relay.close());
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relay.relayId}`, 'read:orders']);

  const activity = async (): Promise<number> => (await c.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'svc-relay-shutdown' AND state = 'active'")).rows[0]?.n ?? 0;
  const answer = api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) AS n FROM orders a, orders b, orders c, orders d' } });
  t.ok(await eventually(async () => (await activity()) === 1, 20_000), 'the statement runs at the relay\'s database');

  const closing = srv.close();
  const r = await answer;
  expectShutdownStop(t, r);
  await closing;
  srv = undefined;
  t.ok(await eventually(async () => (await activity()) === 0, 20_000), 'the statement was cancelled at the relay\'s database');
});
