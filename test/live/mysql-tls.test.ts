/**
 * The `mysql` live target's sslmode against a TLS database server: real sockets, a real TLS
 * handshake (test/helpers/tls-mysql-front.ts, a front speaking MySQL's SSLRequest in front of the
 * machine's MariaDB, which has SSL disabled, with certificates issued here by our own CA,
 * pki/index.ts), the real control plane over HTTP, credentials registered with
 * POST /v1/connections/credentials and queries through POST /v1/connections/{id}/query. Skipped
 * with a reason when MariaDB does not answer on 127.0.0.1:3306 (root, no password).
 *
 * verify-full checks the certificate against the host name of the URL (not the address svc
 * pinned it to), verify-ca only the chain, require neither; verify-ca / verify-full without
 * options.ca trust the system store only; require and verify-* refuse a server that offers no TLS
 * before the login is sent; prefer asks for TLS (unverified) and goes on without it only with a
 * server that offers none; disable never asks (control-plane/live/mysql/index.ts tlsFor, connect).
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import mysql from 'mysql2/promise';
import { certificateCases, expectAllTls, expectNothingForwarded, expectRows, expectTlsRefused, queryWith as queryAs, tlsCertificates, type QueryAnswer, type TlsProbe } from '../helpers/live-tls.js';
import { MARIADB_ADMIN as ADMIN, mariadbAnswers } from '../helpers/mariadb.js';
import { startServer, type TestServer } from '../helpers/server.js';
import type { ServerCert } from '../helpers/tls-front.js';
import { tlsMysqlFront, type MysqlFrontOptions, type TlsMysqlFront } from '../helpers/tls-mysql-front.js';
import type { TapTest } from '../helpers/tap.js';

if (!(await mariadbAnswers())) {
  t.skip('no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)', () => undefined);
} else {
  const PASSWORD = 'Tls-Front-My-Pw-7342';
  const ROWS = [
    { id: 1, note: 'through the front' },
    { id: 2, note: 'still the database' },
  ];
  const dbName = `svc_live_mytls_${randomBytes(5).toString('hex')}`;
  // mysql_native_password, MariaDB's default: the password itself never travels, a token made from the server's scramble does
  const user = `svc_tls_${randomBytes(4).toString('hex')}`;
  const upstream = { host: ADMIN.host, port: ADMIN.port };
  const certs = tlsCertificates();
  const { ours, certs: CERTS } = certs;
  let srv: TestServer;
  const admin = await mysql.createConnection({ ...ADMIN, multipleStatements: true });
  t.before(async () => {
    await admin.query(`CREATE DATABASE ${dbName}; CREATE TABLE ${dbName}.tls_probe (id INT PRIMARY KEY, note VARCHAR(100) NOT NULL)`);
    await admin.query(`INSERT INTO ${dbName}.tls_probe VALUES ${ROWS.map((r) => `(${r.id}, '${r.note}')`).join(', ')}`);
    await admin.query(`CREATE USER '${user}'@'%' IDENTIFIED BY '${PASSWORD}'; GRANT SELECT ON ${dbName}.* TO '${user}'@'%'`);
    // the fronts are on loopback: allowed only by SVC_LIVE_ALLOW_PRIVATE=1
    srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 5000 } });
  });
  t.teardown(async () => {
    await srv?.close();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName}; DROP USER IF EXISTS '${user}'@'%'`);
    await admin.end();
  });

  const front = (t: TapTest, o: MysqlFrontOptions): Promise<TlsMysqlFront> => tlsMysqlFront(t, upstream, o);
  /** the test user's URL through `port` on `host`, with `query` (e.g. ?sslmode=…) */
  const urlVia = (host: string, port: number, query = ''): string => `mysql://${user}:${PASSWORD}@${host}:${port}/${dbName}${query}`;
  const probe = (): TlsProbe => ({ srv, kind: 'mysql', scope: 'read:tls_probe', sql: 'SELECT id, note FROM tls_probe ORDER BY id', rows: ROWS });
  /** A new organization registers `secret` with `options` as its mysql credential and queries through it. */
  const queryWith = (t: TapTest, secret: string, options: Record<string, unknown>): Promise<QueryAnswer> => queryAs(t, probe(), secret, options);

  /** through a TLS front with `cert`, to `host` (with `query`), `options`: the rows, every session TLS with SNI `sni`, no login in plaintext */
  async function expectTlsRows(t: TapTest, cert: ServerCert, host: string, options: Record<string, unknown>, sni: string | false, query = ''): Promise<void> {
    const f = await front(t, { tls: true, cert });
    expectRows(t, probe(), await queryWith(t, urlVia(host, f.port, query), options));
    expectAllTls(t, f, sni, { plaintextLogin: false });
  }

  /** through a front of `o`, to `host`, `options`: refused at the connection for `why`, no login sent in plaintext nor reaching the database */
  async function expectRefusedVia(t: TapTest, o: MysqlFrontOptions, host: string, options: Record<string, unknown>, why: RegExp): Promise<TlsMysqlFront> {
    const f = await front(t, o);
    expectTlsRefused(t, 'mysql', await queryWith(t, urlVia(host, f.port), options), why);
    expectNothingForwarded(t, f);
    t.ok(
      f.sessions.every((s) => !s.plaintextLogin),
      'no login was sent in plaintext',
    );
    return f;
  }

  /** through a front of `o` with `sslmode`: the rows, every session's login in plaintext, no TLS asked for */
  async function expectPlaintextRows(t: TapTest, o: MysqlFrontOptions, sslmode: string): Promise<void> {
    const f = await front(t, o);
    expectRows(t, probe(), await queryWith(t, urlVia('localhost', f.port), { sslmode }));
    t.ok(f.sessions.length >= 1, 'the front was connected to');
    for (const s of f.sessions) t.same(s, { sslRequest: false, tls: false, servername: undefined, tlsError: undefined, forwarded: true, plaintextLogin: true }, 'a plaintext session');
  }

  // every TLS mode sends the URL's host name as SNI, as on postgres (a server or proxy choosing its
  // certificate, or its database, by SNI); it was sent under verify-full only
  certificateCases(certs, { rows: expectTlsRows, refused: (t, cert, host, options, why) => expectRefusedVia(t, { tls: true, cert }, host, options, why), sniUnverified: 'localhost' });

  t.test('prefer (the default) uses TLS when the server offers it, unverified as require; disable never asks', async (t) => {
    // prefer was plaintext on mysql even with a server offering TLS (the driver has no fallback)
    await expectTlsRows(t, CERTS.both, 'localhost', { sslmode: 'prefer' }, 'localhost');
    await expectTlsRows(t, CERTS.foreign, 'localhost', {}, 'localhost'); // the default, and a certificate of another CA: not checked
    await expectPlaintextRows(t, { tls: true, cert: CERTS.both }, 'disable');
  });

  t.test('a server without TLS: require and verify-* are refused before the login is sent; prefer and disable go on in plaintext', async (t) => {
    for (const [sslmode, ca] of [['require', undefined], ['verify-ca', ours.certPem], ['verify-full', ours.certPem]] as const) {
      const f = await front(t, { tls: false });
      expectTlsRefused(t, 'mysql', await queryWith(t, urlVia('localhost', f.port), { sslmode, ...(ca ? { ca } : {}) }), /Server does not support secure connection/);
      t.ok(f.sessions.length >= 1, 'the front was connected to');
      t.ok(
        f.sessions.every((s) => !s.sslRequest && !s.plaintextLogin && !s.forwarded),
        `${sslmode}: no SSLRequest, no login in plaintext, nothing reached the database`,
      );
    }
    await expectPlaintextRows(t, { tls: false }, 'disable');
    // prefer: the driver refuses the greeting without TLS before sending anything, and svc connects again without it
    const f = await front(t, { tls: false });
    expectRows(t, probe(), await queryWith(t, urlVia('localhost', f.port), { sslmode: 'prefer' }));
    const last = f.sessions.at(-1);
    t.same(last, { sslRequest: false, tls: false, servername: undefined, tlsError: undefined, forwarded: true, plaintextLogin: true }, 'prefer: its rows came over a plaintext session');
    t.ok(
      f.sessions.slice(0, -1).every((s) => !s.sslRequest && !s.plaintextLogin),
      'the sessions before it sent no login',
    );
  });

  t.test('a connection reset during the TLS negotiation is the server unreachable (503, retry), not a credential to fix', async (t) => {
    const f = await front(t, { tls: 'reset' });
    const r = await queryWith(t, urlVia('localhost', f.port), { sslmode: 'require' });
    t.equal(r.status, 503, r.text);
    t.equal(r.body.error?.code, 'service_unavailable');
    t.equal(r.body.error?.details?.['reason'], 'unreachable');
    t.ok(f.sessions.length >= 1 && f.sessions.every((s) => s.sslRequest && !s.forwarded), 'TLS was asked for, nothing reached the database');
  });

  t.test('the front itself: a wrong password through TLS is the database’s refusal, not a TLS one', async (t) => {
    const f = await front(t, { tls: true, cert: CERTS.both });
    const r = await queryWith(t, `mysql://${user}:Not-${PASSWORD}@localhost:${f.port}/${dbName}`, { sslmode: 'verify-full', ca: ours.certPem });
    t.equal(r.status, 400, r.text);
    t.equal(r.body.error?.details?.['reason'], 'credential_rejected');
    t.match(r.body.error?.message, /Access denied for user/);
    t.notMatch(r.body.error?.message, /^TLS/);
    expectAllTls(t, f, 'localhost', { plaintextLogin: false });
  });
}
