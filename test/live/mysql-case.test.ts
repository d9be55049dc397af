/**
 * MySQL table names follow the server (issue #12, point 8): scopes keep their letter case, the
 * rewrite reads exactly the scoped name, and the agent's references are compared as the server
 * compares names (`@@lower_case_table_names`: 0 = case-sensitive, 1/2 = case-insensitive), read
 * once per connection. Also: system schemas in any letter case are refused at query time, and
 * parser errors name the construct instead of dumping the grammar.
 *
 * The server part runs against the MariaDB on 127.0.0.1:3306 (root, no password) when it answers;
 * the case-sensitive cases need `lower_case_table_names = 0` there.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import mysql from 'mysql2/promise';
import { Catalogue, parseScopes } from '../../control-plane/catalogue/index.js';
import { checkForServer } from '../../control-plane/live/mysql/index.js';
import { checkMysql } from '../../control-plane/live/mysql/check.js';
import { mysqlPolicy, nameCaseOf } from '../../control-plane/live/mysql/policy.js';
import type { PreparedLiveQuery } from '../../control-plane/live/types.js';
import { MysqlConnector } from '../../control-plane/live/mysql/index.js';
import { SqlChecker } from '../../control-plane/query/sql/offload.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

const mysqlTarget = new Catalogue().target('mysql');
if (!mysqlTarget) throw new Error('no mysql target');
const scopesOf = (s: string[]) => parseScopes(mysqlTarget, s);

const refusal = (f: () => unknown): { code: string; message: string; reason?: string; construct?: string; position?: number } => {
  try {
    f();
  } catch (err) {
    const e = err as { code: string; message: string; detail?: { reason?: string; construct?: string }; details?: { reason?: string }; position?: number };
    return { code: e.code, message: e.message, reason: e.detail?.reason ?? e.details?.reason, ...(e.detail?.construct ? { construct: e.detail.construct } : {}), ...(e.position !== undefined ? { position: e.position } : {}) };
  }
  throw new Error('expected a refusal');
};

t.test('scopes keep the letter case of MySQL names', async (t) => {
  const s = scopesOf(['read:shop.ORDERS', 'read:shop.orders', 'filter:shop.ORDERS.Region=EU']);
  t.same([...(s.read as Set<string>)], ['shop.ORDERS', 'shop.orders']);
  t.same(s.filters, [{ table: 'shop.ORDERS', column: 'Region', value: 'EU' }]);
  t.throws(() => scopesOf(['read:shop.orders', 'filter:shop.ORDERS.Region=EU']), { code: 'invalid_scope' }, 'a filter names its table exactly as read: does');
});

t.test('nameCaseOf follows @@lower_case_table_names', async (t) => {
  t.equal(nameCaseOf(0), 'exact');
  t.equal(nameCaseOf('0'), 'exact');
  t.equal(nameCaseOf(0n), 'exact');
  t.equal(nameCaseOf(1), 'fold');
  t.equal(nameCaseOf(2), 'fold');
  t.equal(nameCaseOf('1'), 'fold');
});

t.test('case-sensitive policy (lower_case_table_names = 0): each name reads its own table', async (t) => {
  const p = mysqlPolicy(scopesOf(['read:shop.ORDERS', 'read:shop.orders']), 'exact');
  t.match(checkMysql('SELECT * FROM shop.ORDERS', p).sql, /FROM `shop`\.`ORDERS` AS `ORDERS`$/);
  t.match(checkMysql('SELECT * FROM shop.orders', p).sql, /FROM `shop`\.`orders` AS `orders`$/);
  t.same(checkMysql('SELECT * FROM shop.ORDERS', p).tables, ['shop.ORDERS']);
  const only = mysqlPolicy(scopesOf(['read:shop.ORDERS']), 'exact');
  const e = refusal(() => checkMysql('SELECT * FROM shop.orders', only));
  t.equal(e.code, 'scope_violation');
  t.match(e.message, /case-sensitively/);
  t.equal(refusal(() => checkMysql('SELECT * FROM Shop.ORDERS', only)).code, 'scope_violation', 'database names too');
  t.match(checkMysql('SELECT * FROM ORDERS', only).sql, /`shop`\.`ORDERS`/, 'the unqualified name, exactly');
  t.equal(refusal(() => checkMysql('SELECT * FROM orders', only)).code, 'scope_violation');
  // a CTE shadows only the name it really has on such a server
  t.match(checkMysql('WITH orders AS (SELECT 1 AS id) SELECT * FROM ORDERS', only).sql, /`shop`\.`ORDERS`/, 'ORDERS is the table, not the CTE orders');
});

t.test('case-insensitive policy (1 or 2): any spelling reads the scoped table', async (t) => {
  const p = mysqlPolicy(scopesOf(['read:shop.Orders']), 'fold');
  for (const sql of ['SELECT * FROM shop.orders', 'SELECT * FROM SHOP.ORDERS', 'SELECT * FROM orders', 'SELECT * FROM Orders']) {
    const r = checkMysql(sql, p);
    t.match(r.sql, /`shop`\.`Orders`/, sql);
    t.same(r.tables, ['shop.Orders'], sql);
  }
  const two = mysqlPolicy(scopesOf(['read:shop.ORDERS', 'read:shop.orders']), 'fold');
  t.match(checkMysql('SELECT * FROM shop.ORDERS', two).sql, /`shop`\.`ORDERS`/, 'an exact match wins');
  t.equal(refusal(() => checkMysql('SELECT * FROM shop.Orders', two)).code, 'scope_violation', 'ambiguous by case: refused');
  t.match(checkMysql('WITH orders AS (SELECT 1 AS id) SELECT * FROM ORDERS', mysqlPolicy(scopesOf(['read:shop.ORDERS']), 'fold')).sql, /FROM `ORDERS`/, 'the CTE shadows it, as on the server');
});

t.test('what prepare checked is checked again for a case-sensitive server', async (t) => {
  const checker = new SqlChecker();
  t.teardown(() => checker.close());
  const connector = new MysqlConnector({ allowPrivate: true, reserved: [] }, checker);
  const scopes = scopesOf(['read:shop.ORDERS']);
  const prepare = (sql: string): Promise<PreparedLiveQuery> => connector.prepare(sql, scopes, mysqlTarget);
  const same = await prepare('SELECT * FROM shop.ORDERS');
  await t.resolves(checkForServer(checker, same, scopes, 'exact', 'shop'));
  const folded = await prepare('SELECT * FROM shop.orders');
  await t.resolves(checkForServer(checker, folded, scopes, 'fold', 'shop'), 'a folding server: orders is ORDERS');
  await t.rejects(checkForServer(checker, folded, scopes, 'exact', 'shop'), { code: 'scope_violation' }, 'a case-sensitive server: orders is another table');
  const cte = await prepare('WITH orders AS (SELECT 1 AS id) SELECT * FROM ORDERS');
  await t.rejects(checkForServer(checker, cte, scopes, 'exact', 'shop'), { code: 'scope_violation' }, 'the CTE does not shadow ORDERS there');
  // an unqualified scope means the credential's database, which must not be a system schema
  const unq = await connector.prepare('SELECT * FROM user', scopesOf(['read:user']), mysqlTarget);
  await t.rejects(checkForServer(checker, unq, scopesOf(['read:user']), 'fold', 'mysql'), { code: 'scope_violation', message: /system schema/ });
  await t.rejects(checkForServer(checker, unq, scopesOf(['read:user']), 'fold', 'MySQL'), { code: 'scope_violation' });
  await t.resolves(checkForServer(checker, unq, scopesOf(['read:user']), 'fold', 'shop'));
});

t.test('read:orders and <credential database>.orders are the same table; another database is not', async (t) => {
  const checker = new SqlChecker();
  t.teardown(() => checker.close());
  const connector = new MysqlConnector({ allowPrivate: true, reserved: [] }, checker);
  const scopes = scopesOf(['read:orders']);
  const r = checkMysql('SELECT * FROM shop.orders', mysqlPolicy(scopes));
  t.same(r.assumedDatabases, ['shop'], 'the scoped (unqualified) table is read, if shop is the credential database');
  t.match(r.sql, /FROM `orders` AS `orders`$/);
  const q = await connector.prepare('SELECT * FROM shop.orders', scopes, mysqlTarget);
  await t.resolves(checkForServer(checker, q, scopes, 'exact', 'shop'));
  await t.resolves(checkForServer(checker, q, scopes, 'fold', 'SHOP'));
  await t.rejects(checkForServer(checker, q, scopes, 'exact', 'SHOP'), { code: 'scope_violation' }, 'case-sensitive: SHOP is another database');
  await t.rejects(checkForServer(checker, q, scopes, 'fold', 'other'), { code: 'scope_violation', message: /credential's database/ });
  await t.rejects(checkForServer(checker, q, scopes, 'fold', null), { code: 'scope_violation' });
  t.same(checkMysql('SELECT * FROM orders', mysqlPolicy(scopes)).assumedDatabases, []);
});

t.test('system schemas in any letter case are refused at query time, whatever the policy holds', async (t) => {
  const p = mysqlPolicy(scopesOf(['read:orders']));
  for (const sql of ['SELECT * FROM MySQL.user', 'SELECT * FROM `mysql`.`user`', 'SELECT * FROM INFORMATION_SCHEMA.TABLES', 'SELECT * FROM Performance_Schema.threads', 'SELECT * FROM SYS.processlist', 'SELECT * FROM orders JOIN mysql.user ON 1 = 1']) {
    const e = refusal(() => checkMysql(sql, p));
    t.equal(e.code, 'scope_violation', sql);
    t.equal(e.reason, 'system_catalog', `${sql}: ${e.message}`);
  }
  // a policy built from scopes that were never validated still refuses
  const forged = { allowed: new Map([['MYSQL.user', { name: 'MYSQL.user', schema: 'MYSQL', table: 'user', predicate: null }]]), names: 'fold' as const };
  t.equal(refusal(() => checkMysql('SELECT * FROM MYSQL.user', forged)).reason, 'system_catalog', 'checked before the allowed tables');
});

t.test('parser errors name the construct, not the grammar', async (t) => {
  const p = mysqlPolicy(scopesOf(['read:orders']));
  for (const [sql, construct] of [
    ['SELECT * FROM orders WHERE id = 1 RETURNING id', 'RETURNING id'],
    ['SELECT * FROM orders TABLESAMPLE (10)', 'TABLESAMPLE ('],
    ['SELECT * FROM orders WINDOW w AS (PARTITION BY id) QUALIFY 1', 'WINDOW w'],
  ] as const) {
    const e = refusal(() => checkMysql(sql, p));
    t.equal(e.code, 'invalid_sql', sql);
    t.notMatch(e.message, /Expected|"#"|"--"/, `${sql}: no grammar dump: ${e.message}`);
    t.match(e.message, /not supported/, sql);
    t.ok(e.construct?.startsWith(construct.split(' ')[0] as string), `${sql}: names ${construct}: ${e.construct}`);
    t.notMatch(e.message, /at character/, 'the API adds the position once');
    t.type(e.position, 'number');
  }
  const end = refusal(() => checkMysql('SELECT id FROM orders WHERE (', p));
  t.match(end.message, /ends unexpectedly/);
});

// ---------------------------------------------------------------------------------------------
// against the MariaDB

const ADMIN = { host: '127.0.0.1', port: 3306, user: 'root', password: '' };
async function lowerCaseTableNames(): Promise<number | undefined> {
  try {
    const c = await mysql.createConnection({ ...ADMIN, connectTimeout: 1500 });
    const [rows] = await c.query<mysql.RowDataPacket[]>('SELECT @@lower_case_table_names AS l');
    await c.end();
    return Number(rows[0]?.['l']);
  } catch {
    return undefined;
  }
}

const lctn = await lowerCaseTableNames();
if (lctn === undefined) {
  t.skip('on MariaDB: no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)', () => undefined);
} else {
  const dbName = `svc_case_${randomBytes(5).toString('hex')}`;
  let srv: TestServer;
  const admin = await mysql.createConnection({ ...ADMIN, multipleStatements: true });
  t.before(async () => {
    await admin.query(`CREATE DATABASE ${dbName}`);
    if (lctn === 0) {
      await admin.query(`CREATE TABLE ${dbName}.ORDERS (id INT, who VARCHAR(20)); INSERT INTO ${dbName}.ORDERS VALUES (1, 'UPPER')`);
      await admin.query(`CREATE TABLE ${dbName}.orders (id INT, who VARCHAR(20)); INSERT INTO ${dbName}.orders VALUES (2, 'lower')`);
    } else {
      await admin.query(`CREATE TABLE ${dbName}.orders (id INT, who VARCHAR(20)); INSERT INTO ${dbName}.orders VALUES (2, 'lower')`);
    }
    srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
  });
  t.teardown(async () => {
    await srv?.close();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName}`);
    await admin.end();
  });
  interface Body {
    rows: Record<string, unknown>[];
    error?: { code: string; message: string; details?: Record<string, unknown> };
  }
  const agent = async (database = dbName): Promise<string> => {
    const a = await signupAgent(srv.url);
    const r = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://root@127.0.0.1:3306/${database}` } });
    if (r.status !== 201) throw new Error(`credential: ${r.status} ${r.text}`);
    return a.key;
  };
  const query = (key: string, conn: string, sql: string) => api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql } });

  t.test('a case-sensitive server: read:db.ORDERS reads ORDERS, read:db.orders reads orders', async (t) => {
    if (lctn !== 0) {
      t.skip(`the local server folds table names (lower_case_table_names = ${lctn}); the policy logic for both settings is tested above`, () => undefined);
      return;
    }
    const key = await agent();
    const upper = await openConnection(srv.url, key, 'mysql', [`read:${dbName}.ORDERS`]);
    const r1 = await query(key, upper, `SELECT who FROM ${dbName}.ORDERS`);
    t.equal(r1.status, 200, r1.text);
    t.same(r1.body.rows, [{ who: 'UPPER' }]);
    const r1u = await query(key, upper, 'SELECT who FROM ORDERS');
    t.same(r1u.body.rows, [{ who: 'UPPER' }], 'unqualified, exactly as scoped');
    const r1l = await query(key, upper, `SELECT who FROM ${dbName}.orders`);
    t.equal(r1l.status, 403, `orders is another table here: ${r1l.text}`);
    t.notMatch(r1l.text, /lower/);
    const cte = await query(key, upper, 'WITH orders AS (SELECT 1 AS who) SELECT who FROM ORDERS');
    t.equal(cte.status, 403, `the CTE orders does not shadow ORDERS on this server: ${cte.text}`);

    const lower = await openConnection(srv.url, key, 'mysql', [`read:${dbName}.orders`]);
    const r2 = await query(key, lower, `SELECT who FROM ${dbName}.orders`);
    t.equal(r2.status, 200, r2.text);
    t.same(r2.body.rows, [{ who: 'lower' }]);
    t.equal((await query(key, lower, 'SELECT who FROM ORDERS')).status, 403);

    const unq = await openConnection(srv.url, key, 'mysql', ['read:orders']);
    const viaDb = await query(key, unq, `SELECT who FROM ${dbName}.orders`);
    t.equal(viaDb.status, 200, `read:orders and ${dbName}.orders (the credential's database) are one table: ${viaDb.text}`);
    t.same(viaDb.body.rows, [{ who: 'lower' }]);
    t.equal((await query(key, unq, 'SELECT who FROM mysql_other_db.orders')).status, 403, 'another database is not');
    t.equal((await query(key, unq, `SELECT who FROM ${dbName}.ORDERS`)).status, 403, 'nor another table by case');

    const both = await openConnection(srv.url, key, 'mysql', ['read:ORDERS', 'read:orders']);
    t.same((await query(key, both, 'SELECT who FROM ORDERS')).body.rows, [{ who: 'UPPER' }], 'unqualified scopes: the credential database');
    t.same((await query(key, both, 'SELECT who FROM orders')).body.rows, [{ who: 'lower' }]);
  });

  t.test('a case-insensitive server: any spelling reads the one table', async (t) => {
    if (lctn === 0) {
      t.skip('the local server compares table names case-sensitively (lower_case_table_names = 0); the folding case is tested at policy level above', () => undefined);
      return;
    }
    const key = await agent();
    const conn = await openConnection(srv.url, key, 'mysql', [`read:${dbName}.ORDERS`]);
    t.same((await query(key, conn, 'SELECT who FROM orders')).body.rows, [{ who: 'lower' }]);
  });

  t.test('system schemas: refused at creation and at query time, in any letter case', async (t) => {
    const key = await agent();
    for (const s of ['read:MySQL.user', 'read:INFORMATION_SCHEMA.TABLES', 'read:Performance_Schema.threads', 'read:sys.processlist']) {
      const r = await api<Body>(srv.url, 'POST', '/v1/connections', { key, body: { target_id: 'mysql', scopes: ['read:orders', s] } });
      t.equal(r.status, 400, `${s}: ${r.text}`);
      t.equal(r.body.error?.code, 'invalid_scope');
    }
    const conn = await openConnection(srv.url, key, 'mysql', ['read:orders']);
    for (const sql of ['SELECT * FROM MySQL.user', 'SELECT * FROM `mysql`.`USER`', 'SELECT * FROM Information_Schema.Tables', 'SELECT * FROM PERFORMANCE_SCHEMA.threads']) {
      const r = await query(key, conn, sql);
      t.equal(r.status, 403, `${sql}: ${r.text}`);
      t.equal(r.body.error?.details?.['reason'], 'system_catalog', sql);
    }
    // a credential whose database is a system schema: unqualified scopes would read it
    const sysKey = await agent('mysql');
    const sysConn = await openConnection(srv.url, sysKey, 'mysql', ['read:user']);
    const r = await query(sysKey, sysConn, 'SELECT * FROM user');
    t.equal(r.status, 403, r.text);
    t.notMatch(r.text, /authentication_string|"Password"/);
  });

  t.test('a parser error over HTTP: one position, the construct, no grammar dump', async (t) => {
    const key = await agent();
    const conn = await openConnection(srv.url, key, 'mysql', ['read:orders']);
    const r = await query(key, conn, 'SELECT * FROM orders WHERE id = 1 RETURNING id');
    t.equal(r.status, 400, r.text);
    t.equal(r.body.error?.code, 'invalid_sql');
    t.notMatch(r.body.error?.message ?? '', /Expected/);
    t.match(r.body.error?.message ?? '', /RETURNING/);
    t.equal((r.body.error?.message.match(/at character/g) ?? []).length, 1, r.body.error?.message ?? '');
  });
}
