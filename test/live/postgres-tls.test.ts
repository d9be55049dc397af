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
import { createCa, issueServerCertificate, type Ca } from '../../pki/index.js';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';
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
const DAY_MS = 86_400_000;
/** made 60 days ago, so that it could issue a certificate that has expired since */
const ours: Ca = createCa({ keyBits: 2048, now: new Date(Date.now() - 60 * DAY_MS) });
const theirs: Ca = createCa({ keyBits: 2048 });
const issue = (ca: Ca, names: { dnsNames?: string[]; ipAddresses?: string[] }, validity: { now?: Date; validityDays?: number } = {}) =>
  issueServerCertificate(ca, { ...names, ...validity, keyBits: 2048 });
const CERTS = {
  /** ours, for localhost and 127.0.0.1 */
  both: issue(ours, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }),
  /** ours, for another host name */
  other: issue(ours, { dnsNames: ['db.elsewhere.example'] }),
  /** ours, for the address 127.0.0.1 only */
  ipOnly: issue(ours, { ipAddresses: ['127.0.0.1'] }),
  /** ours, for the name localhost only */
  nameOnly: issue(ours, { dnsNames: ['localhost'] }),
  /** another CA's, for localhost and 127.0.0.1 */
  foreign: issue(theirs, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }),
  /** ours, for localhost and 127.0.0.1, valid for one day 50 days ago */
  expired: issue(ours, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }, { now: new Date(Date.now() - 50 * DAY_MS), validityDays: 1 }),
};

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

interface QueryBody {
  rows?: Record<string, unknown>[];
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

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

/** A new organization registers `secret` with `options` as its postgres credential and queries through it. */
async function queryWith(t: TapTest, secret: string, options: Record<string, unknown>) {
  const a = await signupAgent(srv.url);
  const reg = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret, options } });
  // registration checks the address only (control-plane/live/postgres.ts checkCredential): TLS is met at the first query
  t.equal(reg.status, 201, `registered: ${reg.text}`);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.tls_probe']);
  const r = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT id, note FROM tls_probe ORDER BY id' } });
  const password = new URL(secret).password;
  t.notOk(r.text.includes(password), 'the answer does not contain the password');
  t.notOk(r.text.includes(secret.split('?')[0] as string), 'nor the URL');
  return r;
}

function expectRows(t: TapTest, r: { status: number; text: string; body: QueryBody }): void {
  t.equal(r.status, 200, r.text);
  t.same(r.body.rows, ROWS, 'the rows of the database behind the front');
}

/** refused at the connection, before any statement: 400 credential_rejected naming TLS, no rows */
function expectTlsRefused(t: TapTest, r: { status: number; text: string; body: QueryBody }, why: RegExp): void {
  t.equal(r.status, 400, r.text);
  t.equal(r.body.error?.code, 'invalid_request');
  t.equal(r.body.error?.details?.['reason'], 'credential_rejected');
  t.equal(r.body.error?.details?.['connector_kind'], 'postgres');
  t.match(r.body.error?.message, /^TLS to the postgres server failed: .*; check sslmode \/ ca of the registered credential$/);
  t.match(r.body.error?.message, why);
  t.equal(r.body.rows, undefined, 'no rows');
}

/** every session of `f` was TLS, with SNI `servername` (false: none), and reached the database */
function expectAllTls(t: TapTest, f: TlsPostgresFront, servername: string | false): void {
  t.ok(f.sessions.length >= 1, 'the front was connected to');
  for (const s of f.sessions) t.same(s, { sslRequest: true, tls: true, servername, tlsError: undefined, forwarded: true }, 'a TLS session');
}

/** no byte of any session of `f` reached the database */
function expectNothingForwarded(t: TapTest, f: TlsPostgresFront): void {
  t.ok(f.sessions.length >= 1, 'the front was connected to');
  t.ok(
    f.sessions.every((s) => s.sslRequest && !s.forwarded),
    'every session asked for TLS, and none reached the database',
  );
}

type Cert = { readonly keyPem: string; readonly certPem: string };

/** through a TLS front with `cert`, to `host` (with `query`), `options`: the rows, every session TLS with SNI `sni` */
async function expectTlsRows(t: TapTest, cert: Cert, host: string, options: Record<string, unknown>, sni: string | false, query = ''): Promise<void> {
  const f = await front(t, { tls: true, cert });
  expectRows(t, await queryWith(t, urlVia(host, f.port, query), options));
  expectAllTls(t, f, sni);
}

/** through a front of `o`, to `host`, `options`: refused at the connection for `why`, nothing reached the database */
async function expectRefusedVia(t: TapTest, o: FrontOptions, host: string, options: Record<string, unknown>, why: RegExp): Promise<TlsPostgresFront> {
  const f = await front(t, o);
  expectTlsRefused(t, await queryWith(t, urlVia(host, f.port), options), why);
  expectNothingForwarded(t, f);
  return f;
}

const NOT_TRUSTED = /unable to (get local issuer certificate|verify the first certificate)/;

t.test('verify-full, our CA, the certificate names the URL’s host name: rows, over TLS with SNI', async (t) => {
  await expectTlsRows(t, CERTS.both, 'localhost', { ca: ours.certPem }, 'localhost', '?sslmode=verify-full');
});

t.test('verify-full to an IP address, a certificate with that IP address: rows, no SNI', async (t) => {
  await expectTlsRows(t, CERTS.ipOnly, '127.0.0.1', { sslmode: 'verify-full', ca: ours.certPem }, false);
});

t.test('verify-full refuses a certificate of our CA for another name', async (t) => {
  const why = /Hostname\/IP does not match certificate's altnames: Host: localhost\. is not in the cert's altnames: DNS:db\.elsewhere\.example/;
  await expectRefusedVia(t, { tls: true, cert: CERTS.other }, 'localhost', { sslmode: 'verify-full', ca: ours.certPem }, why);
});

t.test('verify-full checks the URL’s host name, not the address svc connects to', async (t) => {
  // the name resolves to 127.0.0.1 and svc connects to that address; a certificate for the address only does not name the host
  const verifyFull = { sslmode: 'verify-full', ca: ours.certPem };
  const f = await expectRefusedVia(t, { tls: true, cert: CERTS.ipOnly }, 'localhost', verifyFull, /Hostname\/IP does not match certificate's altnames: Host: localhost\. is not/);
  t.equal(f.sessions[0]?.servername, undefined, 'the handshake did not complete');
  // and an IP address in the URL is checked as that address: a certificate naming only localhost does not do
  await expectRefusedVia(t, { tls: true, cert: CERTS.nameOnly }, '127.0.0.1', verifyFull, /IP: 127\.0\.0\.1 is not in the cert's list/);
});

t.test('options.ca may hold several certificates: any of them is trusted', async (t) => {
  await expectTlsRows(t, CERTS.both, 'localhost', { sslmode: 'verify-full', ca: `${theirs.certPem}\n${ours.certPem}` }, 'localhost');
});

t.test('verify-ca and verify-full refuse an expired certificate; require does not look', async (t) => {
  for (const sslmode of ['verify-ca', 'verify-full']) {
    await expectRefusedVia(t, { tls: true, cert: CERTS.expired }, 'localhost', { sslmode, ca: ours.certPem }, /certificate has expired/);
  }
  await expectTlsRows(t, CERTS.expired, 'localhost', { sslmode: 'require' }, 'localhost');
});

t.test('verify-ca checks the chain and not the name', async (t) => {
  await expectTlsRows(t, CERTS.other, 'localhost', { ca: ours.certPem }, 'localhost', '?sslmode=verify-ca');
});

t.test('verify-ca and verify-full refuse a certificate of another CA', async (t) => {
  for (const sslmode of ['verify-ca', 'verify-full']) {
    await expectRefusedVia(t, { tls: true, cert: CERTS.foreign }, 'localhost', { sslmode, ca: ours.certPem }, NOT_TRUSTED);
  }
});

t.test('verify-ca and verify-full without options.ca trust the system store only', async (t) => {
  for (const sslmode of ['verify-ca', 'verify-full']) await expectRefusedVia(t, { tls: true, cert: CERTS.both }, 'localhost', { sslmode }, NOT_TRUSTED);
});

t.test('require encrypts and checks no certificate', async (t) => {
  for (const cert of [CERTS.foreign, CERTS.other]) await expectTlsRows(t, cert, 'localhost', { sslmode: 'require' }, 'localhost');
});

t.test('prefer (the default) uses TLS when the server offers it', async (t) => {
  await expectTlsRows(t, CERTS.foreign, 'localhost', {}, 'localhost');
});

t.test('disable never asks for TLS', async (t) => {
  const f = await front(t, { tls: true, cert: CERTS.both });
  const r = await queryWith(t, urlVia('localhost', f.port, '?sslmode=disable'), {});
  expectRows(t, r);
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
  expectRows(t, r);
  t.ok(f.sessions[0]?.sslRequest, 'prefer asked for TLS first');
  t.ok(
    f.sessions.some((s) => s.forwarded && !s.tls),
    'then reached the database in plaintext',
  );
  t.ok(f.sessions.every((s) => !s.tls));
});
