/**
 * The `postgres` live target's sslmode against a TLS database server: real sockets, a real TLS
 * handshake (test/helpers/tls-postgres-front.ts, a front speaking PostgreSQL's SSLRequest in
 * front of the customer database, with certificates issued here by our own CA, pki/index.ts),
 * the real control plane over HTTP, credentials registered with POST /v1/connections/credentials
 * and queries through POST /v1/connections/{id}/query.
 *
 * verify-full checks the certificate against the host name of the URL (not the address svc
 * pinned it to), verify-ca only the chain, require neither; verify-ca / verify-full without
 * options.ca trust the system store only; require and verify-* never fall back to plaintext when
 * the server answers 'N'; prefer does; disable never asks for TLS.
 */
import t from 'tap';
import pg from 'pg';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import { certificateCases, expectAllTls, expectNothingForwarded, expectRows, expectTlsRefused, queryWith as queryAs, tlsCertificates, type QueryAnswer, type TlsProbe } from '../helpers/live-tls.js';
import type { ServerCert } from '../helpers/tls-front.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { tlsPostgresFront, type FrontOptions, type TlsPostgresFront } from '../helpers/tls-postgres-front.js';
import type { TapTest } from '../helpers/tap.js';

const PASSWORD = 'Tls-Front-Pw-5831';
const ROWS = [
  { id: 1, note: 'through the front' },
  { id: 2, note: 'still the database' },
];

let db: CustomerDatabase;
let srv: TestServer;
let upstream: { host: string; port: number };
const certs = tlsCertificates();
const { ours, certs: CERTS } = certs;

t.before(async () => {
  db = await customerDatabase('svc_live_tls');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query('CREATE TABLE tls_probe (id int PRIMARY KEY, note text NOT NULL)');
  await c.query(`INSERT INTO tls_probe VALUES ${ROWS.map((r) => `(${r.id}, '${r.note}')`).join(', ')}`);
  await c.end();
  const u = new URL(db.url);
  upstream = { host: u.hostname, port: Number(u.port || 5432) };
  // the fronts are on loopback: allowed only by SVC_LIVE_ALLOW_PRIVATE=1
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 5000 } });
});
t.teardown(async () => {
  await srv?.close();
  await db?.drop();
});

const front = (t: TapTest, o: FrontOptions): Promise<TlsPostgresFront> => tlsPostgresFront(t, upstream, o);

/** the customer database's URL with our password, through `port` on `host`, with `query` (e.g. ?sslmode=…) */
function urlVia(host: string, port: number, query = ''): string {
  const u = new URL(db.url);
  u.hostname = host;
  u.port = String(port);
  // the machine's PostgreSQL (trust) and PGlite ask for no password: it is there to be kept out of messages
  if (u.password === '') u.password = PASSWORD;
  return `${u.toString()}${query}`;
}

const probe = (): TlsProbe => ({ srv, kind: 'postgres', scope: 'read:public.tls_probe', sql: 'SELECT id, note FROM tls_probe ORDER BY id', rows: ROWS });
/** A new organization registers `secret` with `options` as its postgres credential and queries through it. */
const queryWith = (t: TapTest, secret: string, options: Record<string, unknown>): Promise<QueryAnswer> => queryAs(t, probe(), secret, options);

/** through a TLS front with `cert`, to `host` (with `query`), `options`: the rows, every session TLS with SNI `sni` */
async function expectTlsRows(t: TapTest, cert: ServerCert, host: string, options: Record<string, unknown>, sni: string | false, query = ''): Promise<void> {
  const f = await front(t, { tls: true, cert });
  expectRows(t, probe(), await queryWith(t, urlVia(host, f.port, query), options));
  expectAllTls(t, f, sni);
}

/** through a front of `o`, to `host`, `options`: refused at the connection for `why`, nothing reached the database */
async function expectRefusedVia(t: TapTest, o: FrontOptions, host: string, options: Record<string, unknown>, why: RegExp): Promise<TlsPostgresFront> {
  const f = await front(t, o);
  expectTlsRefused(t, 'postgres', await queryWith(t, urlVia(host, f.port), options), why);
  expectNothingForwarded(t, f);
  return f;
}

certificateCases(certs, { rows: expectTlsRows, refused: (t, cert, host, options, why) => expectRefusedVia(t, { tls: true, cert }, host, options, why), sniUnverified: 'localhost' });

t.test('prefer (the default) uses TLS when the server offers it', async (t) => {
  await expectTlsRows(t, CERTS.foreign, 'localhost', {}, 'localhost');
});

t.test('disable never asks for TLS', async (t) => {
  const f = await front(t, { tls: true, cert: CERTS.both });
  const r = await queryWith(t, urlVia('localhost', f.port, '?sslmode=disable'), {});
  expectRows(t, probe(), r);
  t.ok(f.sessions.length >= 1);
  for (const s of f.sessions) t.same(s, { sslRequest: false, tls: false, servername: undefined, tlsError: undefined, forwarded: true }, 'a plaintext session');

  // a server that admits TLS connections only refuses it, and says why
  const strict = await front(t, { tls: true, cert: CERTS.both, plaintext: 'refuse' });
  const r2 = await queryWith(t, urlVia('localhost', strict.port, '?sslmode=disable'), {});
  t.equal(r2.status, 400, r2.text);
  t.equal(r2.body.error?.code, 'invalid_request');
  t.equal(r2.body.error?.details?.['reason'], 'credential_rejected');
  t.match(r2.body.error?.message, /no pg_hba\.conf entry .* no encryption, SQLSTATE 28000/);
  t.equal(r2.body.rows, undefined, 'no rows');
  t.ok(strict.sessions.length >= 1 && strict.sessions.every((s) => !s.sslRequest && !s.forwarded), 'plaintext, refused by the front');
});

t.test('a server without TLS: require and verify-* are refused, never plaintext; prefer goes on in plaintext', async (t) => {
  for (const [sslmode, ca] of [['require', undefined], ['verify-ca', ours.certPem], ['verify-full', ours.certPem]] as const) {
    await expectRefusedVia(t, { tls: false }, 'localhost', { sslmode, ...(ca ? { ca } : {}) }, /The server does not support SSL connections/);
  }
  const f = await front(t, { tls: false });
  const r = await queryWith(t, urlVia('localhost', f.port), { sslmode: 'prefer' });
  expectRows(t, probe(), r);
  t.ok(f.sessions[0]?.sslRequest, 'prefer asked for TLS first');
  t.ok(
    f.sessions.some((s) => s.forwarded && !s.tls),
    'then reached the database in plaintext',
  );
  t.ok(f.sessions.every((s) => !s.tls));
});
