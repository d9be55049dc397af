/**
 * Replacing a `mysql` credential while a statement runs with the old one, after the database's
 * password was changed (the usual rotation: ALTER USER at the server, then the new URL through
 * the API). The statement is stopped with KILL QUERY, which logs in with the credential the
 * statement holds: the old password, refused now, so the KILLs fail and the statement runs at
 * the server until its time limit. It is still answered 503 credential_changed and not charged:
 * the credential change came first, its deadline after (control-plane/live/mysql/index.ts).
 * Skipped with a reason when MariaDB does not answer.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import mysql from 'mysql2/promise';
import { createOrdersDatabase, MARIADB_ADMIN as ADMIN, mariadbAnswers } from '../helpers/mariadb.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

if (!(await mariadbAnswers())) {
  t.skip('no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)', () => undefined);
} else {
  const dbName = `svc_live_mycred_${randomBytes(5).toString('hex')}`;
  const reader = `svc_mc_${randomBytes(4).toString('hex')}`;
  const MARK = `rot_${randomBytes(4).toString('hex')}`;
  let srv: TestServer;
  const admin = await mysql.createConnection({ ...ADMIN, multipleStatements: true });
  t.before(async () => {
    await createOrdersDatabase(admin, dbName, 300);
    await admin.query(`CREATE USER '${reader}'@'%' IDENTIFIED BY 'Old-Pw-41'; GRANT SELECT ON ${dbName}.orders TO '${reader}'@'%'`);
    // the statement's deadline is what ends it at the server (its KILLs are refused)
    srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 6000 } });
  });
  t.teardown(async () => {
    await srv?.close();
    const [rows] = await admin.query<mysql.RowDataPacket[]>('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()', [dbName]);
    for (const r of rows) await admin.query(`KILL ${Number(r['id'])}`).catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${dbName}; DROP USER IF EXISTS '${reader}'@'%'`);
    await admin.end();
  });

  async function running(): Promise<number> {
    const [rows] = await admin.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND INFO LIKE ? AND ID <> CONNECTION_ID()", [`%${MARK}%`]);
    return Number(rows[0]?.['n'] ?? 0);
  }

  t.test('the password changed at the server, then the credential replaced: 503 credential_changed, not charged', async (t) => {
    const a = await signupAgent(srv.url, 'MySQL Rotation Org');
    const put = (password: string) => api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://${reader}:${password}@127.0.0.1:3306/${dbName}` } });
    t.equal((await put('Old-Pw-41')).status, 201);
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
    const usage = async () => (await api<Record<string, unknown>>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
    const before = await usage();
    const answer = api<{ rows?: unknown[]; error?: { code?: string; details?: Record<string, unknown> } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, {
      key: a.key,
      body: { sql: `SELECT count(*) AS n FROM orders a, orders b, orders c, orders d WHERE '${MARK}' <> ''` },
    });
    let ended = false;
    void answer.then(() => (ended = true));
    for (let i = 0; i < 500 && !ended && (await running()) === 0; i++) await new Promise((r) => setTimeout(r, 20));
    t.equal(await running(), 1, 'the statement runs at the server');
    await admin.query(`ALTER USER '${reader}'@'%' IDENTIFIED BY 'New-Pw-42'`);
    t.equal((await put('New-Pw-42')).status, 201, 'the new credential registered');
    const r = await answer;
    t.equal(r.status, 503, JSON.stringify(r.body).slice(0, 300));
    t.equal(r.body.error?.code, 'service_unavailable');
    t.equal(r.body.error?.details?.['reason'], 'credential_changed');
    t.equal(r.body.rows, undefined, 'no rows');
    t.same(await usage(), before, 'nothing charged');
    const next = await api<{ rows?: unknown[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT total FROM orders WHERE id = 7' } });
    t.equal(next.status, 200, next.text);
    t.same(next.body.rows, [{ total: 7 }], 'the next statement runs with the new credential');
  });
}
