/**
 * System schemas through a real relay (issue #12, point 2): the real svc-relay agent and a customer
 * database (a real PostgreSQL when one answers, else PGlite over the wire). A scope naming a
 * catalog is refused when the connection is opened; catalog queries are refused before anything
 * reaches the relay, in any spelling, even for a connection whose stored scopes name a catalog;
 * an unqualified scope named like a catalog reads `public.<name>`, never the catalog.
 */
import fs from 'node:fs/promises';
import t from 'tap';
import pg from 'pg';
import { createExecutor, enroll, loadConfig, RelayAgent, wsDialer } from '../../relay-agent/index.js';
import { customerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, signupAgent, startServer, tempDir } from '../helpers/server.js';

t.test('catalogs are never readable through a relay', async (t) => {
  const customer = await customerDatabase('svc_relay_sys');
  t.comment(`customer database: ${customer.kind}`);
  const c = new pg.Client({ connectionString: customer.url });
  await c.connect();
  await c.query(`CREATE TABLE public.orders (id int PRIMARY KEY, tenant_id int NOT NULL);
    INSERT INTO public.orders SELECT g, g % 5 FROM generate_series(1, 50) g;`);
  await c.end();

  const srv = await startServer();
  await srv.svc.startTunnel();
  const configDir = await tempDir('svc-relay-');
  const a = await signupAgent(srv.url);
  const token = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: {} })).body.token;
  const enrolled = await enroll({ controlPlane: srv.url, token, configDir, name: 'sys-db' });
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

  type Body = { rows: Record<string, unknown>[]; error?: { code: string; message: string; details?: Record<string, unknown> } };
  for (const s of ['read:pg_catalog.pg_authid', 'read:PG_CATALOG.PG_SHADOW', 'read:information_schema.tables', 'read:pg_toast.pg_toast_1262', 'read:pg_temp_1.x', 'filter:pg_catalog.pg_authid.rolname=postgres']) {
    const r = await api<Body>(srv.url, 'POST', '/v1/connections', { key: a.key, body: { target_id: 'postgres-relay', scopes: [`relay:${relayId}`, 'read:orders', s] } });
    t.equal(r.status, 400, `${s}: ${r.text}`);
    t.equal(r.body.error?.code, 'invalid_scope', s);
  }

  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relayId}`, 'read:orders', 'read:pg_authid']);
  const q = (sql: string) => api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
  t.same((await q('SELECT count(*)::int AS n FROM public.orders')).body.rows, [{ n: 50 }], 'the relay answers');
  const catalogs = [
    'SELECT rolname, rolpassword FROM pg_catalog.pg_authid',
    'SELECT * FROM "PG_CATALOG".Pg_Authid',
    'SELECT usename, passwd FROM pg_catalog.pg_shadow',
    'SELECT query FROM pg_catalog.pg_stat_activity',
    'SELECT name, setting FROM PG_CATALOG.pg_settings',
    'SELECT * FROM information_schema.tables',
    'SELECT * FROM pg_toast.pg_toast_1262',
  ];
  for (const sql of catalogs) {
    const r = await q(sql);
    t.equal(r.status, 403, `${sql}: ${r.text.slice(0, 200)}`);
    t.equal(r.body.error?.details?.['reason'], 'system_catalog', sql);
  }
  // read:pg_authid is public.pg_authid: the database says it does not exist, no catalog row comes back
  const decoy = await q('SELECT rolname, rolpassword FROM pg_authid');
  t.equal(decoy.status, 400, decoy.text);
  t.match(decoy.body.error?.message ?? '', /does not exist/);
  t.notMatch(decoy.text, /SCRAM-SHA-256|md5[0-9a-f]{32}/);

  // a connection whose stored scopes name a catalog (as before creation refused them)
  await srv.svc.services.store.query('UPDATE connections SET scopes = $1 WHERE id = $2', [JSON.stringify([`relay:${relayId}`, 'read:pg_catalog.pg_authid', 'read:orders']), conn]);
  const forged = await q('SELECT rolname, rolpassword FROM pg_catalog.pg_authid');
  t.not(forged.status, 200, `refused: ${forged.text.slice(0, 200)}`);
  t.notMatch(forged.text, /SCRAM-SHA-256|rolpassword"\s*:\s*"/);
});
