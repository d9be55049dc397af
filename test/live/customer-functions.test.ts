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
 *
 * The statements of our own that run before the pin or after the transaction (the timeout's
 * set_config, the release of session locks after a failed statement) name their functions with
 * pg_catalog: on a database whose search_path lists `public, pg_catalog`, a customer's
 * `public.set_config(text, text, boolean)` was chosen over the catalog's (every read failed with
 * its error), and its `public.pg_advisory_unlock_all()` ran outside any transaction, free to write.
 */
import t from 'tap';
import pg from 'pg';
import { customerDatabase, postgresAgent, type CustomerDatabase } from '../helpers/customer-db.js';
import { executorSession } from '../helpers/executor-session.js';
import { api, openConnection, startServer, type TestServer } from '../helpers/server.js';

const SECRET = 'top secret, never in scope';

let db: CustomerDatabase;
/** search_path `public, pg_catalog`, with customer functions named as the catalog's that ours call */
let shadowed: CustomerDatabase;
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
  shadowed = await customerDatabase('svc_live_fn_path');
  const d = new pg.Client({ connectionString: shadowed.url });
  await d.connect();
  await d.query('CREATE TABLE orders (id int PRIMARY KEY, note text)');
  await d.query("INSERT INTO orders VALUES (1, 'a')");
  await d.query('CREATE TABLE calls (what text)');
  await d.query("CREATE FUNCTION public.set_config(text, text, boolean) RETURNS text LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the customer''s set_config ran'; END $$");
  await d.query("CREATE FUNCTION public.pg_advisory_unlock_all() RETURNS void LANGUAGE sql AS $$ INSERT INTO public.calls VALUES ('unlock') $$");
  await d.query("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = public, pg_catalog', current_database()); END $$");
  await d.end();
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
});
t.teardown(async () => {
  await srv?.close();
  await db?.drop();
  await shadowed?.drop();
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

/** what the customer's pg_advisory_unlock_all() recorded */
async function calls(): Promise<number> {
  const c = new pg.Client({ connectionString: shadowed.url });
  await c.connect();
  try {
    return (await c.query<{ n: number }>('SELECT count(*)::int AS n FROM public.calls')).rows[0]?.n ?? -1;
  } finally {
    await c.end();
  }
}

t.test('on a search_path of public, pg_catalog, our own set_config and lock release are the catalog’s', async (t) => {
  const a = await postgresAgent(srv.url, shadowed.url);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.orders']);
  const ask = (sql: string) => api<{ rows?: unknown[]; error?: { message: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
  const ok = await ask('SELECT id, note FROM orders');
  t.equal(ok.status, 200, `the statement ran (${ok.text})`);
  t.same(ok.body.rows, [{ id: 1, note: 'a' }]);
  // a failed statement: the locks are released after the ROLLBACK, outside the transaction
  const failed = await ask('SELECT 1 / (id - id) AS v FROM orders');
  t.equal(failed.status, 400, failed.text);
  t.match(failed.body.error?.message ?? '', /division by zero/);
  t.equal((await ask('SELECT count(*)::int AS n FROM orders')).status, 200, 'the pooled connection still serves');

  const { server } = executorSession(t, { databaseUrl: shadowed.url, poolSize: 1 });
  await server.ready;
  t.same((await server.openStream({ statement: 'SELECT id FROM public.orders' }).collect()).rows, [[1]], 'the relay executor: the statement ran');
  const out = await server.openStream({ statement: 'SELECT 1 / (id - id) FROM public.orders' }).collect().then(
    () => 'answered',
    (e: unknown) => (e instanceof Error ? e.message : String(e)),
  );
  t.match(out, /division by zero/, 'the relay executor: the statement failed');
  t.same((await server.openStream({ statement: 'SELECT count(*)::int FROM public.orders' }).collect()).rows, [[1]], 'and its connection still serves');
  t.equal(await calls(), 0, 'the customer’s pg_advisory_unlock_all() never ran');
});
