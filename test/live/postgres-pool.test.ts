/**
 * Pooled connections on the `postgres` live target, against a real PostgreSQL: queries of one
 * organization reuse its connections (at most SVC_LIVE_POOL_SIZE), replacing or deleting the
 * credential ends them at once and the next query runs under the new credential, and a connection
 * whose statement was cancelled is never reused.
 */
import t from 'tap';
import pg from 'pg';
import { customerDatabase, dropWithRole, type CustomerDatabase } from '../helpers/customer-db.js';
import { eventually } from '../helpers/tap.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let db: CustomerDatabase;
let srv: TestServer;
const ROLE = `svc_pool_reader_${process.pid}`;

t.before(async () => {
  db = await customerDatabase('svc_live_pool');
  if (db.kind !== 'postgres') return;
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query('CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL)');
  await c.query('INSERT INTO orders SELECT g, g FROM generate_series(1, 300) g');
  await c.query('CREATE TABLE secrets (id int)');
  await c.query(`DROP ROLE IF EXISTS ${ROLE}`).catch(() => undefined);
  await c.query(`CREATE ROLE ${ROLE} LOGIN PASSWORD 'pool-pw'`);
  await c.query(`GRANT SELECT ON orders TO ${ROLE}`);
  await c.end();
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1', SVC_LIVE_POOL_SIZE: '3' }, limits: { queryTimeoutMs: 1500 } });
});
t.teardown(async () => {
  await srv?.close();
  await dropWithRole(db, ROLE);
});

const sslOff = (url: string): string => `${url}${url.includes('?') ? '&' : '?'}sslmode=disable`;

/** svc's connections to this test's database, by user */
async function backends(): Promise<Record<string, number>> {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    const r = await c.query<{ usename: string; n: number }>(
      "SELECT usename, count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'svc-live' AND datname = current_database() GROUP BY usename",
    );
    return Object.fromEntries(r.rows.map((x) => [x.usename, x.n]));
  } finally {
    await c.end();
  }
}

const total = (b: Record<string, number>): number => Object.values(b).reduce((x, y) => x + y, 0);

t.test('an organization reuses its pooled connections, at most the pool size', async (t) => {
  if (db.kind !== 'postgres') return t.skip('needs a real PostgreSQL to count its backends (PGlite over the wire has no pg_stat_activity of clients)', () => undefined);
  const a = await signupAgent(srv.url, 'Pool Org');
  t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: sslOff(db.url) } })).status, 201);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.orders', 'read:public.secrets']);
  const q = async (sql: string) =>
    (await api<{ rows?: Record<string, unknown>[]; error?: { code: string; details?: Record<string, unknown> } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).body;

  for (let i = 0; i < 10; i++) t.equal((await q(`SELECT total FROM orders WHERE id = ${i + 1}`)).rows?.[0]?.['total'], i + 1);
  t.equal(total(await backends()), 1, 'ten queries one after another: one connection');

  const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => q(`SELECT total FROM orders WHERE id = ${i + 1}`)));
  t.ok(burst.every((r) => r.rows?.[0]?.['total'] !== undefined), 'twelve at once all answered');
  const open = total(await backends());
  t.ok(open >= 1 && open <= 3, `at most the pool size (3) open: ${open}`);

  // a statement cancelled at its deadline: its connection is ended, not given back
  const slow = await q('SELECT count(*) FROM orders a, orders b, orders c, orders d');
  t.equal(slow.error?.code, 'query_timeout');
  t.equal((await q('SELECT total FROM orders WHERE id = 7')).rows?.[0]?.['total'], 7, 'the next query runs');

  // the credential replaced by another role: the old connections end, the next query runs as the new role
  t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: sslOff(db.url.replace(/\/\/[^@/]*@/, `//${ROLE}:pool-pw@`)) } })).status, 201);
  t.ok(await eventually(async () => total(await backends()) === 0), 'the old credential’s connections ended at once');
  const denied = await q('SELECT * FROM secrets');
  t.equal(denied.error?.code, 'scope_violation', 'the new role’s privileges apply: no stale connection of the old role');
  t.equal((await q('SELECT total FROM orders WHERE id = 9')).rows?.[0]?.['total'], 9);
  t.same(Object.keys(await backends()), [ROLE], 'only the new role is connected');

  // the credential deleted: its connections end
  t.equal((await api(srv.url, 'DELETE', '/v1/connections/credentials/postgres', { key: a.key })).status, 200);
  t.ok(await eventually(async () => total(await backends()) === 0), 'deleting the credential ends its connections');
});

t.test('organizations do not share connections', async (t) => {
  if (db.kind !== 'postgres') return t.skip('needs a real PostgreSQL to count its backends', () => undefined);
  const agents = await Promise.all(['Pool A', 'Pool B'].map((n) => signupAgent(srv.url, n)));
  for (const a of agents) {
    t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: sslOff(db.url) } })).status, 201);
    const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.orders']);
    t.equal((await api<{ rows: Record<string, unknown>[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT 1 AS one' } })).body.rows[0]?.['one'], 1);
  }
  t.equal(total(await backends()), 2, 'one pooled connection each');
  for (const a of agents) await api(srv.url, 'DELETE', '/v1/connections/credentials/postgres', { key: a.key });
  t.ok(await eventually(async () => total(await backends()) === 0));
});
