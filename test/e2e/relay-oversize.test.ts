/**
 * Issue #12 point 1 through a relay: a 600 MB value must take down neither the relay (its pg
 * driver would build the value inside the socket's data handler) nor the control plane. The
 * relay's wire guard refuses the DataRow before it is decoded, cancels the statement at the
 * database, and answers the rows that fit (truncated) or RELAY_ERR_ROW_TOO_LARGE, which the
 * control plane answers as 400 invalid_sql reason row_too_large; both are audited and the relay
 * keeps serving. Needs a real PostgreSQL (PGlite cannot build a 600 MB value).
 */
import fs from 'node:fs/promises';
import t from 'tap';
import pg from 'pg';
import { createExecutor, enroll, loadConfig, RelayAgent, wsDialer } from '../../relay-agent/index.js';
import { customerDatabase, quietServerLog } from '../helpers/customer-db.js';
import { api, openConnection, realPostgresAvailable, signupAgent, startServer, tempDir } from '../helpers/server.js';

interface QueryBody {
  rows: Record<string, unknown>[];
  truncated: boolean;
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

t.test('a 600 MB value through the relay: refused before decoding, audited, and both processes go on', async (t) => {
  if (!(await realPostgresAvailable())) return t.skip('no PostgreSQL server at TEST_DATABASE_URL (PGlite cannot build a 600 MB value)', () => undefined);
  const customer = await customerDatabase('svc_relay_oversize');
  if (customer.kind !== 'postgres') {
    await customer.drop();
    return t.skip('the customer database is not a real PostgreSQL', () => undefined);
  }
  const c = new pg.Client({ connectionString: customer.url });
  await c.connect();
  await c.query('CREATE TABLE public.orders (id int PRIMARY KEY); INSERT INTO public.orders SELECT generate_series(1, 10)');
  await c.end();
  if (!(await quietServerLog(customer.url))) t.comment('the server logs this database\'s errors: the 600 MB error message goes to its log');

  const srv = await startServer({ limits: { maxResultBytes: 1_000_000, queryTimeoutMs: 60_000 } });
  await srv.svc.startTunnel();
  const configDir = await tempDir('svc-relay-');
  const a = await signupAgent(srv.url);
  const token = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: {} })).body.token;
  const enrolled = await enroll({ controlPlane: srv.url, token, configDir, name: 'big-db' });
  const cfg = await loadConfig(configDir);
  const executor = createExecutor({ databaseUrl: customer.url, applicationName: 'svc-relay-oversize' });
  const agent = new RelayAgent({ dial: wsDialer(cfg), handler: (q) => executor.handle(q), certificateNotAfter: new Date(enrolled.expires_at ?? Date.now() + 86_400_000) });
  const exited = agent.run();
  t.teardown(async () => {
    await agent.drain().catch(() => undefined);
    await exited.catch(() => undefined);
    await executor.close();
    await srv.close();
    await customer.drop();
    await fs.rm(configDir, { recursive: true, force: true });
  });
  const relayId = cfg.relay_id;
  for (;;) {
    const r = await api<{ relays: { relay_id: string; status: string }[] }>(srv.url, 'GET', '/v1/relays', { key: a.key });
    if (r.body.relays.find((x) => x.relay_id === relayId)?.status === 'online') break;
    await new Promise((res) => setTimeout(res, 50));
  }
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relayId}`, 'read:public.orders']);
  const q = (sql: string) => api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
  const rssBefore = process.memoryUsage().rss;

  let t0 = Date.now();
  const big = await q("SELECT id, repeat('x', 600000000) AS v FROM orders WHERE id = 1");
  t.equal(big.status, 400, big.text);
  t.equal(big.body.error?.code, 'invalid_sql');
  t.equal(big.body.error?.details?.['reason'], 'row_too_large');

  t.comment(`big: ${Date.now() - t0} ms`);
  t0 = Date.now();
  const mixed = await q("SELECT id, CASE WHEN id < 4 THEN 'small' ELSE repeat('x', 600000000) END AS v FROM orders WHERE id <= 5");
  t.equal(mixed.status, 200, mixed.text);
  t.comment(`mixed: ${Date.now() - t0} ms`);
  t.equal(mixed.body.truncated, true);
  t.same(
    mixed.body.rows.map((r) => r['id']),
    [1, 2, 3],
    'the rows before the huge one',
  );
  const quoted = await q("SELECT id, repeat('x', 600000000)::int AS v FROM orders WHERE id = 1");
  t.equal(quoted.status, 400, quoted.text);
  t.equal(quoted.body.error?.code, 'invalid_sql');
  t.match(quoted.body.error?.message, /message of \d+ bytes/);
  t.ok(process.memoryUsage().rss - rssBefore < 400_000_000, 'the 600 MB value was never held (relay and control plane share this process)');

  const after = await q('SELECT id FROM orders WHERE id = 7');
  t.equal(after.status, 200, after.text);
  t.same(after.body.rows, [{ id: 7 }], 'the relay answers after the refusals');

  const events = (await api<{ events: { type: string; outcome: string }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key })).body.events;
  const outcomes = events.filter((e) => e.type === 'query').map((e) => e.outcome);
  t.same(outcomes.slice(0, 4), ['refused', 'ok', 'refused', 'ok'], `every query audited: ${JSON.stringify(outcomes)}`);

  // the statements were stopped at the database
  const w = new pg.Client({ connectionString: customer.url });
  await w.connect();
  let left = 1;
  for (let i = 0; i < 50 && left > 0; i++) {
    left = (await w.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'svc-relay-oversize' AND state = 'active'")).rows[0]?.n ?? 0;
    if (left > 0) await new Promise((r) => setTimeout(r, 100));
  }
  t.comment(JSON.stringify((await w.query("SELECT pid, state, left(query, 80) AS q, application_name FROM pg_stat_activity WHERE application_name LIKE 'svc-relay%'")).rows));
  await w.end();
  t.equal(left, 0, 'no statement left running at the database');
  t.ok(executor.cancels >= 2, `cancelled at the database (${executor.cancels})`);
});
