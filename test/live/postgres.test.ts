/**
 * The `postgres` live target end to end: a real control plane, the organization's own connection
 * URL registered as a credential, and a real customer PostgreSQL (or PGlite over the wire when no
 * PostgreSQL answers). Scopes and filters hold whatever the SQL says, the database's own
 * privileges apply, caps truncate, the deadline cancels at the database, and deleting the
 * credential makes the open connection fail cleanly.
 */
import t from 'tap';
import pg from 'pg';
import { customerDatabase, dropWithRole, withSslmode, type CustomerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let db: CustomerDatabase;
let srv: TestServer;
const ROLE = `svc_reader_${process.pid}`;

t.before(async () => {
  db = await customerDatabase('svc_live_pg');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query(`CREATE TABLE orders (id int PRIMARY KEY, tenant_id int NOT NULL, total numeric(10,2) NOT NULL, note text)`);
  await c.query(`INSERT INTO orders SELECT g, g % 10, g * 1.5, 'order ' || g FROM generate_series(1, 300) g`);
  await c.query(`CREATE TABLE secrets (id int, value text)`);
  await c.query(`INSERT INTO secrets VALUES (1, 'top secret')`);
  if (db.kind === 'postgres') {
    await c.query(`DROP ROLE IF EXISTS ${ROLE}`).catch(() => undefined);
    await c.query(`CREATE ROLE ${ROLE} LOGIN PASSWORD 'reader-pw'`);
    await c.query(`GRANT SELECT ON orders TO ${ROLE}`);
  }
  await c.end();
  // the customer database is on loopback: allowed only by SVC_LIVE_ALLOW_PRIVATE=1 (the default refuses it)
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 1500, maxRows: 100 } });
});
t.teardown(async () => {
  await srv?.close();
  await dropWithRole(db, ROLE);
});

interface QueryBody {
  rows: Record<string, unknown>[];
  row_count: number;
  truncated: boolean;
  cost_cents: number;
  bytes_egressed: number;
  audit_event_id: string;
  scope_applied: { tables_allowed: string[]; tables_read: string[]; row_filters: Record<string, string | null> };
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

async function agentWithCredential(url = withSslmode(db.url)): Promise<{ key: string }> {
  const a = await signupAgent(srv.url);
  const r = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: url } });
  if (r.status !== 201) throw new Error(`credential: ${r.status} ${r.text}`);
  return a;
}

const query = (key: string, conn: string, sql: string) => api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql } });

t.test('queries run on the customer database, within the scopes and filters', async (t) => {
  const a = await agentWithCredential();
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.orders', 'filter:public.orders.tenant_id=7']);
  const r = await query(a.key, conn, 'SELECT count(*)::int AS n, sum(total) AS s FROM orders WHERE true OR tenant_id <> 7');
  t.equal(r.status, 200, r.text);
  t.equal(r.body.rows[0]?.['n'], 30, 'only tenant 7: the agent’s OR cannot widen the filter');
  t.equal(r.body.rows[0]?.['s'], 6840, 'numeric comes back as a number');
  t.same(r.body.scope_applied.tables_read, ['public.orders']);
  t.match(r.body.scope_applied.row_filters['public.orders'], /"tenant_id" = '7'/);
  t.ok(r.body.cost_cents > 0 && r.body.bytes_egressed === Buffer.byteLength(JSON.stringify(r.body.rows)));

  // qualified and unqualified names, joins, CTEs
  const j = await query(a.key, conn, 'WITH o AS (SELECT id FROM public.orders) SELECT count(*)::int AS n FROM o JOIN orders x USING (id)');
  t.equal(j.status, 200, j.text);
  t.equal(j.body.rows[0]?.['n'], 30);

  const out = await query(a.key, conn, 'SELECT * FROM secrets');
  t.equal(out.status, 403);
  t.equal(out.body.error?.code, 'scope_violation');
  for (const sql of ['SELECT * FROM pg_catalog.pg_shadow', 'SELECT pg_read_file(\'/etc/passwd\')', 'DELETE FROM orders', 'SELECT 1; SELECT 2', "COPY orders TO '/tmp/x'"]) {
    const r2 = await query(a.key, conn, sql);
    t.equal(r2.status, 403, `${sql}: refused`);
  }
  const bad = await query(a.key, conn, 'SELECT nope FROM orders');
  t.equal(bad.status, 400);
  t.equal(bad.body.error?.code, 'invalid_sql', 'the database’s own error is invalid_sql');

  // audited like a demo query, and the chain verifies
  const audit = await api<{ events: { type: string; outcome: string; tables?: string[]; row_filters?: Record<string, string> }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key });
  t.equal(audit.body.events[0]?.outcome, 'ok');
  t.same(audit.body.events[0]?.tables, ['public.orders']);
  const v = await api<{ verified: boolean }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key });
  t.equal(v.body.verified, true);

  const creds = await api<{ credentials: { last_used_at: string | null }[] }>(srv.url, 'GET', '/v1/connections/credentials', { key: a.key });
  t.ok(creds.body.credentials[0]?.last_used_at, 'last_used_at is recorded');
});

t.test('row and byte caps truncate while reading', async (t) => {
  const a = await agentWithCredential();
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:orders']);
  const r = await query(a.key, conn, 'SELECT * FROM orders ORDER BY id');
  t.equal(r.status, 200, r.text);
  t.equal(r.body.row_count, 100);
  t.equal(r.body.truncated, true);
  t.same(r.body.rows[0], { id: 1, tenant_id: 1, total: 1.5, note: 'order 1' });
});

t.test('the credential’s role limits what can be read (real PostgreSQL)', { skip: false }, async (t) => {
  if (db.kind !== 'postgres') {
    t.skip('roles and privileges need a real PostgreSQL (PGlite fallback in use)', () => undefined);
    return;
  }
  const u = new URL(withSslmode(db.url));
  u.username = ROLE;
  u.password = 'reader-pw';
  const a = await agentWithCredential(u.toString());
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.orders', 'read:public.secrets']);
  const ok = await query(a.key, conn, 'SELECT count(*)::int AS n FROM orders');
  t.equal(ok.status, 200, ok.text);
  const denied = await query(a.key, conn, 'SELECT * FROM secrets');
  t.equal(denied.status, 403, denied.text);
  t.equal(denied.body.error?.code, 'scope_violation');
  t.match(denied.body.error?.message, /permission denied/);
});

t.test('past the deadline: 504, and the statement is cancelled at the database', async (t) => {
  if (!db.cancelAtDatabase) {
    t.skip('the PGlite fallback cannot interrupt a running statement', () => undefined);
    return;
  }
  const a = await agentWithCredential();
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:orders']);
  const r = await query(a.key, conn, 'SELECT count(*) FROM orders a, orders b, orders c, orders d');
  t.equal(r.status, 504, r.text);
  t.equal(r.body.error?.code, 'query_timeout');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  let active = 1;
  for (let i = 0; i < 50 && active > 0; i++) {
    const s = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'svc-live' AND state = 'active' AND datname = current_database()`);
    active = s.rows[0]?.n ?? 0;
    if (active > 0) await new Promise((res) => setTimeout(res, 100));
  }
  await c.end();
  t.equal(active, 0, 'nothing of ours is still running there');
});

t.test('a credential that the server refuses, an unreachable server, and a deleted credential fail cleanly', async (t) => {
  const a = await agentWithCredential();
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:orders']);
  t.equal((await query(a.key, conn, 'SELECT 1 AS x FROM orders LIMIT 1')).status, 200);

  // replaced by one naming a database that does not exist: refused, naming the kind to register again
  const u = new URL(withSslmode(db.url));
  u.pathname = '/svc_no_such_database_x';
  await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: u.toString() } });
  if (db.kind === 'postgres') {
    const r = await query(a.key, conn, 'SELECT 1 AS x FROM orders');
    t.equal(r.status, 400, r.text);
    t.match(r.body.error, { code: 'invalid_request', details: { reason: 'credential_rejected', connector_kind: 'postgres' } });
  }

  // a port where nothing listens: 503, quickly
  await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: 'postgres://u:p@127.0.0.1:1/app?sslmode=disable' } });
  const down = await query(a.key, conn, 'SELECT 1 AS x FROM orders');
  t.equal(down.status, 503, down.text);

  const del = await api(srv.url, 'DELETE', '/v1/connections/credentials/postgres', { key: a.key });
  t.equal(del.status, 200);
  const r = await query(a.key, conn, 'SELECT 1 AS x FROM orders');
  t.equal(r.status, 400);
  t.match(r.body.error, { code: 'invalid_request', details: { reason: 'credential_missing', connector_kind: 'postgres' } });
  t.match(r.body.error?.message, /needs a postgres credential/);
  const usage = await api<{ queries: number }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(usage.body.queries, 1, 'failed queries were not charged');
});
