/**
 * The schema listing of a PostgreSQL connection (`GET /v1/connections/{id}/schema`) on a database
 * whose sessions run with `standard_conforming_strings = off`, on `postgres` and `postgres-relay`
 * (a real control plane, a real svc-relay).
 *
 * The listing's catalog statement is svc's own text, sent without the checker (query/schema.ts
 * postgresCatalogSql), and it writes each scoped name as a string literal. Since quoted scopes
 * (`read:public."Sales"`) a name may hold a backslash and a single quote; written as a plain
 * literal, `'…\''…'` reads differently with standard_conforming_strings off: the backslash escaped
 * the quote, the rest of the name became SQL. A scope `read:"\')) OR (SELECT secret FROM
 * vault)::int=0 --"` then ran its own subquery on a table outside the scopes (the catalogs too,
 * and functions outside the checker's allow-list) and the database's error answered with the
 * secret; a table whose name holds a backslash was reported missing.
 */
import pg from 'pg';
import t from 'tap';
import { customerDatabase, postgresAgent, type CustomerDatabase } from '../helpers/customer-db.js';
import { startRelay, type TestRelay } from '../helpers/relay.js';
import { api, startServer, type Agent, type TestServer } from '../helpers/server.js';

const SECRET = '4242 never listed';

let srv: TestServer;
let db: CustomerDatabase;
let relay: TestRelay | undefined;
let agent: Agent;

t.before(async () => {
  db = await customerDatabase('svc_catalog_literals');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  // (analyzed: pg_stats then shows the secret, to every role that may read vault)
  await c.query(`CREATE TABLE vault (secret text); INSERT INTO vault SELECT '${SECRET}' FROM generate_series(1, 3); ANALYZE vault;
    CREATE TABLE "back\\slash" (id int, "it's" text);`);
  // the setting every later session of the database starts with (svc's, the relay's)
  await c.query("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET standard_conforming_strings = off', current_database()); END $$");
  await c.end();
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
  agent = await postgresAgent(srv.url, db.url);
  relay = await startRelay(srv, agent.key, db.url, { name: 'catalog-literals' });
});
t.teardown(async () => {
  await relay?.close();
  await srv?.close();
  await db?.drop();
});

const listing = async (target: string, scopes: string[]) => {
  const conn = await api<{ connectionId: string }>(srv.url, 'POST', '/v1/connections', {
    key: agent.key,
    body: { target_id: target, scopes: target === 'postgres-relay' ? [`relay:${relay?.relayId ?? ''}`, ...scopes] : scopes },
  });
  if (conn.status !== 201) throw new Error(conn.text);
  return api<{ tables: { name: string; columns: { name: string }[] }[]; missing_tables: string[] }>(srv.url, 'GET', `/v1/connections/${conn.body.connectionId}/schema`, { key: agent.key });
};

for (const target of ['postgres', 'postgres-relay']) {
  t.test(`${target}: a scoped name is one literal in the catalog statement, whatever standard_conforming_strings says`, async (t) => {
    // read as two literals that the backslash turned into SQL (a comment joins them):
    // … IN (VALUES ('\'',$$$$))OR(SELECT min(most_common_vals::text)/*', '*/FROM pg_stats WHERE …)::bool--'))
    const [schema, table] = [String.raw`\',$$$$))OR(SELECT min(most_common_vals::text)/*`, '*/FROM pg_stats WHERE tablename=$$vault$$)::bool--'];
    const hostile = await listing(target, [`read:"${schema}"."${table}"`]);
    t.notMatch(hostile.text, /4242/, 'the secret of a table outside the scopes is never in the answer');
    t.equal(hostile.status, 200, hostile.text);
    t.same(hostile.body.tables, [], 'no table of that name');
    t.same(hostile.body.missing_tables, [`"${schema}"."${table}"`]);

    const named = await listing(target, ['read:"back\\slash"']);
    t.equal(named.status, 200, named.text);
    t.same(
      named.body.tables.map((x) => [x.name, x.columns.map((c) => c.name)]),
      [['public."back\\slash"', ['id', "it's"]]],
      'a table whose name holds a backslash is listed, with its columns',
    );
    t.same(named.body.missing_tables, []);
  });
}
