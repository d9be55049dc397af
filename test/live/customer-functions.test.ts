/**
 * A customer's own functions and operators, named like allowed ones, never run for an agent on
 * the customer's database: the `postgres` target (through a real control plane) and svc-relay's
 * executor run the statement with search_path pinned to pg_catalog (pg-read PIN_SEARCH_PATH), so
 * an unqualified name resolves in the catalog only.
 *
 * Without the pin, `lower(id)` with `id` an integer picked the customer's `public.lower(integer)`
 * (pg_catalog has only lower(text) and lower(anyrange)), and `id || id` the customer's
 * `public.||(integer, integer)`, and `id #~# id` an operator of the customer's own name (the
checker lets any unqualified operator through: the catalog decides what it means): each body read a table outside the scopes, with the credential
 * role's rights, and its rows came back in a 200.
 */
import t from 'tap';
import pg from 'pg';
import { customerDatabase, postgresAgent, type CustomerDatabase } from '../helpers/customer-db.js';
import { executorSession } from '../helpers/executor-session.js';
import { api, openConnection, startServer, type TestServer } from '../helpers/server.js';

const SECRET = 'top secret, never in scope';

let db: CustomerDatabase;
let srv: TestServer;

t.before(async () => {
  db = await customerDatabase('svc_live_fn');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query('CREATE TABLE orders (id int PRIMARY KEY, note text)');
  await c.query("INSERT INTO orders VALUES (1, 'a'), (2, 'b')");
  await c.query('CREATE TABLE secrets (id int, value text)');
  await c.query('INSERT INTO secrets VALUES (1, $1)', [SECRET]);
  // an allowed function name with a signature the catalog lacks, and an operator likewise
  await c.query('CREATE FUNCTION public.lower(integer) RETURNS text LANGUAGE sql AS $$ SELECT value FROM public.secrets LIMIT 1 $$');
  await c.query('CREATE FUNCTION public.leak(integer, integer) RETURNS text LANGUAGE sql AS $$ SELECT value FROM public.secrets LIMIT 1 $$');
  await c.query('CREATE OPERATOR public.|| (leftarg = integer, rightarg = integer, function = public.leak)');
  await c.query('CREATE OPERATOR public.#~# (leftarg = integer, rightarg = integer, function = public.leak)');
  await c.end();
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
});
t.teardown(async () => {
  await srv?.close();
  await db?.drop();
});

const STATEMENTS = ['SELECT lower(id) AS v FROM orders', 'SELECT id || id AS v FROM orders', 'SELECT id #~# id AS v FROM orders'];

t.test('the postgres target: the customer’s function and operator are not found, nothing outside the scopes comes back', async (t) => {
  const a = await postgresAgent(srv.url, db.url);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.orders']);
  for (const sql of STATEMENTS) {
    const r = await api<{ error?: { code: string; message: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
    t.equal(r.status, 400, `${sql}: refused by the database (${r.text})`);
    t.match(r.body.error?.message ?? '', /does not exist/, 'the catalog has no such function or operator');
    t.notMatch(r.text, /top secret/, 'the body of the customer’s function never ran');
  }
  // the catalog's own still resolve unqualified
  const ok = await api<{ rows: { v: string }[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: "SELECT lower(note || 'X') AS v FROM orders ORDER BY id" } });
  t.equal(ok.status, 200, ok.text);
  t.same(ok.body.rows, [{ v: 'ax' }, { v: 'bx' }]);
});

t.test('svc-relay’s executor: the same, whatever statement the control plane sends', async (t) => {
  const { server } = executorSession(t, { databaseUrl: db.url, poolSize: 1 });
  await server.ready;
  // (the control plane sends every table with its schema: with the pin, an unqualified one is looked up in pg_catalog)
  for (const statement of STATEMENTS.map((s) => s.replace('FROM orders', 'FROM public.orders'))) {
    const out = await server.openStream({ statement }).collect().then(
      (r) => ({ rows: JSON.stringify(r.rows) }),
      (e: unknown) => ({ error: e instanceof Error ? e.message : String(e) }),
    );
    t.match(out, { error: /does not exist/ }, `${statement}: refused by the database`);
    t.notMatch(JSON.stringify(out), /top secret/);
  }
  const ok = await server.openStream({ statement: "SELECT lower(note || 'X') AS v FROM public.orders ORDER BY id" }).collect();
  t.same(ok.rows, [['ax'], ['bx']]);
});
