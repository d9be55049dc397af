/**
 * PostgreSQL tables and columns whose names have capital letters (as ORMs such as Prisma create
 * them: "User", "Order"), end to end on `postgres` and `postgres-relay`: the real control plane, a
 * customer PostgreSQL (real, or PGlite over the wire), and a real svc-relay.
 *
 * A scope names them as SQL does, double-quoted (`read:public."Sales"`,
 * `filter:"Sales"."Region"=eu`); an unquoted name folds to lower case as in SQL, so `read:Sales`
 * is the table `sales`. Before, a quoted scope was `400 invalid_scope` and such a table could not
 * be read at all.
 */
import pg from 'pg';
import t from 'tap';
import { customerDatabase, postgresAgent, type CustomerDatabase } from '../helpers/customer-db.js';
import { startRelay, type TestRelay } from '../helpers/relay.js';
import { api, startServer, type Agent, type TestServer } from '../helpers/server.js';

interface Body {
  rows: Record<string, unknown>[];
  scope_applied: { tables_allowed: string[]; tables_read: string[]; row_filters: Record<string, string | null> };
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

let srv: TestServer;
let db: CustomerDatabase;
let relay: TestRelay | undefined;
let agent: Agent;

t.before(async () => {
  db = await customerDatabase('svc_quoted_names');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query(`CREATE TABLE "Sales" (id int PRIMARY KEY, "Region" text NOT NULL, amount int);
    INSERT INTO "Sales" SELECT g, CASE WHEN g % 4 = 0 THEN 'eu' ELSE 'us' END, g FROM generate_series(1, 20) g;
    CREATE TABLE sales (id int, note text); INSERT INTO sales VALUES (1, 'the lower-case table');
    CREATE SCHEMA "Reports"; CREATE TABLE "Reports"."Daily Totals" (day int, total int); INSERT INTO "Reports"."Daily Totals" VALUES (1, 100);
    CREATE SCHEMA "user"; CREATE TABLE "user".accounts (id int); INSERT INTO "user".accounts VALUES (1), (2);
    CREATE TABLE "order" (id int); INSERT INTO "order" VALUES (1);`);
  await c.end();
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
  agent = await postgresAgent(srv.url, db.url);
  relay = await startRelay(srv, agent.key, db.url, { name: 'quoted-db' });
});
t.teardown(async () => {
  await relay?.close();
  await srv?.close();
  await db?.drop();
});

const query = (conn: string, sql: string) => api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql } });
const connect = (target: string, scopes: string[]) =>
  api<{ connectionId: string; error?: { code: string; message: string } }>(srv.url, 'POST', '/v1/connections', {
    key: agent.key,
    body: { target_id: target, scopes: target === 'postgres-relay' ? [`relay:${relay?.relayId ?? ''}`, ...scopes] : scopes },
  });
const TARGETS = ['postgres', 'postgres-relay'];

t.test('a double-quoted scope reads the table of that exact name, in SQL written either way', async (t) => {
  for (const id of TARGETS) {
    for (const read of ['read:"Sales"', 'read:public."Sales"', 'read:PUBLIC."Sales"']) {
      const conn = await connect(id, [read]);
      t.equal(conn.status, 201, `${id} ${read}: ${JSON.stringify(conn.body.error)}`);
      for (const from of ['"Sales"', 'public."Sales"']) {
        const r = await query(conn.body.connectionId, `SELECT count(*)::int AS n FROM ${from}`);
        t.equal(r.status, 200, `${id} ${read} FROM ${from}: ${JSON.stringify(r.body.error)}`);
        t.same(r.body.rows, [{ n: 20 }], `${id} ${read} FROM ${from}: the rows of "Sales"`);
        t.same(r.body.scope_applied.tables_allowed, ['public."Sales"'], 'named as SQL spells it');
        t.same(r.body.scope_applied.tables_read, ['public."Sales"']);
      }
      // unquoted, the name folds to lower case: the table sales, which is not in the scopes
      const folded = await query(conn.body.connectionId, 'SELECT * FROM Sales');
      t.equal(folded.status, 403, `${id} ${read}: Sales unquoted is sales`);
      t.equal(folded.body.error?.details?.['reason'], 'table_not_in_scope');
      t.match(folded.body.error?.message ?? '', /readable tables: public\."Sales"$/, 'the refusal names the readable table as SQL spells it');
    }
    // an unquoted scope folds likewise: read:Sales is the lower-case table
    const lower = await connect(id, ['read:Sales']);
    t.equal(lower.status, 201);
    const r = await query(lower.body.connectionId, 'SELECT note FROM sales');
    t.same(r.body.rows, [{ note: 'the lower-case table' }], `${id}: read:Sales reads sales`);
    t.equal((await query(lower.body.connectionId, 'SELECT count(*) FROM "Sales"')).status, 403, `${id}: and not "Sales"`);
  }
});

t.test('a filter on a quoted table and column; a quoted schema and a name with a space', async (t) => {
  for (const id of TARGETS) {
    for (const filter of ['filter:"Sales"."Region"=eu', 'filter:public."Sales"."Region"=eu']) {
      const conn = await connect(id, ['read:"Sales"', filter]);
      t.equal(conn.status, 201, `${id} ${filter}: ${JSON.stringify(conn.body.error)}`);
      const r = await query(conn.body.connectionId, 'SELECT count(*)::int AS n, min("Region") AS lo, max("Region") AS hi FROM "Sales"');
      t.equal(r.status, 200, JSON.stringify(r.body.error));
      t.same(r.body.rows, [{ n: 5, lo: 'eu', hi: 'eu' }], `${id} ${filter}: only the filtered rows`);
      t.match(r.body.scope_applied.row_filters['public."Sales"'], /"Region" = 'eu'/);
    }
    const reports = await connect(id, ['read:"Reports"."Daily Totals"']);
    t.equal(reports.status, 201, JSON.stringify(reports.body.error));
    const r = await query(reports.body.connectionId, 'SELECT total FROM "Reports"."Daily Totals"');
    t.equal(r.status, 200, JSON.stringify(r.body.error));
    t.same(r.body.rows, [{ total: 100 }]);
    t.same(r.body.scope_applied.tables_read, ['"Reports"."Daily Totals"']);
    // a filter whose table is not read-scoped says what to write, quoted
    const bad = await connect(id, ['read:sales', 'filter:"Sales"."Region"=eu']);
    t.equal(bad.status, 400);
    t.match(bad.body.error?.message ?? '', /filter on public\."Sales" needs read:public\."Sales"/);
  }
});

t.test('the schema listing names the table as SQL spells it, with its columns', async (t) => {
  for (const id of TARGETS) {
    const conn = await connect(id, ['read:public."Sales"', 'read:"Reports"."Daily Totals"', 'read:"Missing"']);
    const r = await api<{ tables: { name: string; columns: { name: string }[] }[]; missing_tables: string[] }>(srv.url, 'GET', `/v1/connections/${conn.body.connectionId}/schema`, { key: agent.key });
    t.equal(r.status, 200, r.text);
    t.same(
      r.body.tables.map((x) => [x.name, x.columns.map((c) => c.name)]),
      [
        ['public."Sales"', ['id', 'Region', 'amount']],
        ['"Reports"."Daily Totals"', ['day', 'total']],
      ],
      id,
    );
    t.same(r.body.missing_tables, ['public."Missing"'], `${id}: a scoped table the database lacks`);
  }
});

t.test('a schema named as an SQL keyword: the name svc answers with is one SQL reads back', async (t) => {
  // `user.accounts` is a syntax error (user is reserved, as are order, select, left …), while
  // after the dot any keyword reads as a name (`public.order`)
  for (const id of TARGETS) {
    const conn = await connect(id, ['read:"user".accounts', 'read:"order"']);
    t.equal(conn.status, 201, JSON.stringify(conn.body.error));
    const r = await query(conn.body.connectionId, 'SELECT count(*)::int AS n FROM "user".accounts');
    t.equal(r.status, 200, JSON.stringify(r.body.error));
    t.same(r.body.scope_applied.tables_allowed, ['"user".accounts', 'public.order'], `${id}: the reserved word quoted where it starts the name`);
    t.same(r.body.scope_applied.tables_read, ['"user".accounts']);
    // each name as svc answers it, written back in SQL as it is
    for (const name of r.body.scope_applied.tables_allowed) {
      const back = await query(conn.body.connectionId, `SELECT count(*)::int AS n FROM ${name}`);
      t.equal(back.status, 200, `${id}: ${name} as svc names it: ${JSON.stringify(back.body.error)}`);
    }
    const listing = await api<{ tables: { name: string }[] }>(srv.url, 'GET', `/v1/connections/${conn.body.connectionId}/schema`, { key: agent.key });
    t.same(listing.body.tables.map((x) => x.name), ['"user".accounts', 'public.order'], `${id}: the schema listing likewise`);
  }
});

t.test('malformed quoted scopes are invalid_scope and say how to write one', async (t) => {
  for (const scope of ['read:"Sales', 'read:""', 'read:"Sa.les"', 'read:"Sa""les"', 'read:"a"b', 'read:a."b".c', 'read:"tab\tle"', `read:"${'x'.repeat(64)}"`, 'read:"pg_catalog".pg_authid', 'filter:"Sales"=eu', 'filter:"Sales"."Region"', 'filter:"Sales"."Region"=a\nb']) {
    const r = await connect('postgres', ['read:"Sales"', scope]);
    t.equal(r.status, 400, `${JSON.stringify(scope)}: ${r.status}`);
    t.equal(r.body.error?.code, 'invalid_scope', JSON.stringify(scope));
  }
  const longest = await connect('postgres', [`read:"${'é'.repeat(31)}x"`]);
  t.equal(longest.status, 201, '63 bytes is PostgreSQL’s longest name');
  const over = await connect('postgres', [`read:"${'é'.repeat(32)}"`]);
  t.equal(over.status, 400, '64 bytes is over it (PostgreSQL would cut it)');
  const hint = await connect('postgres', ['read:"Sales']);
  t.match(hint.body.error?.message ?? '', /written in double quotes, as in SQL \(read:public\."Sales"\)/);
});
