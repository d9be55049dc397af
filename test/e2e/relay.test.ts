/**
 * End to end: a real control plane, the real svc-relay agent (enroll, executor, agent) dialing
 * our mutual-TLS tunnel with the certificate it enrolled for, and the customer database: a real
 * PostgreSQL when one answers at TEST_DATABASE_URL, else PGlite over the PostgreSQL wire protocol
 * (test/helpers/customer-db.ts; one backend there, so the 50 concurrent queries run one after
 * another at the database, but still concurrently through the tunnel and the relay's pool).
 * An agent's queries on a postgres-relay connection come back scoped.
 */
import fs from 'node:fs/promises';
import t from 'tap';
import pg from 'pg';
import { createExecutor, enroll, loadConfig, RelayAgent, wsDialer } from '../../relay-agent/index.js';
import { customerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, signupAgent, startServer, tempDir } from '../helpers/server.js';

t.test('enroll, connect, and query a customer database through the relay', async (t) => {
  const customer = await customerDatabase('svc_customer');
  t.comment(`customer database: ${customer.kind}`);
  const c = new pg.Client({ connectionString: customer.url });
  await c.connect();
  await c.query(`CREATE TABLE public.orders (id int PRIMARY KEY, tenant_id int NOT NULL, amount numeric(10,2) NOT NULL);
    INSERT INTO public.orders SELECT g, g % 5, g * 1.5 FROM generate_series(1, 5000) g;
    CREATE TABLE public.secrets (id int, v text); INSERT INTO public.secrets VALUES (1, 'hunter2');`);
  await c.end();

  const srv = await startServer();
  await srv.svc.startTunnel();
  const configDir = await tempDir('svc-relay-');
  const a = await signupAgent(srv.url);
  const token = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: {} })).body.token;
  const enrolled = await enroll({ controlPlane: srv.url, token, configDir, name: 'orders-db' });
  const cfg = await loadConfig(configDir);
  const executor = createExecutor({ databaseUrl: customer.url });
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
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relayId}`, 'read:public.orders', 'filter:public.orders.tenant_id=2']);
  const q = (sql: string) => api<{ rows: Record<string, unknown>[]; row_count: number; billed_to: string; error?: { code: string; message?: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });

  const all = await q('SELECT count(*) AS n, min(tenant_id) AS lo, max(tenant_id) AS hi FROM orders WHERE true OR tenant_id <> 2');
  t.equal(all.status, 200, all.status === 200 ? '200' : JSON.stringify(all.body));
  t.same(all.body.rows, [{ n: 1000, lo: 2, hi: 2 }], 'only tenant 2, whatever the statement says');
  t.equal((await q('SELECT * FROM public.secrets')).status, 403, 'a table outside the scopes never reaches the relay');
  const many = await Promise.all(Array.from({ length: 50 }, (_, i) => q(`SELECT id FROM orders WHERE id = ${i * 5 + 2}`)));
  t.ok(many.every((r, i) => r.status === 200 && r.body.rows[0]?.['id'] === i * 5 + 2), '50 concurrent queries over one tunnel, all correct');
  // a statement that fails AT the database: the error comes back, and the relay serves on (on
  // PGlite this used to deadlock the relay's clean-up, which waited for a cancel connection)
  const failed = await q('SELECT id / (id - id) AS boom FROM orders WHERE id = 2');
  t.not(failed.status, 200, `the database error comes back (${failed.status} ${failed.body.error?.code})`);
  t.match(failed.body.error?.message ?? '', /division by zero/);
  t.equal(failed.status, 400, "a database error is the caller's error (invalid_sql), not 503 relay_unavailable");
  t.equal(failed.body.error?.code, 'invalid_sql');
  const after = await q('SELECT id FROM orders WHERE id = 7');
  t.same(after.body.rows, [{ id: 7 }], 'the relay answers after the failure');
  const v = await api<{ verified: boolean; events_checked: number }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key });
  t.match(v.body, { verified: true });
  t.equal(v.body.events_checked, 54, 'every query audited, the failed one too');

  // deleting the relay cuts the tunnel and the agent stops for good
  t.equal((await api(srv.url, 'DELETE', `/v1/relays/${relayId}`, { key: a.key })).status, 200);
  const exit = await exited;
  t.equal(exit.reason, 'permanent');
});
