/**
 * Revoking a connection stops its running statements at their source: once the revoke has
 * answered, none of them returns rows; each is answered 410 connection_revoked, audited as
 * `error` / `connection_revoked` after `connection.revoked`, and nothing is charged. The same
 * on a live `postgres` target, where the statement is cancelled at the database. Expiry and
 * relay deletion use the same registry (unit-tested below).
 */
import pg from 'pg';
import t from 'tap';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, realPostgresAvailable, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import { RunningQueries } from '../../control-plane/query/running.js';
import { ApiError } from '../../control-plane/errors.js';
import type { TapTest as Tap } from '../helpers/tap.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 20_000 } });
});
t.teardown(() => srv.close());

type Answer = { status: number; body: { error?: { code?: string; details?: Record<string, unknown> }; rows?: unknown[] } };
type AuditEvent = { type: string; outcome?: string; error_code?: string | null; seq: number };

async function auditOf(key: string, conn: string): Promise<AuditEvent[]> {
  const r = await api<{ events: { seq: number; body?: AuditEvent }[] } & Record<string, unknown>>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key });
  if (r.status !== 200) throw new Error(`audit: ${r.status} ${r.text}`);
  return r.body.events.map((e) => ({ ...(e.body ?? (e as unknown as AuditEvent)), seq: e.seq }));
}

async function until(cond: () => boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A paying organization (trial over, wallet funded): its queries run side by side. */
async function payingAgent(name: string): Promise<{ key: string }> {
  const a = await signupAgent(srv.url, name);
  await srv.svc.store.query('UPDATE orgs SET trial_queries_used = 100 WHERE id = $1', [a.orgId]);
  const top = await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 1000 } });
  if (top.status !== 200) throw new Error(`topup: ${top.status} ${top.text}`);
  return a;
}

async function revokeWhileRunning(t: Tap, key: string, conn: string, slow: string, n: number): Promise<void> {
  const usage0 = (await api<Record<string, unknown>>(srv.url, 'GET', '/v1/agent/account/usage', { key })).body;
  const running = srv.svc.services.running;
  const started = Date.now();
  const queries = Array.from({ length: n }, () => api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql: slow } }) as Promise<Answer>);
  await until(() => running.count(conn) === n);
  await new Promise((r) => setTimeout(r, 300)); // well into the statements
  const rev = await api(srv.url, 'POST', `/v1/connections/${conn}/revoke`, { key });
  t.equal(rev.status, 200, 'revoked');
  const revokedAt = Date.now();
  const answers = await Promise.all(queries);
  const waited = Date.now() - revokedAt;
  for (const a of answers) {
    t.equal(a.status, 410, JSON.stringify(a.body).slice(0, 200));
    t.equal(a.body.error?.code, 'connection_revoked');
    t.equal(a.body.rows, undefined, 'no rows');
  }
  t.ok(waited < 5000, `all ${n} answered ${waited} ms after the revoke (the statements would run ${20_000 - (revokedAt - started)} ms more)`);
  t.equal(running.count(conn), 0, 'nothing left running');
  const events = await auditOf(key, conn);
  const rev0 = events.findIndex((e) => e.type === 'connection.revoked' || e.type === 'connection_revoked');
  t.ok(rev0 >= 0, `connection.revoked is in the chain (${events.map((e) => e.type).join(',')})`);
  const stopped = events.filter((e) => e.type === 'query' && e.error_code === 'connection_revoked');
  t.equal(stopped.length, n, 'each stopped query is audited');
  for (const e of stopped) {
    t.equal(e.outcome, 'error');
    t.ok(e.seq > (events[rev0]?.seq ?? Infinity), 'after connection.revoked');
  }
  t.notOk(events.some((e) => e.type === 'query' && e.outcome === 'ok'), 'no query of it is audited ok');
  const usage1 = (await api<Record<string, unknown>>(srv.url, 'GET', '/v1/agent/account/usage', { key })).body;
  t.same(usage1, usage0, 'nothing was charged');
}


t.test('demo target: revoke stops running statements (the engine running them is ended)', async (t) => {
  const a = await signupAgent(srv.url, 'Revoke Demo');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT 1 AS one' } })).status, 200, 'demo engine warm');
  const a2 = await payingAgent('Revoke Demo 2');
  const conn2 = await openConnection(srv.url, a2.key, 'demo-healthcare', ['read:encounters']);
  await revokeWhileRunning(t, a2.key, conn2, 'SELECT count(*) AS n FROM encounters a, encounters b, encounters c', 2);
  const after = await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) AS n FROM encounters' } });
  t.equal(after.status, 200, "another connection's queries still answer");
});

t.test('postgres target: revoke cancels the statements at the database', async (t) => {
  if (!(await realPostgresAvailable())) return t.skip('no PostgreSQL answers at TEST_DATABASE_URL (PGlite cannot interrupt a running statement)', () => undefined);
  const db: CustomerDatabase = await customerDatabase('svc_revoke');
  t.teardown(() => db.drop());
  if (db.kind !== 'postgres') return t.skip('the customer database is PGlite here', () => undefined);
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  t.teardown(() => c.end());
  await c.query('CREATE TABLE orders (id int PRIMARY KEY)');
  await c.query('INSERT INTO orders SELECT generate_series(1, 2000)');
  const a = await payingAgent('Revoke PG');
  const cred = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: `${db.url}${db.url.includes('?') ? '&' : '?'}sslmode=disable` } });
  t.equal(cred.status, 201, cred.text);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:orders']);
  const slow = 'SELECT count(*) AS n FROM orders a, orders b, orders c';
  await revokeWhileRunning(t, a.key, conn, slow, 3);
  let left = -1;
  for (let i = 0; i < 50 && left !== 0; i++) {
    const r = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE '%orders%' AND pid <> pg_backend_pid()`);
    left = r.rows[0]?.n ?? -1;
    if (left !== 0) await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(left, 0, 'no statement of the revoked connection is still running at the database');
});

t.test('the registry: expiry and relay deletion stop running queries with their own codes', async (t) => {
  const reg = new RunningQueries();
  const q = reg.start('conn_a', { expiresAt: new Date(Date.now() + 150) });
  const other = reg.start('conn_b', { expiresAt: new Date(Date.now() + 60_000), relayId: 'relay_x' });
  const third = reg.start('conn_c', { expiresAt: new Date(Date.now() + 60_000), relayId: 'relay_y' });
  t.equal(q.signal.aborted, false);
  await new Promise((r) => setTimeout(r, 300));
  t.equal(q.signal.aborted, true, 'aborted at the TTL');
  t.equal(q.reason()?.code, 'connection_expired');
  t.equal(reg.relayDeleted('relay_x'), 1);
  t.equal(other.reason()?.code, 'relay_unavailable');
  t.equal(third.signal.aborted, false, 'another relay is untouched');
  t.equal(reg.revoke('conn_c'), 1);
  t.ok(third.reason() instanceof ApiError && third.reason()?.code === 'connection_revoked');
  for (const x of [q, other, third]) x.done();
  t.equal(reg.count('conn_a') + reg.count('conn_b') + reg.count('conn_c'), 0);
});
