/**
 * Replacing a `mysql` credential while a statement runs with the old one, after the database's
 * password was changed (the usual rotation: ALTER USER at the server, then the new URL through
 * the API). The statement is stopped with KILL QUERY, which logs in with the credential the
 * statement holds: the old password, refused now, so the KILLs fail and the statement runs at
 * the server until its time limit. It is still answered 503 credential_changed and not charged:
 * the credential change came first, its deadline after; and a statement that ends at the server
 * before its deadline has its rows thrown away, as a postgres statement stopped by its signal
 * (control-plane/live/mysql/index.ts).
 * Skipped with a reason when MariaDB does not answer.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import mysql from 'mysql2/promise';
import { createOrdersDatabase, MARIADB_ADMIN as ADMIN, mariadbAnswers } from '../helpers/mariadb.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import type { TapTest } from '../helpers/tap.js';

if (!(await mariadbAnswers())) {
  t.skip('no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)', () => undefined);
} else {
  const dbName = `svc_live_mycred_${randomBytes(5).toString('hex')}`;
  /** the readers the tests made */
  const readers: string[] = [];
  const MARK = `rot_${randomBytes(4).toString('hex')}`;
  let srv: TestServer;
  const admin = await mysql.createConnection({ ...ADMIN, multipleStatements: true });
  t.before(async () => {
    await createOrdersDatabase(admin, dbName, 300);
    // the statement's deadline is what ends an endless one at the server (its KILLs are refused)
    srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 12_000 } });
  });
  t.teardown(async () => {
    await srv?.close();
    const [rows] = await admin.query<mysql.RowDataPacket[]>('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()', [dbName]);
    for (const r of rows) await admin.query(`KILL ${Number(r['id'])}`).catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${dbName}`);
    for (const reader of readers) await admin.query(`DROP USER IF EXISTS '${reader}'@'%'`);
    await admin.end();
  });

  async function running(): Promise<number> {
    const [rows] = await admin.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND INFO LIKE ? AND ID <> CONNECTION_ID()", [`%${MARK}%`]);
    return Number(rows[0]?.['n'] ?? 0);
  }

  type Answer = { status: number; body: { rows?: unknown[]; error?: { code?: string; details?: Record<string, unknown> } } };

  /**
   * `sql` runs on a new organization's connection as a new reader; while it runs at the server the
   * reader's password is changed there, then the credential replaced through the API. Its answer,
   * after which the usage must be as before, and the next statement run with the new credential.
   */
  async function rotateWhileRunning(t: TapTest, sql: string): Promise<Answer> {
    const reader = `svc_mc_${randomBytes(4).toString('hex')}`;
    readers.push(reader);
    await admin.query(`CREATE USER '${reader}'@'%' IDENTIFIED BY 'Old-Pw-41'; GRANT SELECT ON ${dbName}.orders TO '${reader}'@'%'`);
    const a = await signupAgent(srv.url, 'MySQL Rotation Org');
    const put = (password: string) => api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://${reader}:${password}@127.0.0.1:3306/${dbName}` } });
    t.equal((await put('Old-Pw-41')).status, 201);
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
    const usage = async () => (await api<Record<string, unknown>>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
    const before = await usage();
    const answer = api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } }) as Promise<Answer>;
    let ended = false;
    void answer.then(() => (ended = true));
    for (let i = 0; i < 500 && !ended && (await running()) === 0; i++) await new Promise((r) => setTimeout(r, 20));
    t.equal(await running(), 1, 'the statement runs at the server');
    await admin.query(`ALTER USER '${reader}'@'%' IDENTIFIED BY 'New-Pw-42'`);
    t.equal((await put('New-Pw-42')).status, 201, 'the new credential registered');
    const r = await answer;
    t.same(await usage(), before, 'nothing charged');
    const next = await api<{ rows?: unknown[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT total FROM orders WHERE id = 7' } });
    t.equal(next.status, 200, next.text);
    t.same(next.body.rows, [{ total: 7 }], 'the next statement runs with the new credential');
    return r;
  }

  function assertStopped(t: TapTest, r: Answer): void {
    t.equal(r.status, 503, JSON.stringify(r.body).slice(0, 300));
    t.equal(r.body.error?.code, 'service_unavailable');
    t.equal(r.body.error?.details?.['reason'], 'credential_changed');
    t.equal(r.body.rows, undefined, 'no rows');
  }

  t.test('the statement runs on at the server until its time limit: 503 credential_changed, not charged', async (t) => {
    assertStopped(t, await rotateWhileRunning(t, `SELECT count(*) AS n FROM orders a, orders b, orders c, orders d WHERE '${MARK}' <> ''`));
  });

  t.test('the statement ends at the server before its deadline: its rows are not answered, 503 credential_changed, not charged', async (t) => {
    // 27 million rows counted: seconds, well within the deadline
    assertStopped(t, await rotateWhileRunning(t, `SELECT count(*) AS n FROM orders a, orders b, orders c WHERE '${MARK}' <> ''`));
  });
}
