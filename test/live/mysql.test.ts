/**
 * The `mysql` live target end to end against the MariaDB on 127.0.0.1:3306 (root, no password;
 * a fresh database per run). Skipped with a reason when MariaDB does not answer.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import mysql from 'mysql2/promise';
import { MARIADB_ADMIN as ADMIN, mariadbAnswers } from '../helpers/mariadb.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

if (!(await mariadbAnswers())) {
  t.skip('no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)', () => undefined);
} else {
  const dbName = `svc_live_my_${randomBytes(5).toString('hex')}`;
  const other = `${dbName}_other`;
  const reader = `svc_rd_${randomBytes(4).toString('hex')}`;
  let srv: TestServer;
  const admin = await mysql.createConnection({ ...ADMIN, multipleStatements: true });
  t.before(async () => {
    await admin.query(`CREATE DATABASE ${dbName}; CREATE DATABASE ${other}`);
    await admin.query(`CREATE TABLE ${dbName}.orders (id INT PRIMARY KEY, tenant_id INT NOT NULL, total DECIMAL(10,2) NOT NULL, note VARCHAR(100), big BIGINT)`);
    const values = Array.from({ length: 300 }, (_, i) => `(${i + 1}, ${(i + 1) % 10}, ${((i + 1) * 1.5).toFixed(2)}, 'order ${i + 1}', ${9007199254740993 + i})`).join(',');
    await admin.query(`INSERT INTO ${dbName}.orders VALUES ${values}`);
    await admin.query(`CREATE TABLE ${dbName}.secrets (id INT, value TEXT); INSERT INTO ${dbName}.secrets VALUES (1, 'top secret')`);
    await admin.query(`CREATE TABLE ${other}.orders (id INT); INSERT INTO ${other}.orders VALUES (42)`);
    await admin.query(`CREATE USER '${reader}'@'%' IDENTIFIED BY 'Reader-Pw-77'; GRANT SELECT ON ${dbName}.orders TO '${reader}'@'%'`);
    // the MariaDB is on loopback: allowed only by SVC_LIVE_ALLOW_PRIVATE=1 (the default refuses it)
    srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 1500, maxRows: 100 } });
  });
  t.teardown(async () => {
    await srv?.close();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName}; DROP DATABASE IF EXISTS ${other}; DROP USER IF EXISTS '${reader}'@'%'`);
    await admin.end();
  });

  interface QueryBody {
    rows: Record<string, unknown>[];
    row_count: number;
    truncated: boolean;
    scope_applied: { tables_read: string[]; row_filters: Record<string, string | null> };
    error?: { code: string; message: string; details?: Record<string, unknown> };
  }
  const query = (key: string, conn: string, sql: string) => api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql } });

  async function agent(secret = `mysql://root@127.0.0.1:3306/${dbName}`): Promise<{ key: string }> {
    const a = await signupAgent(srv.url);
    const r = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret } });
    if (r.status !== 201) throw new Error(`credential: ${r.status} ${r.text}`);
    return a;
  }

  t.test('queries run on MariaDB within the scopes and filters', async (t) => {
    const a = await agent();
    const conn = await openConnection(srv.url, a.key, 'mysql', [`read:orders`, `read:${other}.orders`, `filter:${other}.orders.id=42`]);
    const r = await query(a.key, conn, 'SELECT COUNT(*) AS n, SUM(total) AS s FROM orders WHERE tenant_id = 7');
    t.equal(r.status, 200, r.text);
    t.same(r.body.rows, [{ n: 30, s: 6840 }], 'decimals are numbers when exact');
    t.same(r.body.scope_applied.tables_read, ['orders']);
    const big = await query(a.key, conn, 'SELECT big FROM orders ORDER BY id LIMIT 1');
    t.same(big.body.rows, [{ big: '9007199254740993' }], 'a BIGINT beyond 2^53 stays exact as a string');
    const cross = await query(a.key, conn, `SELECT o.id FROM ${other}.orders o`);
    t.equal(cross.status, 200, cross.text);
    t.same(cross.body.rows, [{ id: 42 }]);
    t.match(cross.body.scope_applied.row_filters[`${other}.orders`], /`id` = '42'/);
    // column names that are an object's own machinery are plain keys (mysql2's generated parser
    // refused them and the query failed as a lost connection)
    const proto = await query(a.key, conn, 'SELECT id AS `__proto__`, 2 AS `constructor`, 3 AS `__defineGetter__` FROM orders ORDER BY id LIMIT 1');
    t.equal(proto.status, 200, proto.text);
    t.match(proto.text, /"__proto__":\d+/);
    t.match(proto.text, /"__defineGetter__":3/);
  });

  t.test('a filter value of digits keeps only rows whose column equals it, on a text column too', async (t) => {
    // unquoted, `tenant = 5` compares as numbers: MySQL reads '5abc', '05', ' 5' and '5e0' as 5
    await admin.query(`CREATE TABLE ${dbName}.accounts (id INT PRIMARY KEY, tenant VARCHAR(20) NOT NULL)`);
    await admin.query(`INSERT INTO ${dbName}.accounts VALUES (1, '5'), (2, '5abc'), (3, '05'), (4, ' 5'), (5, '5e0'), (6, '6')`);
    const a = await agent();
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:accounts', 'filter:accounts.tenant=5', 'read:orders', 'filter:orders.id=42']);
    const r = await query(a.key, conn, 'SELECT id, tenant FROM accounts ORDER BY id');
    t.equal(r.status, 200, r.text);
    t.same(r.body.rows, [{ id: 1, tenant: '5' }], "only tenant '5': no other tenant's rows");
    const n = await query(a.key, conn, 'SELECT id FROM orders');
    t.same(n.body.rows, [{ id: 42 }], 'on an integer column the value still matches the number');
  });

  t.test('hostile statements are refused or contained', async (t) => {
    const a = await agent();
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
    const refused: [string, number][] = [
      ['SELECT * FROM secrets', 403],
      ['SELECT * FROM orders; DROP TABLE orders', 403],
      ["SELECT * FROM orders INTO OUTFILE '/tmp/svc_x'", 403],
      ["SELECT LOAD_FILE('/etc/passwd')", 403],
      ['SELECT * FROM information_schema.tables', 403],
      ['SELECT * FROM mysql.user', 403],
      [`SELECT * FROM ${other}.orders`, 403],
      ['SELECT SLEEP(5)', 403],
      ['SELECT * FROM orders FOR UPDATE', 403],
      ['SELECT @@hostname', 403],
      ['SELECT @x := 1', 403],
      ['SELECT * FROM orders /*! UNION SELECT * FROM secrets */', 403],
      ["SELECT 'x\\' UNION SELECT value FROM secrets -- ' AS a FROM orders", 200],
      // the checker's parser decodes \u0027 to a quote and \u002f to a slash; the server does not
      [String.raw`SELECT 'a\u0027 \u002f*! , (SELECT group_concat(value) FROM secrets) AS other */ -- ' AS b FROM orders`, 400],
      [String.raw`SELECT 'x\u005c' AS b, ' AS c FROM secrets -- ' AS d FROM orders`, 400],
      // `--1` is a comment to the checker's parser and two minus signs to the server
      [String.raw`SELECT 'a\u0027 --1, (SELECT group_concat(value) FROM secrets) AS x
, \u0027a' AS c FROM orders --'a','a'`, 400],
      ['SELECT 1 --1, (SELECT group_concat(value) FROM secrets) AS x\nFROM orders', 400],
      ['SELECT 1 AS x /*M! , (SELECT value FROM secrets) */ FROM orders', 403],
      ['DELETE FROM orders', 403],
      ['SELECT nope FROM orders', 400],
    ];
    for (const [sql, status] of refused) {
      const r = await query(a.key, conn, sql);
      t.equal(r.status, status, `${sql}: ${status}`);
      t.notMatch(r.text, /top secret/, `${sql}: nothing of secrets`);
    }
    const [rows] = await admin.query<mysql.RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${dbName}.orders`);
    t.equal(rows[0]?.['n'], 300, 'nothing was written');
  });

  t.test('the credential’s user limits what can be read', async (t) => {
    const a = await agent(`mysql://${reader}:Reader-Pw-77@127.0.0.1:3306/${dbName}`);
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders', 'read:secrets']);
    t.equal((await query(a.key, conn, 'SELECT COUNT(*) AS n FROM orders')).status, 200);
    const denied = await query(a.key, conn, 'SELECT * FROM secrets');
    t.equal(denied.status, 403, denied.text);
    t.notMatch(denied.text, /Reader-Pw-77/);
    // a wrong password: refused, naming the kind to register again, without the password
    await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://${reader}:Wrong-Pw-99@127.0.0.1:3306/${dbName}` } });
    const r = await query(a.key, conn, 'SELECT COUNT(*) AS n FROM orders');
    t.equal(r.status, 400, r.text);
    t.match(r.body.error, { code: 'invalid_request', details: { reason: 'credential_rejected', connector_kind: 'mysql' } });
    t.notMatch(r.text, /Wrong-Pw-99/);
  });

  t.test('caps truncate; the deadline stops the statement at the server', async (t) => {
    const a = await agent();
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
    const r = await query(a.key, conn, 'SELECT id, note FROM orders ORDER BY id');
    t.equal(r.status, 200, r.text);
    t.equal(r.body.row_count, 100);
    t.equal(r.body.truncated, true);
    const slow = await query(a.key, conn, 'SELECT COUNT(*) FROM orders a, orders b, orders c, orders d');
    t.equal(slow.status, 504, slow.text);
    t.equal(slow.body.error?.code, 'query_timeout');
    let running = 1;
    for (let i = 0; i < 50 && running > 0; i++) {
      const [p] = await admin.query<mysql.RowDataPacket[]>(`SELECT COUNT(*) AS n FROM information_schema.processlist WHERE db = ? AND command = 'Query' AND info LIKE '%orders%'`, [dbName]);
      running = Number(p[0]?.['n'] ?? 0);
      if (running > 0) await new Promise((res) => setTimeout(res, 100));
    }
    t.equal(running, 0, 'the statement is no longer running on the server');
  });

  t.test('deleting the credential makes open connections fail cleanly', async (t) => {
    const a = await agent();
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
    t.equal((await query(a.key, conn, 'SELECT 1 AS x')).status, 200);
    t.equal((await api(srv.url, 'DELETE', '/v1/connections/credentials/mysql', { key: a.key })).status, 200);
    const r = await query(a.key, conn, 'SELECT 1 AS x');
    t.equal(r.status, 400);
    t.match(r.body.error, { code: 'invalid_request', details: { reason: 'credential_missing', connector_kind: 'mysql' } });
  });
}
