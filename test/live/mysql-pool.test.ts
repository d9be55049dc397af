/**
 * Pooled connections on the `mysql` live target, against the MariaDB on 127.0.0.1:3306: queries
 * of one organization reuse its connections (at most SVC_LIVE_POOL_SIZE), a connection whose
 * statement was killed or cut at a cap is never reused, a database error leaves the connection
 * usable, replacing or deleting the credential ends the connections at once and the next query
 * runs under the new credential. Skipped with a reason when MariaDB does not answer.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import mysql from 'mysql2/promise';
import { createOrdersDatabase, MARIADB_ADMIN as ADMIN, mariadbAnswers } from '../helpers/mariadb.js';
import { eventually } from '../helpers/tap.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

if (!(await mariadbAnswers())) {
  t.skip('no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)', () => undefined);
} else {
  const dbName = `svc_live_mypool_${randomBytes(5).toString('hex')}`;
  const reader = `svc_mp_${randomBytes(4).toString('hex')}`;
  let srv: TestServer;
  const admin = await mysql.createConnection({ ...ADMIN, multipleStatements: true });
  t.before(async () => {
    await createOrdersDatabase(admin, dbName, 300);
    await admin.query(`CREATE TABLE ${dbName}.secrets (id INT); INSERT INTO ${dbName}.secrets VALUES (1)`);
    await admin.query(`CREATE USER '${reader}'@'%' IDENTIFIED BY 'Pool-Pw-77'; GRANT SELECT ON ${dbName}.orders TO '${reader}'@'%'`);
    srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1', SVC_LIVE_POOL_SIZE: '3' }, limits: { queryTimeoutMs: 1500, maxRows: 100 } });
  });
  t.teardown(async () => {
    await srv?.close();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName}; DROP USER IF EXISTS '${reader}'@'%'`);
    await admin.end();
  });

  /** svc's connections to this test's database: their thread ids, by user */
  async function backends(): Promise<Record<string, number[]>> {
    const [rows] = await admin.query<mysql.RowDataPacket[]>('SELECT ID AS id, USER AS user FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()', [dbName]);
    const by: Record<string, number[]> = {};
    for (const r of rows) (by[String(r['user'])] ??= []).push(Number(r['id']));
    return by;
  }
  const ids = (b: Record<string, number[]>): number[] => Object.values(b).flat().sort((x, y) => x - y);

  interface QueryBody {
    rows?: Record<string, unknown>[];
    truncated?: boolean;
    error?: { code: string; details?: Record<string, unknown> };
  }

  t.test('an organization reuses its pooled connections, at most the pool size', async (t) => {
    const a = await signupAgent(srv.url, 'MySQL Pool Org');
    t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://root@127.0.0.1:3306/${dbName}` } })).status, 201);
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders', 'read:secrets']);
    const q = async (sql: string): Promise<QueryBody> => (await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).body;

    for (let i = 0; i < 10; i++) t.equal(Number((await q(`SELECT total FROM orders WHERE id = ${i + 1}`)).rows?.[0]?.['total']), i + 1);
    const one = ids(await backends());
    t.equal(one.length, 1, 'ten queries one after another: one connection');

    const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => q(`SELECT total FROM orders WHERE id = ${i + 1}`)));
    t.ok(burst.every((r) => r.rows?.[0]?.['total'] !== undefined), 'twelve at once all answered');
    const open = ids(await backends());
    t.ok(open.length >= 1 && open.length <= 3, `at most the pool size (3) open: ${open.length}`);

    // a database error ends the transaction, not the connection
    const before = ids(await backends());
    t.equal((await q('SELECT no_such_column FROM orders')).error?.code, 'invalid_sql');
    t.equal(Number((await q('SELECT total FROM orders WHERE id = 3')).rows?.[0]?.['total']), 3);
    t.same(ids(await backends()), before, 'a statement the database rejected leaves its connection pooled');

    // a result cut at the row cap: the statement is stopped and its connection is ended, not given back
    const capped = await q('SELECT id FROM orders');
    t.equal(capped.truncated, true, 'cut at the 100-row cap');
    t.ok(await eventually(async () => ids(await backends()).length === before.length - 1), 'the cut connection was ended');
    t.notOk(ids(await backends()).some((id) => !before.includes(id)), 'and no new one took its place yet');

    // a statement killed at its deadline: its connection is ended, not given back
    const slow = await q('SELECT count(*) FROM orders a, orders b, orders c, orders d');
    t.equal(slow.error?.code, 'query_timeout');
    t.equal(Number((await q('SELECT total FROM orders WHERE id = 7')).rows?.[0]?.['total']), 7, 'the next query runs');

    // the credential replaced by another user: the old connections end, the next query runs as the new user
    t.equal(
      (await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://${reader}:Pool-Pw-77@127.0.0.1:3306/${dbName}` } })).status,
      201,
    );
    t.ok(await eventually(async () => (await backends())['root'] === undefined), 'the old credential’s connections ended at once');
    t.equal((await q('SELECT * FROM secrets')).error?.code, 'scope_violation', 'the new user’s privileges apply: no stale connection of the old user');
    t.equal(Number((await q('SELECT total FROM orders WHERE id = 9')).rows?.[0]?.['total']), 9);
    t.same(Object.keys(await backends()), [reader], 'only the new user is connected');

    // the credential deleted: its connections end
    t.equal((await api(srv.url, 'DELETE', '/v1/connections/credentials/mysql', { key: a.key })).status, 200);
    t.ok(await eventually(async () => ids(await backends()).length === 0), 'deleting the credential ends its connections');
  });

  const SLOW = 'SELECT count(*) AS n FROM orders a, orders b, orders c, orders d';

  t.test('statements waiting for a connection: a credential change opens nothing with the old one, a revocation runs nothing', async (t) => {
    const a = await signupAgent(srv.url, 'MySQL Pool Waiters');
    t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://root@127.0.0.1:3306/${dbName}` } })).status, 201);
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
    const q = (c: string, sql: string) => api<QueryBody>(srv.url, 'POST', `/v1/connections/${c}/query`, { key: a.key, body: { sql } });

    // three slow statements hold the pool (size 3); three more wait; the credential is replaced meanwhile
    const slow = [q(conn, SLOW), q(conn, SLOW), q(conn, SLOW)];
    await new Promise((r) => setTimeout(r, 300));
    const waiting = [q(conn, 'SELECT total FROM orders WHERE id = 1'), q(conn, 'SELECT total FROM orders WHERE id = 2'), q(conn, 'SELECT total FROM orders WHERE id = 3')];
    await new Promise((r) => setTimeout(r, 200));
    t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://${reader}:Pool-Pw-77@127.0.0.1:3306/${dbName}` } })).status, 201);
    const answers = await Promise.all(waiting);
    t.ok(
      answers.every((r) => r.status === 503 && r.body.error?.details?.['reason'] === 'credential_changed'),
      `the waiting statements ran nothing with the replaced credential: ${answers.map((r) => `${r.status}:${String(r.body.error?.details?.['reason'] ?? '')}`).join(' ')}`,
    );
    await Promise.all(slow);
    t.ok(await eventually(async () => (await backends())['root'] === undefined, 2000), 'no connection of the replaced credential is left or opened after the change');
    t.equal(Number((await q(conn, 'SELECT total FROM orders WHERE id = 4')).body.rows?.[0]?.['total']), 4, 'the next statement runs with the new credential');

    // a statement waiting for a connection when its svc connection is revoked: 410 at once, nothing ran
    const other = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
    const busy = [q(conn, SLOW), q(conn, SLOW), q(conn, SLOW)];
    await new Promise((r) => setTimeout(r, 300));
    const before = ids(await backends());
    const queued = q(other, SLOW);
    await new Promise((r) => setTimeout(r, 200));
    const revokedAt = Date.now();
    t.equal((await api(srv.url, 'POST', `/v1/connections/${other}/revoke`, { key: a.key })).status, 200);
    const revokeTook = Date.now() - revokedAt;
    const stopped = await queued;
    t.equal(stopped.status, 410, 'the queued statement ends with the revocation');
    t.ok(revokeTook < 1000, `the revocation did not wait for a statement that never started: ${revokeTook} ms`);
    t.notOk(ids(await backends()).some((id) => !before.includes(id)), 'no connection was opened for it');
    await Promise.all(busy);
    await api(srv.url, 'DELETE', '/v1/connections/credentials/mysql', { key: a.key });
  });

  t.test('a pooled connection the server closed is not handed out again', async (t) => {
    const a = await signupAgent(srv.url, 'MySQL Pool Killed');
    t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://root@127.0.0.1:3306/${dbName}` } })).status, 201);
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
    const q = async (sql: string): Promise<QueryBody> => (await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).body;
    t.equal(Number((await q('SELECT total FROM orders WHERE id = 1')).rows?.[0]?.['total']), 1);
    const [idle] = ids(await backends());
    t.ok(idle !== undefined, 'one idle pooled connection');
    await admin.query(`KILL CONNECTION ${Number(idle)}`);
    await new Promise((r) => setTimeout(r, 200)); // the close reaches the pool
    t.equal(Number((await q('SELECT total FROM orders WHERE id = 2')).rows?.[0]?.['total']), 2, 'the next query runs on a new connection');
    await api(srv.url, 'DELETE', '/v1/connections/credentials/mysql', { key: a.key });
  });

  t.test('organizations do not share connections', async (t) => {
    const agents = await Promise.all(['MyPool A', 'MyPool B'].map((n) => signupAgent(srv.url, n)));
    for (const a of agents) {
      t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://root@127.0.0.1:3306/${dbName}` } })).status, 201);
      const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
      t.equal(Number((await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT 1 AS one' } })).body.rows?.[0]?.['one']), 1);
    }
    t.equal(ids(await backends()).length, 2, 'one pooled connection each');
    for (const a of agents) await api(srv.url, 'DELETE', '/v1/connections/credentials/mysql', { key: a.key });
    t.ok(await eventually(async () => ids(await backends()).length === 0));
  });
}
