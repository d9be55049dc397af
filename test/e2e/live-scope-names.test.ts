/**
 * Table names on the live database targets, end to end (issue #16, "Messages and surfaces"):
 * the real control plane, a customer PostgreSQL (real, or PGlite over the wire) reached directly
 * (`postgres`) and through a real svc-relay (`postgres-relay`), and the MariaDB on 127.0.0.1:3306
 * (`mysql`, skipped with a reason when it does not answer).
 *
 * 1. A table outside the scopes is refused as the demo targets refuse one (403 scope_violation,
 *    reason table_not_in_scope, "is not in this connection's scopes"), whether or not it exists
 *    at the source: the answer for an existing table and a missing one differ only in the name.
 * 2. `orders` and `public.orders` are one table in read: and filter: scopes, every combination
 *    the grammar allows, and in SQL. On MySQL an unqualified name means the credential's
 *    database, known only when a query runs: a filter must spell its table as the read: scope
 *    does, and the refusal says how.
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import pg from 'pg';
import t from 'tap';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import { MARIADB_ADMIN, mariadbAnswers } from '../helpers/mariadb.js';
import { startRelay, type TestRelay } from '../helpers/relay.js';
import { api, openConnection, signupAgent, startServer, type Agent, type TestServer } from '../helpers/server.js';

interface Body {
  rows: Record<string, unknown>[];
  scope_applied: { tables_read: string[]; row_filters: Record<string, string | null> };
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

let srv: TestServer;
let db: CustomerDatabase;
let relay: TestRelay | undefined;
let agent: Agent;
const myDb = `svc_names_${randomBytes(4).toString('hex')}`;
const hasMysql = await mariadbAnswers();

t.before(async () => {
  db = await customerDatabase('svc_scope_names');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query(`CREATE TABLE orders (id int PRIMARY KEY, region text NOT NULL);
    INSERT INTO orders SELECT g, CASE WHEN g % 4 = 0 THEN 'eu' ELSE 'us' END FROM generate_series(1, 40) g;
    CREATE TABLE secrets (id int, value text); INSERT INTO secrets VALUES (1, 'top secret');`);
  await c.end();
  if (hasMysql) {
    const admin = await mysql.createConnection({ ...MARIADB_ADMIN, multipleStatements: true });
    await admin.query(`CREATE DATABASE ${myDb}; CREATE TABLE ${myDb}.orders (id INT PRIMARY KEY, region VARCHAR(10) NOT NULL);
      CREATE TABLE ${myDb}.secrets (id INT, value TEXT); INSERT INTO ${myDb}.secrets VALUES (1, 'top secret')`);
    await admin.query(`INSERT INTO ${myDb}.orders VALUES ${Array.from({ length: 40 }, (_, i) => `(${i + 1}, '${(i + 1) % 4 === 0 ? 'eu' : 'us'}')`).join(',')}`);
    await admin.end();
  }
  // the customer databases are on loopback: allowed by SVC_LIVE_ALLOW_PRIVATE=1
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
  agent = await signupAgent(srv.url, 'Names Co');
  const cred = await api(srv.url, 'POST', '/v1/connections/credentials', { key: agent.key, body: { connector_kind: 'postgres', secret: `${db.url}${db.url.includes('?') ? '&' : '?'}sslmode=disable` } });
  if (cred.status !== 201) throw new Error(cred.text);
  if (hasMysql) {
    const my = await api(srv.url, 'POST', '/v1/connections/credentials', { key: agent.key, body: { connector_kind: 'mysql', secret: `mysql://root@127.0.0.1:3306/${myDb}` } });
    if (my.status !== 201) throw new Error(my.text);
  }
  relay = await startRelay(srv, agent.key, db.url, { name: 'names-db' });
});
t.teardown(async () => {
  await relay?.close();
  await srv?.close();
  await db?.drop();
  if (hasMysql) {
    const admin = await mysql.createConnection(MARIADB_ADMIN);
    await admin.query(`DROP DATABASE IF EXISTS ${myDb}`);
    await admin.end();
  }
});

const query = (conn: string, sql: string) => api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql } });
const connect = (target: string, scopes: string[]) => api<{ connectionId: string; error?: { code: string; message: string } }>(srv.url, 'POST', '/v1/connections', { key: agent.key, body: { target_id: target, scopes: target === 'postgres-relay' ? [`relay:${relay?.relayId ?? ''}`, ...scopes] : scopes } });

/** the targets of this run, with the schema an unqualified name means (null: the credential's database, MySQL) */
const targets = (): { id: string; schema: string }[] => [{ id: 'postgres', schema: 'public' }, { id: 'postgres-relay', schema: 'public' }, ...(hasMysql ? [{ id: 'mysql', schema: myDb }] : [])];

t.test('an out-of-scope table is reported as the demo targets report it, whether or not it exists at the source', async (t) => {
  const demo = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:encounters']);
  const demoRefusal = await query(demo, 'SELECT * FROM patients');
  t.equal(demoRefusal.status, 403);
  t.equal(demoRefusal.body.error?.details?.['reason'], 'table_not_in_scope');
  const wording = (message: string, table: string): string => message.replace(`"${table}"`, '"<table>"').replace(/readable tables: .*$/, 'readable tables: …');
  const demoWording = wording(demoRefusal.body.error?.message ?? '', 'patients');
  t.equal(demoWording, 'table "<table>" is not in this connection\'s scopes; readable tables: …');

  for (const { id } of targets()) {
    const conn = await connect(id, ['read:orders']);
    t.equal(conn.status, 201, `${id}: ${JSON.stringify(conn.body.error)}`);
    const answers: Record<string, Body['error']> = {};
    for (const table of ['secrets', 'no_such_table']) {
      const r = await query(conn.body.connectionId, `SELECT * FROM ${table}`);
      t.equal(r.status, 403, `${id} ${table}: ${JSON.stringify(r.body.error)}`);
      t.equal(r.body.error?.code, 'scope_violation', `${id} ${table}`);
      t.equal(r.body.error?.details?.['reason'], 'table_not_in_scope', `${id} ${table}: not unknown_table`);
      t.notMatch(r.body.error?.message, /does not exist/, `${id} ${table}: nothing said of the source`);
      t.equal(wording(r.body.error?.message ?? '', table), demoWording, `${id} ${table}: the demo targets' wording`);
      t.match(r.body.error?.message, id === 'mysql' ? /readable tables: orders$/ : /readable tables: public\.orders$/);
      answers[table] = r.body.error;
    }
    const shape = (e: Body['error'], table: string) => ({ code: e?.code, message: e?.message.replace(`"${table}"`, '"X"'), reason: e?.details?.['reason'], table: e?.details?.['table'] === table });
    t.same(shape(answers['secrets'], 'secrets'), shape(answers['no_such_table'], 'no_such_table'), `${id}: an existing and a missing table get the same answer`);
  }
});

t.test('orders and public.orders are one table in read: and filter: scopes and in SQL (postgres, postgres-relay)', async (t) => {
  for (const id of ['postgres', 'postgres-relay']) {
    for (const read of ['read:orders', 'read:public.orders', 'read:Public.ORDERS']) {
      for (const filter of ['filter:orders.region=eu', 'filter:public.orders.region=eu', 'filter:PUBLIC.orders.region=eu']) {
        const what = `${id} ${read} ${filter}`;
        const conn = await connect(id, [read, filter]);
        t.equal(conn.status, 201, `${what}: ${JSON.stringify(conn.body.error)}`);
        for (const from of ['orders', 'public.orders']) {
          const r = await query(conn.body.connectionId, `SELECT count(*)::int AS n, min(region) AS lo, max(region) AS hi FROM ${from}`);
          t.equal(r.status, 200, `${what} FROM ${from}: ${JSON.stringify(r.body.error)}`);
          t.same(r.body.rows, [{ n: 10, lo: 'eu', hi: 'eu' }], `${what} FROM ${from}: only the filtered rows`);
          t.same(r.body.scope_applied.tables_read, ['public.orders']);
          t.match(r.body.scope_applied.row_filters['public.orders'], /"region" = 'eu'/);
        }
      }
    }
    // a filter and a read that name two different tables are refused, naming the read: scope needed
    const otherSchema = await connect(id, ['read:orders', 'filter:sales.orders.region=eu']);
    t.equal(otherSchema.status, 400);
    t.match(otherSchema.body.error, { code: 'invalid_scope', message: /filter on sales\.orders needs read:sales\.orders/ });
    const unqualifiedElsewhere = await connect(id, ['read:sales.orders', 'filter:orders.region=eu']);
    t.equal(unqualifiedElsewhere.status, 400);
    t.match(unqualifiedElsewhere.body.error, { code: 'invalid_scope', message: /filter on public\.orders needs read:public\.orders/ });
  }
});

t.test('mysql: a filter spells its table as the read: scope does; the refusal says how', { skip: hasMysql ? false : 'no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)' }, async (t) => {
  for (const read of ['read:orders', `read:${myDb}.orders`]) {
    for (const filter of ['filter:orders.region=eu', `filter:${myDb}.orders.region=eu`]) {
      const what = `${read} ${filter}`;
      const conn = await connect('mysql', [read, filter]);
      const same = read.slice('read:'.length) === filter.slice('filter:'.length, -'.region=eu'.length);
      if (!same) {
        // the credential's database is known only when a query runs (and changes with the credential)
        t.equal(conn.status, 400, what);
        t.equal(conn.body.error?.code, 'invalid_scope', what);
        t.match(conn.body.error?.message, new RegExp(`does not name the table of ${read}: an unqualified name means the credential's database, known only when a query runs`), what);
        t.match(conn.body.error?.message, new RegExp(`write filter:${read.slice('read:'.length).replace('.', '\\.')}\\.region=… or read:`), `${what}: says what to write`);
        continue;
      }
      t.equal(conn.status, 201, `${what}: ${JSON.stringify(conn.body.error)}`);
      for (const from of ['orders', `${myDb}.orders`]) {
        const r = await query(conn.body.connectionId, `SELECT COUNT(*) AS n, MIN(region) AS lo, MAX(region) AS hi FROM ${from}`);
        t.equal(r.status, 200, `${what} FROM ${from}: ${JSON.stringify(r.body.error)}`);
        t.same(r.body.rows, [{ n: 10, lo: 'eu', hi: 'eu' }], `${what} FROM ${from}: only the filtered rows`);
      }
    }
  }
});
