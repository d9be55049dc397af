/**
 * `(x).name` is field selection when x is a composite value, and PostgreSQL's old function-call
 * notation `name(x)` when it is not: a function the checker's allow-list never saw, since it is
 * written as a field (an A_Indirection, not a FuncCall). search_path = pg_catalog (pg-read
 * PIN_SEARCH_PATH) does not help: the catalog is where `ts_stat(text)`, which runs the query text
 * it is given, and `current_setting(text)` live.
 *
 * Without the check, through the `postgres` target under read:public.orders only,
 * `SELECT (s.q).ts_stat FROM (SELECT 'SELECT to_tsvector(value) FROM public.secrets' AS q) s`
 * answered 200 with the words of a table outside the scopes, and `('server_version'::text).current_setting`
 * the server's setting (a function allowlists.ts names as deliberately absent).
 */
import t from 'tap';
import pg from 'pg';
import { customerDatabase, postgresAgent, type CustomerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, startServer, type TestServer } from '../helpers/server.js';

let db: CustomerDatabase;
let srv: TestServer;

t.before(async () => {
  db = await customerDatabase('svc_pinrev_fieldsel');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query('CREATE TABLE orders (id int PRIMARY KEY, note text, meta jsonb)');
  await c.query(`INSERT INTO orders VALUES (1, 'a', '{"k": "v"}')`);
  await c.query('CREATE TABLE secrets (id int, value text)');
  await c.query("INSERT INTO secrets VALUES (1, 'classified zanzibar')");
  await c.end();
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
});
t.teardown(async () => {
  await srv?.close();
  await db?.drop();
});

const LEAKS = [
  "SELECT (s.q).ts_stat AS v FROM (SELECT 'SELECT to_tsvector(value) FROM public.secrets'::text AS q) s",
  "WITH s AS (SELECT 'SELECT to_tsvector(value) FROM public.secrets'::text AS q) SELECT (s.q).ts_stat AS v FROM s",
  "SELECT (lower('SELECT to_tsvector(value) FROM public.secrets')).ts_stat AS v FROM orders",
  "SELECT ('server_version'::text).current_setting AS v FROM orders",
  // after a first field, the next one is a call on whatever the first gave
  "SELECT (jsonb_each_text(meta)).value.current_setting AS v FROM orders",
];

t.test('the postgres target: a function written as a field is refused like any function outside the allow-list', async (t) => {
  const a = await postgresAgent(srv.url, db.url);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.orders']);
  const query = (sql: string) => api<{ error?: { code: string; details?: { reason?: string } }; rows?: unknown[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
  for (const sql of LEAKS) {
    const r = await query(sql);
    t.equal(r.status, 403, `${sql}: refused (${r.text})`);
    t.equal(r.body.error?.code, 'scope_violation');
    t.notMatch(r.text, /zanzibar|classified/, 'nothing of the table outside the scopes');
  }
  // a field of a record the allow-listed *_each functions return is still a field
  const ok = await query('SELECT (jsonb_each_text(meta)).key AS k, (jsonb_each(meta)).value AS v FROM orders');
  t.equal(ok.status, 200, ok.text);
  t.same(ok.body.rows, [{ k: 'k', v: 'v' }]);
  // a field whose name is an allowed function: whichever PostgreSQL takes, it is allowed
  const allowed = await query('SELECT (o.note).upper AS v FROM orders o');
  t.equal(allowed.status, 200, allowed.text);
  t.same(allowed.body.rows, [{ v: 'A' }]);
});
