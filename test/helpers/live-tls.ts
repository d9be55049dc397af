/**
 * What the sslmode tests of the live database targets share (test/live/postgres-tls.test.ts,
 * test/live/mysql-tls.test.ts): the certificates, issued in the test by CAs of its own
 * (pki/index.ts); registering a credential and querying through it over the control plane's HTTP
 * API; and the assertions on the answer and on the sessions a TLS front (tls-front.ts) recorded.
 */
import t from 'tap';
import { createCa, issueServerCertificate, type Ca } from '../../pki/index.js';
import { api, openConnection, signupAgent, type TestServer } from './server.js';
import type { FrontSession, ServerCert } from './tls-front.js';
import type { TapTest } from './tap.js';

const DAY_MS = 86_400_000;

export interface TlsCertificates {
  /** our CA, made 60 days ago so that it could issue a certificate that has expired since */
  readonly ours: Ca;
  /** another CA */
  readonly theirs: Ca;
  readonly certs: {
    /** ours, for localhost and 127.0.0.1 */
    readonly both: ServerCert;
    /** ours, for another host name */
    readonly other: ServerCert;
    /** ours, for the address 127.0.0.1 only */
    readonly ipOnly: ServerCert;
    /** ours, for the name localhost only */
    readonly nameOnly: ServerCert;
    /** another CA's, for localhost and 127.0.0.1 */
    readonly foreign: ServerCert;
    /** ours, for localhost and 127.0.0.1, valid for one day 50 days ago */
    readonly expired: ServerCert;
  };
}

/** two CAs and their server certificates (2048-bit keys) */
export function tlsCertificates(): TlsCertificates {
  const ours = createCa({ keyBits: 2048, now: new Date(Date.now() - 60 * DAY_MS) });
  const theirs = createCa({ keyBits: 2048 });
  const issue = (ca: Ca, names: { dnsNames?: string[]; ipAddresses?: string[] }, validity: { now?: Date; validityDays?: number } = {}): ServerCert =>
    issueServerCertificate(ca, { ...names, ...validity, keyBits: 2048 });
  const local = { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] };
  return {
    ours,
    theirs,
    certs: {
      both: issue(ours, local),
      other: issue(ours, { dnsNames: ['db.elsewhere.example'] }),
      ipOnly: issue(ours, { ipAddresses: ['127.0.0.1'] }),
      nameOnly: issue(ours, { dnsNames: ['localhost'] }),
      foreign: issue(theirs, local),
      expired: issue(ours, local, { now: new Date(Date.now() - 50 * DAY_MS), validityDays: 1 }),
    },
  };
}

export const NOT_TRUSTED = /unable to (get local issuer certificate|verify the first certificate)/;

export interface QueryBody {
  rows?: Record<string, unknown>[];
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

export interface QueryAnswer {
  readonly status: number;
  readonly text: string;
  readonly body: QueryBody;
}

/** what a test queries: the target, a scope and a statement, and the rows it must answer */
export interface TlsProbe {
  readonly srv: TestServer;
  readonly kind: 'postgres' | 'mysql';
  readonly scope: string;
  readonly sql: string;
  readonly rows: readonly Record<string, unknown>[];
}

/** A new organization registers `secret` with `options` as its credential of `p.kind` and runs `p.sql` through it. */
export async function queryWith(t: TapTest, p: TlsProbe, secret: string, options: Record<string, unknown>): Promise<QueryAnswer> {
  const a = await signupAgent(p.srv.url);
  const reg = await api(p.srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: p.kind, secret, options } });
  // registration checks the address only (checkCredential of the target): TLS is met at the first query
  t.equal(reg.status, 201, `registered: ${reg.text}`);
  const conn = await openConnection(p.srv.url, a.key, p.kind, [p.scope]);
  const r = await api<QueryBody>(p.srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: p.sql } });
  const password = new URL(secret).password;
  t.notOk(r.text.includes(password), 'the answer does not contain the password');
  t.notOk(r.text.includes(secret.split('?')[0] as string), 'nor the URL');
  return r;
}

export function expectRows(t: TapTest, p: TlsProbe, r: QueryAnswer): void {
  t.equal(r.status, 200, r.text);
  t.same(r.body.rows, p.rows, 'the rows of the database behind the front');
}

/** refused at the connection, before any statement: 400 credential_rejected naming TLS, no rows */
export function expectTlsRefused(t: TapTest, kind: TlsProbe['kind'], r: QueryAnswer, why: RegExp): void {
  t.equal(r.status, 400, r.text);
  t.equal(r.body.error?.code, 'invalid_request');
  t.equal(r.body.error?.details?.['reason'], 'credential_rejected');
  t.equal(r.body.error?.details?.['connector_kind'], kind);
  t.match(r.body.error?.message, new RegExp(`^TLS to the ${kind} server failed: .*; check sslmode / ca of the registered credential$`));
  t.match(r.body.error?.message, why);
  t.equal(r.body.rows, undefined, 'no rows');
}

/** every session of `f` was TLS, with SNI `servername` (false: none), and reached the database; `extra`: the front's own fields */
export function expectAllTls<S extends FrontSession>(t: TapTest, f: { readonly sessions: readonly S[] }, servername: string | false, extra: Partial<S> = {}): void {
  t.ok(f.sessions.length >= 1, 'the front was connected to');
  for (const s of f.sessions) t.same(s, { sslRequest: true, tls: true, servername, tlsError: undefined, forwarded: true, ...extra }, 'a TLS session');
}

/** no login of any session of `f` reached the database */
export function expectNothingForwarded(t: TapTest, f: { readonly sessions: readonly FrontSession[] }): void {
  t.ok(f.sessions.length >= 1, 'the front was connected to');
  t.ok(
    f.sessions.every((s) => s.sslRequest && !s.forwarded),
    'every session asked for TLS, and none reached the database',
  );
}

/** how a test meets a TLS front with a certificate: {@link certificateCases} runs its cases through these */
export interface CertificateRunner {
  /** through a TLS front with `cert`, to `host` (with `query`), `options`: the rows, every session TLS with SNI `sni` */
  rows(t: TapTest, cert: ServerCert, host: string, options: Record<string, unknown>, sni: string | false, query?: string): Promise<void>;
  /** through a TLS front with `cert`, to `host`, `options`: refused at the connection for `why`, nothing reached the database */
  refused(t: TapTest, cert: ServerCert, host: string, options: Record<string, unknown>, why: RegExp): Promise<{ readonly sessions: readonly FrontSession[] }>;
  /** the SNI name sent under require and verify-ca to the host localhost (false: none) */
  readonly sniUnverified: string | false;
}

/**
 * The cases of certificates every target shares: verify-full checks the URL's host, verify-ca the
 * chain only, require nothing; a CA of options.ca (several may be given) or the system store.
 */
export function certificateCases(x: TlsCertificates, run: CertificateRunner): void {
  const { ours, theirs, certs } = x;
  const sni = run.sniUnverified;

  t.test('verify-full, our CA, the certificate names the URL’s host name: rows, over TLS with SNI', async (t) => {
    await run.rows(t, certs.both, 'localhost', { ca: ours.certPem }, 'localhost', '?sslmode=verify-full');
  });

  t.test('verify-full to an IP address, a certificate with that IP address: rows, no SNI', async (t) => {
    await run.rows(t, certs.ipOnly, '127.0.0.1', { sslmode: 'verify-full', ca: ours.certPem }, false);
  });

  t.test('verify-full refuses a certificate of our CA for another name', async (t) => {
    const why = /Hostname\/IP does not match certificate's altnames: Host: localhost\. is not in the cert's altnames: DNS:db\.elsewhere\.example/;
    await run.refused(t, certs.other, 'localhost', { sslmode: 'verify-full', ca: ours.certPem }, why);
  });

  t.test('verify-full checks the URL’s host name, not the address svc connects to', async (t) => {
    // the name resolves to 127.0.0.1 and svc connects to that address; a certificate for the address only does not name the host
    const verifyFull = { sslmode: 'verify-full', ca: ours.certPem };
    const f = await run.refused(t, certs.ipOnly, 'localhost', verifyFull, /Hostname\/IP does not match certificate's altnames: Host: localhost\. is not/);
    t.equal(f.sessions[0]?.servername, undefined, 'the handshake did not complete');
    // and an IP address in the URL is checked as that address: a certificate naming only localhost does not do
    await run.refused(t, certs.nameOnly, '127.0.0.1', verifyFull, /IP: 127\.0\.0\.1 is not in the cert's list/);
  });

  t.test('options.ca may hold several certificates: any of them is trusted', async (t) => {
    await run.rows(t, certs.both, 'localhost', { sslmode: 'verify-full', ca: `${theirs.certPem}\n${ours.certPem}` }, 'localhost');
  });

  t.test('verify-ca and verify-full refuse an expired certificate; require does not look', async (t) => {
    for (const sslmode of ['verify-ca', 'verify-full']) {
      await run.refused(t, certs.expired, 'localhost', { sslmode, ca: ours.certPem }, /certificate has expired/);
    }
    await run.rows(t, certs.expired, 'localhost', { sslmode: 'require' }, sni);
  });

  t.test('verify-ca checks the chain and not the name', async (t) => {
    await run.rows(t, certs.other, 'localhost', { ca: ours.certPem }, sni, '?sslmode=verify-ca');
    await run.rows(t, certs.nameOnly, '127.0.0.1', { sslmode: 'verify-ca', ca: ours.certPem }, false);
  });

  t.test('verify-ca and verify-full refuse a certificate of another CA', async (t) => {
    for (const sslmode of ['verify-ca', 'verify-full']) {
      await run.refused(t, certs.foreign, 'localhost', { sslmode, ca: ours.certPem }, NOT_TRUSTED);
    }
  });

  t.test('verify-ca and verify-full without options.ca trust the system store only', async (t) => {
    for (const sslmode of ['verify-ca', 'verify-full']) await run.refused(t, certs.both, 'localhost', { sslmode }, NOT_TRUSTED);
  });

  t.test('require encrypts and checks no certificate', async (t) => {
    for (const cert of [certs.foreign, certs.other]) await run.rows(t, cert, 'localhost', { sslmode: 'require' }, sni);
  });
}
