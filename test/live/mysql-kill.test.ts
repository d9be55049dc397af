/**
 * A `mysql` statement stopped (its connection revoked) just before it reached the server: the
 * first KILL QUERY finds the session idle and does nothing, so the connector sends it again until
 * the statement has ended (control-plane/live/mysql/index.ts). A proxy between svc and the
 * MariaDB on 127.0.0.1:3306 holds the statement's packet for 800 ms, so the first KILL always
 * comes before it. Skipped with a reason when MariaDB does not answer.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import mysql from 'mysql2/promise';
import { holdingProxy, type HoldingProxy } from '../helpers/holding-proxy.js';
import { MARIADB_ADMIN as ADMIN, mariadbAnswers } from '../helpers/mariadb.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

if (!(await mariadbAnswers())) {
  t.skip('no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)', () => undefined);
} else {
  const dbName = `svc_live_mykill_${randomBytes(5).toString('hex')}`;
  const MARK = `held_${randomBytes(4).toString('hex')}`;
  let srv: TestServer;
  const admin = await mysql.createConnection({ ...ADMIN, multipleStatements: true });
  // every byte passes at once, except a client packet holding MARK (the statement), held 800 ms
  let proxy: HoldingProxy | undefined;
  t.before(async () => {
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.query(`CREATE TABLE ${dbName}.orders (id INT PRIMARY KEY, total INT NOT NULL)`);
    await admin.query(`INSERT INTO ${dbName}.orders VALUES ${Array.from({ length: 300 }, (_, i) => `(${i + 1}, ${i + 1})`).join(',')}`);
    proxy = await holdingProxy(ADMIN, (d) => d.includes(MARK));
    // a deadline far past the test's waits: a statement the KILLs missed would still be running
    srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 60_000 } });
  });
  t.teardown(async () => {
    await srv?.close();
    await proxy?.close();
    // anything still running of this test's is ended before its database is dropped
    const [rows] = await admin.query<mysql.RowDataPacket[]>('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()', [dbName]);
    for (const r of rows) await admin.query(`KILL ${Number(r['id'])}`).catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${dbName}`);
    await admin.end();
  });

  async function running(): Promise<number> {
    const [rows] = await admin.query<mysql.RowDataPacket[]>('SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()', [`%${MARK}%`]);
    return Number(rows[0]?.['n'] ?? 0);
  }

  t.test('a statement revoked before it reached the server is stopped there when it arrives', async (t) => {
    if (!proxy) throw new Error('no proxy');
    const port = proxy.port;
    const a = await signupAgent(srv.url, 'MySQL Kill Org');
    t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://root@127.0.0.1:${port}/${dbName}` } })).status, 201);
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
    // the connection is made and described first, so the held packet is the statement's own
    const warm = await api<{ rows?: unknown[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT total FROM orders WHERE id = 1' } });
    t.equal(warm.status, 200, warm.text);
    // a statement that runs until it is killed (a four-way cross join of 300 rows)
    const answer = api<{ error?: { code?: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, {
      key: a.key,
      body: { sql: `SELECT count(*) AS n FROM orders a, orders b, orders c, orders d WHERE '${MARK}' <> ''` },
    });
    while (proxy.counts.held === 0) await new Promise((r) => setTimeout(r, 10));
    const revoked = api(srv.url, 'POST', `/v1/connections/${conn}/revoke`, { key: a.key });
    // the held packet reaches the server after the first KILL; a KILL sent again stops it there
    // (the answers wait for the statement: they are read after it is looked for)
    while (proxy.counts.delivered === 0) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 1500));
    t.equal(await running(), 0, 'the statement, begun after the first KILL QUERY, was stopped by a later one');
    t.equal((await revoked).status, 200, 'revoked while its statement was held on the way');
    const r = await answer;
    t.equal(r.status, 410, 'answered as stopped by the revocation');
    t.equal(r.body.error?.code, 'connection_revoked');
  });
}
