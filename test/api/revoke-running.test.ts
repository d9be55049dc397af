/**
 * Revoking a connection stops its running statements at their source: once the revoke has
 * answered, none of them returns rows; each is answered 410 connection_revoked, audited as
 * `error` / `connection_revoked` after `connection.revoked`, and nothing is charged. The same
 * on a live `postgres` target, where the statement is cancelled at the database, and for the
 * other causes, each with its `details.cause`: the TTL running out while the statement runs,
 * the agent key revoked in the store (as the dashboard does), a revocation committed by another
 * replica sharing the store (seen by the watcher), and the relay deleted mid-statement.
 */
import pg from 'pg';
import t from 'tap';
import { customerDatabase, ordersOnRealPostgres, type CustomerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, realPostgresAvailable, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import { RunningQueries, WATCH_INTERVAL_MS } from '../../control-plane/query/running.js';
import { startRelay } from '../helpers/relay.js';
import { eventually, type TapTest as Tap } from '../helpers/tap.js';

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
async function payingAgent(name: string): Promise<{ key: string; orgId: string }> {
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

t.test('the registry: each cause stops its own queries, with its own details.cause', async (t) => {
  const reg = new RunningQueries();
  const q = reg.start('conn_a', { expiresAt: new Date(Date.now() + 150) });
  const other = reg.start('conn_b', { expiresAt: new Date(Date.now() + 60_000), relayId: 'relay_x' });
  const third = reg.start('conn_c', { expiresAt: new Date(Date.now() + 60_000), relayId: 'relay_y', keyId: 'key_1' });
  const fourth = reg.start('conn_d', { expiresAt: new Date(Date.now() + 60_000), keyId: 'key_2' });
  t.equal(q.signal.aborted, false);
  await new Promise((r) => setTimeout(r, 300));
  t.equal(q.signal.aborted, true, 'aborted at the TTL');
  t.match(q.reason(), { code: 'connection_revoked', status: 410, details: { cause: 'expired' } });
  const deleting = reg.relayDeleted('relay_x');
  t.match(other.reason(), { code: 'connection_revoked', details: { cause: 'relay_deleted', relay_id: 'relay_x' } });
  other.done();
  t.equal(await deleting, 1, 'the deletion waits for the query to answer');
  t.equal(third.signal.aborted, false, 'another relay is untouched');
  const keyed = reg.keyRevoked('key_2');
  t.match(fourth.reason(), { code: 'connection_revoked', details: { cause: 'key_revoked' } });
  t.equal(third.signal.aborted, false, 'another key is untouched');
  fourth.done();
  t.equal(await keyed, 1);
  let revokeAnswered = false;
  const revoking = reg.revoke('conn_c').then((n) => ((revokeAnswered = true), n));
  t.match(third.reason(), { code: 'connection_revoked', details: { cause: 'revoked' } });
  await new Promise((r) => setTimeout(r, 50));
  t.equal(revokeAnswered, false, 'revoke waits while a stopped query has not answered');
  third.done();
  t.equal(await revoking, 1);
  q.done();
  t.equal(reg.count('conn_a') + reg.count('conn_b') + reg.count('conn_c') + reg.count('conn_d'), 0);
});

/** A slow statement on a demo connection, sent now; resolves with its answer. */
function slowQuery(key: string, conn: string): Promise<Answer> {
  return api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql: 'SELECT count(*) AS n FROM encounters a, encounters b, encounters c' } }) as Promise<Answer>;
}

async function stoppedAudit(t: Tap, key: string, conn: string, cause: string): Promise<void> {
  const events = await auditOf(key, conn);
  const stopped = events.filter((e) => e.type === 'query');
  t.equal(stopped.length, 1, 'the stopped query is audited');
  t.match(stopped[0], { outcome: 'error', error_code: 'connection_revoked' }, `audited as error / connection_revoked (${cause})`);
}

t.test('the TTL running out while a statement runs stops it: 410 connection_revoked, cause expired', async (t) => {
  const a = await payingAgent('Expiry Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters'], { ttl_seconds: 2 });
  const t0 = Date.now();
  const r = await slowQuery(a.key, conn);
  t.equal(r.status, 410, JSON.stringify(r.body).slice(0, 300));
  t.match(r.body.error, { code: 'connection_revoked', details: { cause: 'expired' } });
  t.ok(Date.now() - t0 < 8000, `answered ${Date.now() - t0} ms after it was sent (the TTL was 2 s; the statement alone runs far longer)`);
  await stoppedAudit(t, a.key, conn, 'expired');
});

t.test('the agent key revoked in the store while a statement runs (as the dashboard does): stopped within a second', async (t) => {
  const a = await payingAgent('Key Revocation Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const pending = slowQuery(a.key, conn);
  await until(() => srv.svc.services.running.count(conn) === 1);
  await new Promise((r) => setTimeout(r, 200));
  await srv.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [a.orgId]);
  const revokedAt = Date.now();
  const r = await pending;
  const took = Date.now() - revokedAt;
  t.equal(r.status, 410, JSON.stringify(r.body).slice(0, 300));
  t.match(r.body.error, { code: 'connection_revoked', details: { cause: 'key_revoked' } });
  t.ok(took < 3 * WATCH_INTERVAL_MS + 1500, `stopped ${took} ms after the key was revoked in the store`);
  const audit = await srv.svc.store.query<{ body: AuditEvent }>("SELECT body::jsonb AS body FROM audit_events WHERE connection_id = $1 AND body::jsonb->>'type' = 'query'", [conn]);
  t.match(audit.map((e) => e.body), [{ outcome: 'error', error_code: 'connection_revoked' }]);
  t.equal((await api(srv.url, 'GET', '/v1/connections', { key: a.key })).status, 401, 'the key no longer authenticates');
});

t.test('a revocation committed by another replica (straight into the shared store) stops the statement here', async (t) => {
  const a = await payingAgent('Other Replica Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const pending = slowQuery(a.key, conn);
  await until(() => srv.svc.services.running.count(conn) === 1);
  await new Promise((r) => setTimeout(r, 200));
  // what revokeConnection commits on the other replica, without this replica's registry hearing of it
  await srv.svc.store.query('UPDATE connections SET revoked_at = now() WHERE id = $1', [conn]);
  const revokedAt = Date.now();
  const r = await pending;
  t.equal(r.status, 410, JSON.stringify(r.body).slice(0, 300));
  t.match(r.body.error, { code: 'connection_revoked', details: { cause: 'revoked' } });
  t.ok(Date.now() - revokedAt < 3 * WATCH_INTERVAL_MS + 1500, `stopped ${Date.now() - revokedAt} ms after the revocation was committed elsewhere`);
  await stoppedAudit(t, a.key, conn, 'revoked elsewhere');
});

t.test('relay deleted while a statement runs through it: stopped at the database, 410 connection_revoked, cause relay_deleted', async (t) => {
  const customer = await ordersOnRealPostgres(t, 'svc_revoke_relay', 2000);
  if (!customer) return;
  const { db, client: c } = customer;
  const a = await payingAgent('Relay Deletion Org');
  const relay = await startRelay(srv, a.key, db.url, { applicationName: 'svc-relay-revoke' });
  t.teardown(() => relay.close());
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relay.relayId}`, 'read:orders']);
  const pending = api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) AS n FROM orders a, orders b, orders c' } }) as Promise<Answer>;
  await until(() => srv.svc.services.running.count(conn) === 1);
  await new Promise((r) => setTimeout(r, 300));
  const del = await api(srv.url, 'DELETE', `/v1/relays/${relay.relayId}`, { key: a.key });
  t.equal(del.status, 200, del.text);
  const r = await pending;
  t.equal(r.status, 410, JSON.stringify(r.body).slice(0, 300));
  t.match(r.body.error, { code: 'connection_revoked', details: { cause: 'relay_deleted', relay_id: relay.relayId } });
  await stoppedAudit(t, a.key, conn, 'relay deleted');
  // the relay cancels it at the database when the tunnel closes (a CancelRequest on a new
  // connection): a loaded machine may take seconds, so the wait is long and says what still runs
  const activity = () => c.query<{ pid: number; state: string; query: string; age: string }>("SELECT pid, state, left(query, 60) AS query, (now() - query_start)::text AS age FROM pg_stat_activity WHERE application_name = 'svc-relay-revoke' AND state = 'active'");
  const stopped = await eventually(async () => (await activity()).rows.length === 0, 20_000);
  t.ok(stopped, `the statement is no longer running at the database: ${JSON.stringify((await activity()).rows)}`);
});
