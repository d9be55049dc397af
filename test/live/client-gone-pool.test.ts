/**
 * An agent that leaves while its `postgres` or `mysql` statement still waits for one of its
 * organization's pooled connections: nothing ran, so it is audited as `client_closed_request` and
 * not charged (docs/scopes-and-queries.md, "An agent that leaves stops its statement"); one whose
 * statement was sent to the database is stopped there and charged the query price. A schema
 * listing whose agent leaves is stopped too (audited, never charged). Against the real PostgreSQL
 * and MariaDB on loopback, each skipped with a reason when it does not answer.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { until } from '../helpers/tap.js';
import pg from 'pg';
import mysql from 'mysql2/promise';
import type { LiveConnections } from '../../control-plane/live/pool.js';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import { sendThenLeave } from '../helpers/leave.js';
import { MARIADB_ADMIN, mariadbAnswers } from '../helpers/mariadb.js';
import type { TapTest } from '../helpers/tap.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
let pgDb: CustomerDatabase | undefined;
let myDb: string | undefined;
let admin: mysql.Connection | undefined;

t.before(async () => {
  const db = await customerDatabase('svc_live_gone');
  pgDb = db;
  if (db.kind === 'postgres') {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    await c.query('CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL)');
    await c.query('INSERT INTO orders SELECT g, g FROM generate_series(1, 300) g');
    await c.end();
  }
  if (await mariadbAnswers()) {
    myDb = `svc_live_gone_${randomBytes(5).toString('hex')}`;
    admin = await mysql.createConnection({ ...MARIADB_ADMIN, multipleStatements: true });
    await admin.query(`CREATE DATABASE ${myDb}; CREATE TABLE ${myDb}.orders (id INT PRIMARY KEY, total INT NOT NULL)`);
    await admin.query(`INSERT INTO ${myDb}.orders VALUES ${Array.from({ length: 300 }, (_, i) => `(${i + 1}, ${i + 1})`).join(',')}`);
  }
  // one pooled connection per organization: a second statement waits for the first
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1', SVC_LIVE_POOL_SIZE: '1' }, limits: { queryTimeoutMs: 20_000 } });
});
t.teardown(async () => {
  await srv?.close();
  await pgDb?.drop();
  if (admin && myDb) await admin.query(`DROP DATABASE IF EXISTS ${myDb}`);
  await admin?.end();
});

/** runs for minutes, stopped by the test */
const SLOW = 'SELECT count(*) AS n FROM orders a, orders b, orders c, orders d';

type AuditEvent = { type: string; outcome?: string; error_code?: string | null; cost_cents?: number; billed_to?: string };


interface Kind {
  readonly target: 'postgres' | 'mysql';
  readonly secret: string;
  readonly scope: string;
  /** svc's statements running at the database now */
  readonly slowRunning: () => Promise<number>;
}

function postgresKind(): Kind | string {
  if (pgDb?.kind !== 'postgres') return 'needs a real PostgreSQL (TEST_DATABASE_URL) to hold a pooled connection with a running statement; PGlite answered instead';
  const url = pgDb.url;
  return {
    target: 'postgres',
    secret: `${url}${url.includes('?') ? '&' : '?'}sslmode=disable`,
    scope: 'read:public.orders',
    slowRunning: async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        const r = await c.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'svc-live' AND datname = current_database() AND state = 'active'");
        return r.rows[0]?.n ?? 0;
      } finally {
        await c.end();
      }
    },
  };
}

function mysqlKind(): Kind | string {
  if (!admin || !myDb) return 'no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)';
  const db = admin;
  const name = myDb;
  return {
    target: 'mysql',
    secret: `mysql://root@127.0.0.1:3306/${name}`,
    scope: 'read:orders',
    slowRunning: async () => {
      const [rows] = await db.query<mysql.RowDataPacket[]>("SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND COMMAND = 'Query'", [name]);
      return Number(rows[0]?.['n'] ?? 0);
    },
  };
}

interface Setup {
  readonly key: string;
  readonly orgId: string;
  readonly conn: string;
  readonly pool: LiveConnections<object>;
  readonly price: number;
  balance(): Promise<number>;
  events(type: string): Promise<AuditEvent[]>;
}

/** An organization paying from its wallet, with the kind's credential and a connection to its orders. */
async function setUp(t: TapTest, kind: Kind, name: string): Promise<Setup> {
  const a = await signupAgent(srv.url, name);
  await srv.svc.store.query('UPDATE orgs SET trial_queries_used = 100 WHERE id = $1', [a.orgId]);
  t.equal((await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 1000 } })).status, 200);
  t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: kind.target, secret: kind.secret } })).status, 201);
  const conn = await openConnection(srv.url, a.key, kind.target, [kind.scope]);
  const connector = srv.svc.services.live.connector(kind.target) as unknown as { connections: LiveConnections<object> } | undefined;
  if (!connector) throw new Error(`no ${kind.target} connector`);
  const price = (await api<{ price_per_query_cents: number }>(srv.url, 'GET', '/v1/agent/billing/config', { key: a.key })).body.price_per_query_cents;
  return {
    key: a.key,
    orgId: a.orgId,
    conn,
    pool: connector.connections,
    price,
    balance: async () => (await api<{ wallet_balance_cents: number }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body.wallet_balance_cents,
    events: async (type) => {
      const r = await api<{ events: { body?: AuditEvent }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key });
      return r.body.events.map((e) => e.body ?? (e as unknown as AuditEvent)).filter((e) => e.type === type);
    },
  };
}

const cents = (x: number): number => Math.round(x * 1e6) / 1e6;

for (const make of [postgresKind, mysqlKind]) {
  t.test(`${make === postgresKind ? 'postgres' : 'mysql'}: an agent that leaves while its statement waits for a pooled connection is not charged; one whose statement runs is`, async (t) => {
    const kind = make();
    if (typeof kind === 'string') return t.skip(kind, () => undefined);
    const s = await setUp(t, kind, `Gone ${kind.target}`);
    const running = srv.svc.services.running;
    const balance0 = await s.balance();

    const first = sendThenLeave(srv.url, 'POST', `/v1/connections/${s.conn}/query`, s.key, { sql: SLOW });
    await until('the first statement runs at the database', async () => (await kind.slowRunning()) === 1);
    const queued = sendThenLeave(srv.url, 'POST', `/v1/connections/${s.conn}/query`, s.key, { sql: SLOW });
    await until('the second statement waits for the pooled connection', () => s.pool.waiting(s.orgId) === 1 && running.count(s.conn) === 2);

    queued.leave();
    t.equal(await queued.done, undefined, 'the queued agent left before any answer');
    await until('the queued statement is stopped', () => running.count(s.conn) === 1 && s.pool.waiting(s.orgId) === 0);
    const afterQueued = await s.events('query');
    t.equal(afterQueued.length, 1, 'only the statement that left is settled');
    t.match(afterQueued[0], { outcome: 'error', error_code: 'client_closed_request' }, 'audited as client_closed_request');
    t.equal(afterQueued[0]?.cost_cents ?? 0, 0, 'it never reached the database: not charged');
    t.equal(await kind.slowRunning(), 1, 'the first statement still runs');

    first.leave();
    t.equal(await first.done, undefined, 'the running agent left before any answer');
    await until('the running statement is stopped', () => running.count(s.conn) === 0);
    await until('it is stopped at the database', async () => (await kind.slowRunning()) === 0);
    const all = await s.events('query');
    t.equal(all.length, 2);
    t.match(all[1], { outcome: 'error', error_code: 'client_closed_request', billed_to: 'wallet', cost_cents: s.price }, `the running statement is charged the query price (${s.price} cents)`);
    t.equal(cents(balance0 - (await s.balance())), s.price, 'the wallet paid one query price: the running statement, not the queued one');

    const after = await api<{ rows?: { total: unknown }[] }>(srv.url, 'POST', `/v1/connections/${s.conn}/query`, { key: s.key, body: { sql: 'SELECT total FROM orders WHERE id = 5' } });
    t.equal(Number(after.body.rows?.[0]?.total), 5, 'the next statement runs');
    await api(srv.url, 'DELETE', `/v1/connections/credentials/${kind.target}`, { key: s.key });
  });
}

// (before the schema route listened for its agent leaving, the listing waited for the pooled
// connection until its deadline and was audited as service_unavailable)
for (const make of [postgresKind, mysqlKind]) {
  t.test(`${make === postgresKind ? 'postgres' : 'mysql'}: a schema listing whose agent leaves is stopped, audited as client_closed_request, never charged`, async (t) => {
    const kind = make();
    if (typeof kind === 'string') return t.skip(kind, () => undefined);
    const s = await setUp(t, kind, `Gone schema ${kind.target}`);
    const running = srv.svc.services.running;
    const balance0 = await s.balance();

    const busy = sendThenLeave(srv.url, 'POST', `/v1/connections/${s.conn}/query`, s.key, { sql: SLOW });
    await until('a statement holds the pooled connection', async () => (await kind.slowRunning()) === 1);
    const listing = sendThenLeave(srv.url, 'GET', `/v1/connections/${s.conn}/schema`, s.key);
    await until('the listing waits for the pooled connection', () => s.pool.waiting(s.orgId) === 1 && running.count(s.conn) === 2);
    listing.leave();
    t.equal(await listing.done, undefined, 'the agent left before any answer');
    await until('the listing is stopped (its deadline is 20 s)', () => running.count(s.conn) === 1 && s.pool.waiting(s.orgId) === 0);
    const schema = await s.events('schema');
    t.equal(schema.length, 1);
    t.match(schema[0], { outcome: 'error', error_code: 'client_closed_request' }, 'audited as client_closed_request');
    t.notOk(schema[0] && 'cost_cents' in schema[0], 'no charge in its event');

    busy.leave();
    await until('the statement is stopped', () => running.count(s.conn) === 0);
    t.equal(cents(balance0 - (await s.balance())), s.price, 'the wallet paid only the statement that ran');
    const listed = await api<{ tables?: { name: string }[] }>(srv.url, 'GET', `/v1/connections/${s.conn}/schema`, { key: s.key });
    t.equal(listed.body.tables?.length, 1, 'the next listing answers');
    await api(srv.url, 'DELETE', `/v1/connections/credentials/${kind.target}`, { key: s.key });
  });
}
