/**
 * The app's agent-key cache (accounts `KeyCache`): only the query route answers from it, and a key
 * revoked behind the process (in the store only, as the dashboard or another replica would)
 * runs nothing, is charged nothing and is answered 401 on that route too, whatever its statement.
 */
import t from 'tap';
import { api, freshDatabase, openConnection, realPostgresAvailable, signupAgent, startServer } from '../helpers/server.js';

interface Usage {
  readonly queries: number;
  readonly trial: { readonly queries_left: number; readonly egress_bytes_held: number };
}

t.test('the key cache', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const keys = srv.svc.services.keys;
  const sql = 'SELECT patient_id FROM patients ORDER BY patient_id LIMIT 2';

  t.test('the query route reads a key from memory, every other route from the store', async (t) => {
    const a = await signupAgent(srv.url, 'A');
    const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
    const before = keys.stats();
    t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).status, 200);
    const after = keys.stats();
    t.equal(after.hits, before.hits + 1, 'the query used the key the connection route read');
    t.equal(after.misses, before.misses, 'no store read for the query');
    t.equal((await api(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).status, 200);
    t.equal(keys.stats().misses, after.misses + 1, 'usage read the key from the store');
    t.equal(keys.stats().hits, after.hits, 'usage did not use the cache');
  });

  t.test('a key revoked in the store: the cached query route refuses, charges nothing, then forgets it', async (t) => {
    const a = await signupAgent(srv.url, 'B');
    const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
    t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).status, 200, 'cached');
    await srv.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [a.orgId]);
    const hits = keys.stats().hits;
    const r = await api<{ rows?: unknown[]; error?: { code: string; message: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
    t.equal(keys.stats().hits, hits + 1, 'answered from the cache');
    t.equal(r.status, 401);
    t.equal(r.body.error?.code, 'unauthorized');
    t.notOk(r.body.rows, 'no rows');
    const again = await api<{ error?: { message: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
    t.equal(again.status, 401);
    t.match(again.body.error?.message, /unknown or revoked agent key/, 'forgotten: refused at authentication');
    t.equal(keys.stats().hits, hits + 1, 'not answered from the cache again');
    const usage = (await srv.svc.store.query<{ queries_total: number; trial_queries_used: number; trial_egress_held: number }>('SELECT queries_total, trial_queries_used, trial_egress_held FROM orgs WHERE id = $1', [a.orgId]))[0];
    t.match(usage, { queries_total: 1, trial_queries_used: 1 }, 'only the first query was counted and charged');
    t.equal(Number(usage?.trial_egress_held), 0, 'nothing held');
  });

  t.test('a revoked cached key with a statement refused before its reservation is answered 401, not the refusal', async (t) => {
    const a = await signupAgent(srv.url, 'C');
    const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
    t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).status, 200, 'cached');
    await srv.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [a.orgId]);
    for (const bad of ['DELETE FROM patients', 'SELECT * FROM not_a_table', 'SELEC 1']) {
      // each refusal forgets the key; cache it again as the dashboard's revocation is undone and redone
      await srv.svc.store.query('UPDATE agent_keys SET revoked_at = NULL WHERE org_id = $1', [a.orgId]);
      t.equal((await api(srv.url, 'GET', '/v1/connections', { key: a.key })).status, 200, 'the key read again from the store');
      await srv.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [a.orgId]);
      const hits = keys.stats().hits;
      const r = await api<{ error?: { code: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: bad } });
      t.equal(keys.stats().hits, hits + 1, `${bad}: answered from the cache`);
      t.equal(r.status, 401, `${bad}: 401`);
      t.equal(r.body.error?.code, 'unauthorized');
    }
    const u = (await srv.svc.store.query<{ trial_queries_used: number }>('SELECT trial_queries_used FROM orgs WHERE id = $1', [a.orgId]))[0];
    t.equal(u?.trial_queries_used, 1, 'nothing charged for the refusals');
  });

  t.test('a revocation seen by any other route drops the cached key', async (t) => {
    const a = await signupAgent(srv.url, 'D');
    const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
    t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).status, 200, 'cached');
    await srv.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [a.orgId]);
    t.equal((await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).status, 401, 'usage reads the store');
    const hits = keys.stats().hits;
    const r = await api<{ error?: { message: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
    t.equal(r.status, 401);
    t.equal(keys.stats().hits, hits, 'not from the cache');
    t.match(r.body.error?.message, /unknown or revoked agent key/);
  });
});

t.test('a revoked cached key naming a connection it cannot see is answered 401, not 404', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url, 'E');
  const b = await signupAgent(srv.url, 'F');
  const sql = 'SELECT patient_id FROM patients LIMIT 1';
  const mine = await openConnection(srv.url, b.key, 'demo-healthcare', ['read:patients']);
  t.equal((await api(srv.url, 'POST', `/v1/connections/${mine}/query`, { key: b.key, body: { sql } })).status, 200, 'B cached');
  const theirs = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  t.equal((await api(srv.url, 'POST', `/v1/connections/${theirs}/query`, { key: b.key, body: { sql } })).status, 404, 'not B\'s');
  await srv.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [b.orgId]);
  t.equal((await api(srv.url, 'POST', `/v1/connections/${theirs}/query`, { key: b.key, body: { sql } })).status, 401);
  t.equal((await api(srv.url, 'POST', '/v1/connections/con_nonexistent/query', { key: b.key, body: { sql } })).status, 401);
});

if (!(await realPostgresAvailable())) {
  t.skip('a key revoked while two replicas of one PostgreSQL store answer from their key caches: no PostgreSQL answers at TEST_DATABASE_URL', () => undefined);
} else {
  t.test('a key revoked while two replicas of one PostgreSQL store answer from their key caches', async (t) => {
    const db = await freshDatabase('svc_key_cache');
    const a = await startServer({ databaseUrl: db.url });
    const b = await startServer({ databaseUrl: db.url });
    t.teardown(async () => {
      await a.close();
      await b.close();
      await db.drop();
    });
    const agent = await signupAgent(a.url, 'G');
    t.equal((await api(a.url, 'POST', '/v1/agent/topup', { key: agent.key, body: { amount_cents: 1000 } })).status, 200);
    const conn = await openConnection(a.url, agent.key, 'demo-healthcare', ['read:patients']);
    const sql = (i: number): string => `SELECT patient_id FROM patients WHERE ${i} = ${i} LIMIT 1`;
    let warmCost = 0;
    for (const srv of [a, b]) {
      const r = await api<{ cost_cents: number }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: sql(0) } });
      t.equal(r.status, 200, 'the key cached on both replicas');
      warmCost += r.body.cost_cents;
    }
    // both replicas query without pause; the key is revoked in the store in the middle
    let revokedAt = 0;
    const outcomes: { readonly sentAt: number; readonly status: number; readonly cost?: number; readonly cause?: unknown }[] = [];
    const flood = async (url: string, first: number): Promise<void> => {
      for (let i = first; i < first + 40; i++) {
        const sentAt = Date.now();
        const r = await api<{ cost_cents?: number; error?: { details?: Record<string, unknown> } }>(url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: sql(i) } });
        outcomes.push({ sentAt, status: r.status, ...(typeof r.body.cost_cents === 'number' ? { cost: r.body.cost_cents } : {}), cause: r.body.error?.details?.['cause'] });
      }
    };
    const revoke = (async () => {
      while (outcomes.filter((o) => o.status === 200).length < 20) await new Promise((r) => setTimeout(r, 5));
      await a.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [agent.orgId]);
      revokedAt = Date.now();
    })();
    await Promise.all([flood(a.url, 1), flood(a.url, 1000), flood(b.url, 2000), flood(b.url, 3000), revoke]);
    t.ok(revokedAt > 0, 'revoked during the flood');
    const after = outcomes.filter((o) => o.sentAt > revokedAt);
    t.ok(after.length > 0, `${after.length} queries sent after the revocation`);
    t.same([...new Set(after.map((o) => o.status))], [401], 'every query sent after the revocation is refused 401, on both replicas');
    // a statement running when the revocation is seen is stopped: 410 connection_revoked, cause key_revoked
    const odd = outcomes.filter((o) => o.status !== 200 && o.status !== 401 && !(o.status === 410 && o.cause === 'key_revoked'));
    t.same(odd, [], 'only 200, 401, and 410 for statements stopped by the revocation');
    const answered = outcomes.filter((o) => o.status === 200);
    const [org] = await a.svc.store.query<{ queries_total: number; wallet_held_nc: string | number; list_spend_nc: string | number }>('SELECT queries_total, wallet_held_nc, list_spend_nc FROM orgs WHERE id = $1', [agent.orgId]);
    t.equal(org?.queries_total, answered.length + 2, 'exactly the answered queries were counted');
    t.equal(Number(org?.wallet_held_nc), 0, 'nothing left held');
    const charged = answered.reduce((s, o) => s + (o.cost ?? 0), warmCost);
    t.ok(Math.abs(Number(org?.list_spend_nc) / 1e9 - charged) < 1e-9, `spend ${Number(org?.list_spend_nc) / 1e9} = the answered queries' costs ${charged}`);
    const rsv = await a.svc.store.query<{ n: number }>('SELECT count(*)::int AS n FROM reservations WHERE org_id = $1', [agent.orgId]);
    t.equal(rsv[0]?.n, 0, 'no reservation left');
  });
}
