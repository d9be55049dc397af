/**
 * The app's connection cache (connections/index.ts `ConnectionCache`) does not let another
 * organization use a cached connection, and a revocation made behind the process (in the store
 * only) refuses rows and charges nothing.
 */
import t from 'tap';
import { api, openConnection, signupAgent, startServer } from '../helpers/server.js';

t.test('the connection cache', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url, 'A');
  const b = await signupAgent(srv.url, 'B');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const sql = 'SELECT patient_id FROM patients ORDER BY patient_id LIMIT 2';
  t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).status, 200, 'cached for A');
  const other = await api<{ rows?: unknown[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: b.key, body: { sql } });
  t.equal(other.status, 404, 'B cannot use A\'s cached connection');
  t.notOk(other.body.rows);
  const usageB = (await api<{ queries: number; trial: { queries_left: number } }>(srv.url, 'GET', '/v1/agent/account/usage', { key: b.key })).body;
  t.equal(usageB.trial.queries_left, 100, 'nothing reserved for B');
  // revoked in the store only, with A's statement cached: nothing answered, nothing charged, chain intact
  await srv.svc.store.query('UPDATE connections SET revoked_at = now() WHERE id = $1', [conn]);
  const rs = await Promise.all(Array.from({ length: 20 }, () => api<{ rows?: unknown[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })));
  t.ok(rs.every((r) => r.status === 410 && !r.body.rows), `statuses ${[...new Set(rs.map((r) => r.status))].join(',')}`);
  const usageA = (await api<{ queries: number; wallet_held_cents: number; trial: { queries_left: number; egress_bytes_held: number } }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  t.equal(usageA.queries, 1);
  t.equal(usageA.trial.queries_left, 99);
  t.equal(usageA.trial.egress_bytes_held, 0);
  const v = (await api<{ verified: boolean; events_checked: number }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key })).body;
  t.match(v, { verified: true, events_checked: 21 });
  // a revoked agent key: refused at authentication
  await srv.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [b.orgId]);
  const conn2 = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  t.equal((await api(srv.url, 'POST', `/v1/connections/${conn2}/query`, { key: b.key, body: { sql } })).status, 401);
});
