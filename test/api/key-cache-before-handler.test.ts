/**
 * A key revoked in the store while the query route still holds it in the app's key cache is
 * answered 401 on that route whatever it sends, as a key read from the store is: also when the
 * request is answered before the statement reaches the query engine (the key's rate limit, its
 * refused-statement budget, a body that fails validation or parsing, a body over the size limit,
 * the wrong media type). Nothing is audited or counted for such a request.
 */
import t from 'tap';
import { api, openConnection, signupAgent, startServer, type Agent, type TestServer } from '../helpers/server.js';

const SQL = 'SELECT patient_id FROM patients LIMIT 1';

/** the key read from the store by another route (so cached), then revoked in the store only */
async function cachedThenRevoked(srv: TestServer, a: Agent): Promise<void> {
  await srv.svc.store.query('UPDATE agent_keys SET revoked_at = NULL WHERE org_id = $1', [a.orgId]);
  const r = await api(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  if (r.status !== 200) throw new Error(`usage ${r.status}`);
  await srv.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [a.orgId]);
}

async function auditCount(srv: TestServer, conn: string): Promise<number> {
  const rows = await srv.svc.store.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_events WHERE connection_id = $1', [conn]);
  return rows[0]?.n ?? 0;
}

t.test('requests answered before the query engine, with a revoked cached key', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const keys = srv.svc.services.keys;
  const a = await signupAgent(srv.url, 'A');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const audited = await auditCount(srv, conn);
  const cases: readonly [string, { body?: unknown; raw?: string; headers?: Record<string, string> }, number][] = [
    ['no sql field', { body: {} }, 400],
    ['an empty statement', { body: { sql: '' } }, 400],
    ['an unknown field', { body: { sql: SQL, limit: 1 } }, 400],
    ['a NUL byte', { body: { sql: 'SELECT 1\u0000' } }, 400],
    ['malformed JSON', { raw: '{"sql":', headers: { 'content-type': 'application/json' } }, 400],
    ['not JSON', { raw: SQL, headers: { 'content-type': 'text/plain' } }, 415],
    ['a body over the size limit', { body: { sql: `SELECT 1 -- ${'x'.repeat(4_000_000)}` } }, 413],
  ];
  for (const [what, o, status] of cases) {
    // the same request with the key valid is refused as such (the case is what it says)
    await srv.svc.store.query('UPDATE agent_keys SET revoked_at = NULL WHERE org_id = $1', [a.orgId]);
    t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, ...o })).status, status, `${what}: ${status} with the key valid`);
    await cachedThenRevoked(srv, a);
    const hits = keys.stats().hits;
    const r = await api<{ error?: { code: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, ...o });
    t.equal(keys.stats().hits, hits + 1, `${what}: the key came from the cache`);
    t.equal(r.status, 401, `${what}: 401`);
    t.equal(r.body.error?.code, 'unauthorized');
    t.match(r.headers.get('www-authenticate'), /invalid_token/);
  }
  t.equal(await auditCount(srv, conn), audited, 'nothing audited');
  const [org] = await srv.svc.store.query<{ queries_total: number; trial_queries_used: number }>('SELECT queries_total, trial_queries_used FROM orgs WHERE id = $1', [a.orgId]);
  t.match(org, { queries_total: 0, trial_queries_used: 0 }, 'nothing counted or charged');
});

t.test("a revoked cached key over its refused-statement budget is answered 401, not the budget's 429", async (t) => {
  // a burst of one refused statement, refilled after 30 s
  const srv = await startServer({ env: { SVC_REFUSED_STATEMENTS_PER_MINUTE: '2' } });
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url, 'B');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELEC 1' } })).status, 400, 'refused: the budget used');
  const over = await api<{ error?: { details?: { reason?: string } } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: SQL } });
  t.equal(over.status, 429, 'over the budget with the key valid');
  t.equal(over.body.error?.details?.reason, 'refused_statements');
  await cachedThenRevoked(srv, a);
  const r = await api<{ error?: { code: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: SQL } });
  t.equal(r.status, 401);
  t.equal(r.body.error?.code, 'unauthorized');
  const again = await api<{ error?: { message: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: SQL } });
  t.equal(again.status, 401);
  t.match(again.body.error?.message, /unknown or revoked agent key/, 'forgotten by the cache: refused at authentication');
});

t.test("a revoked cached key over its rate limit is answered 401, not the rate limit's 429", async (t) => {
  // one request a second, a burst of two: the connection and the usage read take both
  const srv = await startServer({ env: { SVC_RATE_LIMIT: '1' } });
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url, 'C');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  t.equal((await api(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).status, 200, 'the key cached');
  await srv.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [a.orgId]);
  // sent at once: the burst is spent, so most are over the limit whatever the machine's speed
  const rs = await Promise.all(Array.from({ length: 12 }, () => api<{ error?: { code: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: SQL } })));
  t.same([...new Set(rs.map((r) => r.status))], [401], 'every one 401');
});
