/**
 * System schemas can never be read through any scope (issue #12, point 2), and a table's qualified
 * and unqualified names behave the same in every scope kind:
 * - at creation: a scope naming pg_catalog / information_schema / pg_toast / pg_temp* /
 *   pg_toast_temp* (postgres, postgres-relay) or mysql / information_schema / performance_schema /
 *   sys (mysql), in any letter case, is `400 invalid_scope`;
 * - at query time, regardless of scopes: the resolver refuses system schemas before it looks up
 *   the allowed tables (a policy that does list a catalog table still cannot read it), and an
 *   unqualified scope such as `read:pg_authid` reads `public.pg_authid`, never the catalog;
 * - end to end against a real PostgreSQL with a live `postgres` credential: pg_authid, pg_shadow,
 *   pg_stat_activity, pg_settings, information_schema.tables, pg_toast, mixed case and quoted names.
 * - a harmless expression the deparser cannot reproduce is `400 invalid_sql` (`unsupported`) when
 *   the statement is deparsed (not spliced, splice.ts).
 */
import t, { type Test } from 'tap';
import pg from 'pg';
import { Catalogue, parseScopes, type ParsedScopes } from '../../control-plane/catalogue/index.js';
import { relayPolicy } from '../../control-plane/query/relay.js';
import { checkAndRewrite, initSqlParser, SqlPolicyError, type SqlPolicy } from '../../control-plane/query/sql/index.js';
import { api, freshDatabase, openConnection, realPostgresAvailable, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import { viaTree } from './sql-cases.js';

await initSqlParser();
const catalogue = new Catalogue();
const target = (id: string) => {
  const x = catalogue.target(id);
  if (!x) throw new Error(`no target ${id}`);
  return x;
};

const PG_SYSTEM_SCOPES = [
  'read:pg_catalog.pg_authid',
  'read:PG_CATALOG.pg_shadow',
  'read:Pg_Catalog.Pg_Authid',
  'read:pg_catalog.pg_stat_activity',
  'read:pg_catalog.pg_settings',
  'read:information_schema.tables',
  'read:INFORMATION_SCHEMA.columns',
  'read:pg_toast.pg_toast_1262',
  'read:pg_temp.t',
  'read:pg_temp_3.t',
  'read:pg_toast_temp_3.t',
  'filter:pg_catalog.pg_authid.rolname=postgres',
];
const MYSQL_SYSTEM_SCOPES = ['read:mysql.user', 'read:MySQL.user', 'read:information_schema.tables', 'read:Information_Schema.TABLES', 'read:performance_schema.threads', 'read:SYS.processlist', 'filter:mysql.user.User=root'];

const refusal = (f: () => unknown): SqlPolicyError => {
  try {
    f();
  } catch (err) {
    if (err instanceof SqlPolicyError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
};

t.test('a scope naming a system schema is invalid_scope, in any letter case (parser level)', async (t) => {
  for (const id of ['postgres', 'postgres-relay']) {
    for (const s of PG_SYSTEM_SCOPES) {
      const scopes = [...(id === 'postgres-relay' ? ['relay:rly_x'] : []), s.startsWith('filter:') ? 'read:pg_catalog.pg_authid' : 'read:public.orders', s];
      t.throws(() => parseScopes(target(id), scopes), { code: 'invalid_scope' }, `${id}: ${s}`);
    }
  }
  for (const s of MYSQL_SYSTEM_SCOPES) t.throws(() => parseScopes(target('mysql'), ['read:orders', s]), { code: 'invalid_scope' }, `mysql: ${s}`);
  // ordinary schemas are fine, including ones that merely contain a system name
  t.doesNotThrow(() => parseScopes(target('postgres'), ['read:public.pg_authid_copy', 'read:sales.orders', 'read:information_schemas.x']));
  t.doesNotThrow(() => parseScopes(target('mysql'), ['read:shop.orders', 'read:mysqlx.t', 'read:system.t']));
});

t.test('the resolver refuses system schemas before it looks at the allowed tables (defence in depth)', async (t) => {
  // a policy that lists catalog tables (as a connection created before the check would have)
  const entry = (name: string, schema: string, table: string) => [name, { name, schema, table, predicate: null }] as const;
  const policy: SqlPolicy = {
    allowed: new Map([
      entry('pg_catalog.pg_authid', 'pg_catalog', 'pg_authid'),
      entry('pg_authid', 'pg_catalog', 'pg_authid'),
      entry('information_schema.tables', 'information_schema', 'tables'),
      entry('PG_CATALOG.pg_shadow', 'PG_CATALOG', 'pg_shadow'),
    ]),
    known: [],
    schemas: [],
  };
  for (const sql of [
    'SELECT rolname, rolpassword FROM pg_catalog.pg_authid',
    'SELECT * FROM pg_authid',
    'SELECT * FROM information_schema.tables',
    'SELECT * FROM "PG_CATALOG".pg_shadow',
    'SELECT * FROM "PG_CATALOG".Pg_Authid',
  ]) {
    const e = refusal(() => checkAndRewrite(sql, policy));
    t.equal(e.code, 'scope_violation', sql);
    t.equal(e.detail.reason, 'system_catalog', `${sql}: ${e.message}`);
  }
  // the relay / postgres policy never turns a system-schema scope into a readable table
  const forged: ParsedScopes = { read: new Set(['pg_catalog.pg_authid', 'pg_toast.pg_toast_1262', 'orders']), periods: [], relay: undefined, filters: [], normalized: [] };
  const rp = relayPolicy(forged);
  t.notOk(rp.allowed.has('pg_catalog.pg_authid'));
  t.notOk(rp.allowed.has('pg_authid'));
  for (const sql of ['SELECT * FROM pg_catalog.pg_authid', 'SELECT * FROM pg_authid', 'SELECT * FROM pg_toast.pg_toast_1262', 'SELECT * FROM Pg_Toast.pg_toast_1262']) {
    t.equal(refusal(() => checkAndRewrite(sql, rp)).detail.reason, 'system_catalog', sql);
  }
});

t.test('an unqualified scope is read through its own schema, never through search_path', async (t) => {
  const p = relayPolicy(parseScopes(target('postgres'), ['read:pg_authid', 'read:pg_settings']));
  t.equal(checkAndRewrite('SELECT * FROM pg_authid', p).sql, 'SELECT * FROM "public"."pg_authid" AS "pg_authid"');
  t.equal(checkAndRewrite('SELECT name FROM pg_settings s', p).sql, 'SELECT name FROM "public"."pg_settings" s');
  t.equal(viaTree(() => checkAndRewrite('SELECT name FROM pg_settings s', p)).sql, 'SELECT name FROM public.pg_settings AS s');
  t.equal(refusal(() => checkAndRewrite('SELECT * FROM pg_catalog.pg_authid', p)).detail.reason, 'system_catalog');
});

t.test('qualified and unqualified names of one table behave the same in read: and filter: scopes', async (t) => {
  const pgT = target('postgres');
  const variants = [
    ['read:orders', 'filter:public.orders.region=eu'],
    ['read:orders', 'filter:orders.region=eu'],
    ['read:public.orders', 'filter:orders.region=eu'],
    ['read:public.orders', 'filter:public.orders.region=eu'],
    ['read:Public.Orders', 'filter:PUBLIC.ORDERS.region=eu'],
  ];
  for (const scopes of variants) {
    const p = relayPolicy(parseScopes(pgT, scopes));
    for (const sql of ['SELECT * FROM orders', 'SELECT * FROM public.orders']) {
      const r = checkAndRewrite(sql, p);
      t.equal(r.sql, "SELECT * FROM (SELECT * FROM public.orders WHERE region = 'eu' OFFSET 0) AS \"orders\"", `${scopes.join(' ')}: ${sql}`);
      t.equal(viaTree(() => checkAndRewrite(sql, p)).sql, "SELECT * FROM ( SELECT * FROM public.orders WHERE region = 'eu' OFFSET 0 ) AS orders", `${scopes.join(' ')}: ${sql}, deparsed`);
      t.same(r.tables, ['public.orders']);
    }
  }
  // an unqualified name means public.<name>, as in the scopes, also when another schema has one too
  const twoSchemas = relayPolicy(parseScopes(pgT, ['read:orders', 'read:sales.orders']));
  t.equal(checkAndRewrite('SELECT * FROM orders', twoSchemas).sql, 'SELECT * FROM "public"."orders" AS "orders"');
  t.equal(checkAndRewrite('SELECT * FROM sales.orders', twoSchemas).sql, 'SELECT * FROM "sales"."orders" AS "orders"');
  t.equal(checkAndRewrite('SELECT * FROM orders', relayPolicy(parseScopes(pgT, ['read:sales.orders']))).sql, 'SELECT * FROM "sales"."orders" AS "orders"', 'the one scoped table of that name');
  // a table outside the scopes, qualified with a schema that IS readable: not "use unqualified names"
  const p = relayPolicy(parseScopes(pgT, ['read:public.orders']));
  const e = refusal(() => checkAndRewrite('SELECT * FROM public.customers', p));
  t.equal(e.code, 'scope_violation');
  t.notMatch(e.message, /schema public is not readable|use unqualified table names/, e.message);
  t.equal(refusal(() => checkAndRewrite('SELECT * FROM customers', p)).detail.reason, e.detail.reason, 'the same answer for both spellings');
  const other = refusal(() => checkAndRewrite('SELECT * FROM sales.orders', p));
  t.equal(other.detail.reason, 'schema_not_allowed');
  t.match(other.message, /qualified only with public/);
  // mysql: an unqualified table means the credential's database, unknown here; same spelling required
  t.doesNotThrow(() => parseScopes(target('mysql'), ['read:orders', 'filter:orders.region=eu']));
  t.doesNotThrow(() => parseScopes(target('mysql'), ['read:shop.orders', 'filter:shop.orders.region=eu']));
  t.throws(() => parseScopes(target('mysql'), ['read:orders', 'filter:shop.orders.region=eu']), { code: 'invalid_scope', message: /as the read: scope does; write filter:orders\.region=… or read:shop\.orders/ });
});

t.test('a harmless expression the rewriter cannot reproduce is invalid_sql (unsupported), not a scope violation', async (t) => {
  const p = relayPolicy(parseScopes(target('postgres'), ['read:orders']));
  // deparsed (a comment: the text splice does not take it, splice.ts)
  for (const sql of ['SELECT (ARRAY[ROW(1,2)])[1] -- x', 'SELECT (ARRAY[1,2])[1] FROM orders /* x */']) {
    const e = refusal(() => checkAndRewrite(sql, p));
    t.equal(e.code, 'invalid_sql', sql);
    t.equal(e.detail.reason, 'unsupported', sql);
    t.match(e.message, /not supported/);
  }
});

// ---------------------------------------------------------------------------------------------
// end to end: a real PostgreSQL through the HTTP API

interface QueryBody {
  rows: Record<string, unknown>[];
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

if (!(await realPostgresAvailable())) {
  t.skip('end to end on PostgreSQL: no PostgreSQL answers at TEST_DATABASE_URL (127.0.0.1:5432)', () => undefined);
} else {
  let srv: TestServer;
  let db: { url: string; drop: () => Promise<void> };
  t.before(async () => {
    db = await freshDatabase('svc_sysschema');
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    await c.query('CREATE TABLE orders (id int PRIMARY KEY, tenant_id int NOT NULL)');
    await c.query('INSERT INTO orders SELECT g, g % 10 FROM generate_series(1, 50) g');
    await c.end();
    srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
  });
  t.teardown(async () => {
    await srv?.close();
    await db?.drop();
  });

  const agent = async (): Promise<string> => {
    const a = await signupAgent(srv.url);
    const secret = `${db.url}${db.url.includes('?') ? '&' : '?'}sslmode=disable`;
    const r = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret } });
    if (r.status !== 201) throw new Error(`credential: ${r.status} ${r.text}`);
    return a.key;
  };
  const query = (key: string, conn: string, sql: string) => api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql } });
  /** nothing of a catalog came back: no role password hash, no other session, no setting */
  const noCatalogData = (t: Test, text: string, what: string): void => {
    t.notMatch(text, /SCRAM-SHA-256|md5[0-9a-f]{32}|rolpassword"\s*:\s*"|"passwd"\s*:\s*"|backend_start|"setting"\s*:/, `${what}: no catalog data in the answer`);
  };

  t.test('POST /v1/connections refuses system-schema scopes (postgres, postgres-relay, mysql)', async (t) => {
    const key = await agent();
    const create = (target_id: string, scopes: string[]) => api<QueryBody>(srv.url, 'POST', '/v1/connections', { key, body: { target_id, scopes, ttl_seconds: 600 } });
    for (const s of PG_SYSTEM_SCOPES) {
      const base = s.startsWith('filter:') ? 'read:pg_catalog.pg_authid' : 'read:public.orders';
      for (const [id, extra] of [['postgres', []], ['postgres-relay', ['relay:rly_doesnotexist']]] as const) {
        const r = await create(id, [...extra, base, s]);
        t.equal(r.status, 400, `${id} ${s}: ${r.text}`);
        t.equal(r.body.error?.code, 'invalid_scope', `${id} ${s}`);
        t.match(r.body.error?.message ?? '', /system schema/, `${id} ${s}: says why`);
      }
    }
    for (const s of MYSQL_SYSTEM_SCOPES) {
      const r = await create('mysql', ['read:orders', s]);
      t.equal(r.status, 400, `mysql ${s}: ${r.text}`);
      t.equal(r.body.error?.code, 'invalid_scope', `mysql ${s}`);
    }
  });

  t.test('catalogs are never readable at query time, in any spelling', async (t) => {
    const key = await agent();
    const conn = await openConnection(srv.url, key, 'postgres', ['read:orders']);
    const ok = await query(key, conn, 'SELECT count(*)::int AS n FROM public.orders');
    t.equal(ok.status, 200, ok.text);
    for (const sql of [
      'SELECT rolname, rolpassword FROM pg_catalog.pg_authid',
      'SELECT rolname, rolpassword FROM pg_authid',
      'SELECT usename, passwd FROM pg_catalog.pg_shadow',
      'SELECT * FROM pg_shadow',
      'SELECT query FROM pg_catalog.pg_stat_activity',
      'SELECT name, setting FROM pg_catalog.pg_settings',
      'SELECT * FROM pg_catalog.pg_hba_file_rules',
      'SELECT * FROM pg_catalog.pg_file_settings',
      'SELECT datname FROM pg_catalog.pg_database',
      'SELECT * FROM information_schema.tables',
      'SELECT * FROM INFORMATION_SCHEMA.TABLES',
      'SELECT * FROM "information_schema"."tables"',
      'SELECT * FROM pg_toast.pg_toast_1262',
      'SELECT * FROM "PG_CATALOG".Pg_Authid',
      'SELECT * FROM "pg_catalog"."pg_authid"',
      'SELECT * FROM PG_CATALOG.PG_AUTHID',
      'SELECT * FROM pg_temp.orders',
      'SELECT * FROM orders o JOIN pg_catalog.pg_authid a ON true',
      'SELECT (SELECT rolpassword FROM pg_catalog.pg_authid LIMIT 1) FROM orders',
      'WITH x AS (SELECT * FROM pg_catalog.pg_shadow) SELECT * FROM x',
    ]) {
      const r = await query(key, conn, sql);
      t.equal(r.status, 403, `${sql}: ${r.text.slice(0, 200)}`);
      t.equal(r.body.error?.code, 'scope_violation', sql);
      noCatalogData(t, r.text, sql);
    }
  });

  t.test('an unqualified scope named like a catalog reads public.<name>, never the catalog', async (t) => {
    const key = await agent();
    const conn = await openConnection(srv.url, key, 'postgres', ['read:pg_authid', 'read:pg_shadow']);
    // no public.pg_authid yet: the database says so; the catalog is not read through search_path
    const missing = await query(key, conn, 'SELECT rolname, rolpassword FROM pg_authid');
    t.equal(missing.status, 400, missing.text);
    t.match(missing.body.error?.message ?? '', /does not exist/);
    noCatalogData(t, missing.text, 'missing decoy');
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    await c.query(`CREATE TABLE public.pg_authid (rolname text, rolpassword text); INSERT INTO public.pg_authid VALUES ('decoy', 'not-a-hash')`);
    await c.end();
    const decoy = await query(key, conn, 'SELECT rolname, rolpassword FROM pg_authid');
    t.equal(decoy.status, 200, decoy.text);
    t.same(decoy.body.rows, [{ rolname: 'decoy', rolpassword: 'not-a-hash' }], 'the public table, not pg_catalog.pg_authid');
  });

  t.test('a connection stored with a catalog scope (before creation refused it) still cannot read it', async (t) => {
    const key = await agent();
    const conn = await openConnection(srv.url, key, 'postgres', ['read:orders']);
    await srv.svc.services.store.query('UPDATE connections SET scopes = $1 WHERE id = $2', [JSON.stringify(['read:pg_catalog.pg_authid', 'read:information_schema.tables', 'read:orders']), conn]);
    for (const sql of ['SELECT rolname, rolpassword FROM pg_catalog.pg_authid', 'SELECT * FROM information_schema.tables']) {
      const r = await query(key, conn, sql);
      t.ok(r.status === 400 || r.status === 403, `${sql}: refused (${r.status}) ${r.text.slice(0, 200)}`);
      t.not(r.status, 200);
      noCatalogData(t, r.text, sql);
    }
  });

  t.test('qualified and unqualified names answer alike over HTTP; unsupported expressions are 400', async (t) => {
    const key = await agent();
    for (const scopes of [
      ['read:orders', 'filter:public.orders.tenant_id=7'],
      ['read:orders', 'filter:orders.tenant_id=7'],
      ['read:public.orders', 'filter:orders.tenant_id=7'],
    ]) {
      const conn = await openConnection(srv.url, key, 'postgres', scopes);
      for (const sql of ['SELECT count(*)::int AS n FROM orders', 'SELECT count(*)::int AS n FROM public.orders']) {
        const r = await query(key, conn, sql);
        t.equal(r.status, 200, `${scopes.join(' ')} ${sql}: ${r.text}`);
        t.same(r.body.rows, [{ n: 5 }], `${scopes.join(' ')} ${sql}: only tenant 7`);
      }
    }
    const conn = await openConnection(srv.url, key, 'postgres', ['read:public.orders']);
    const other = await query(key, conn, 'SELECT * FROM public.secrets');
    t.equal(other.status, 403);
    t.notMatch(other.body.error?.message ?? '', /use unqualified table names/);
    const arr = await query(key, conn, 'SELECT (ARRAY[ROW(1,2)])[1] -- deparsed');
    t.equal(arr.status, 400, arr.text);
    t.equal(arr.body.error?.code, 'invalid_sql');
    t.equal(arr.body.error?.details?.['reason'], 'unsupported');
  });
}
