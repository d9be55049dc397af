/**
 * The statement a customer's PostgreSQL runs is read there as the policy's parser (libpg_query,
 * PostgreSQL 18) read it when it verified it, also on an older server: the text splice
 * (query/sql/splice.ts) keeps the agent's own text, so what an older server lexes otherwise is
 * left to the deparsed tree, which writes it in a form every version reads alike:
 *
 * - non-decimal and underscored integer literals (`0x1F`, `0o17`, `0b101`, `1_000`, PostgreSQL
 *   16): PostgreSQL 15 refuses them ("trailing junk after numeric literal"), and 14 and older read
 *   `0x1F` as `0 AS x1F`, a different answer;
 * - a vertical tab between tokens (whitespace from PostgreSQL 16 on, a syntax error before).
 *
 * Runs against the server at TEST_DATABASE_URL (PostgreSQL 15 on this project's machines), or
 * PGlite over the wire when none answers (then the answers hold trivially).
 */
import t from 'tap';
import pg from 'pg';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let db: CustomerDatabase;
let srv: TestServer;

t.before(async () => {
  db = await customerDatabase('svc_live_older');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query('CREATE TABLE orders (id int PRIMARY KEY, region text NOT NULL)');
  await c.query("INSERT INTO orders VALUES (1, 'eu'), (2, 'us')");
  const [v] = (await c.query<{ v: string }>("SELECT current_setting('server_version_num') AS v")).rows;
  t.comment(`the customer database: ${db.kind}, server_version_num ${v?.v ?? '?'}`);
  await c.end();
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
});
t.teardown(async () => {
  await srv?.close();
  await db?.drop();
});

t.test('literals and spacing of newer PostgreSQL versions answer as the policy read them', async (t) => {
  const a = await signupAgent(srv.url);
  const url = `${db.url}${db.url.includes('?') ? '&' : '?'}sslmode=disable`;
  const cred = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: url } });
  t.equal(cred.status, 201, cred.text);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.orders', 'filter:public.orders.region=eu']);
  const cases: [string, Record<string, unknown>][] = [
    ['SELECT 0x1F AS n, id FROM orders', { n: 31, id: 1 }],
    ['SELECT 0x1F, id FROM orders', { '?column?': 31, id: 1 }],
    ['SELECT 1_000 AS n, id FROM orders', { n: 1000, id: 1 }],
    ['SELECT 0o17 AS o, 0b101 AS b, id FROM orders', { o: 15, b: 5, id: 1 }],
    ['SELECT id,\u000bregion FROM orders', { id: 1, region: 'eu' }],
  ];
  for (const [sql, row] of cases) {
    const r = await api<{ rows?: Record<string, unknown>[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
    t.equal(r.status, 200, `${JSON.stringify(sql)}: ${r.status} ${r.text.slice(0, 300)}`);
    t.same(r.body.rows, [row], JSON.stringify(sql));
  }
});
