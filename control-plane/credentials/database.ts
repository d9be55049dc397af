/**
 * Database credentials (`postgres`, `mysql`): the connection URL is parsed here, once, into
 * explicit connection settings. The URL is never handed to a driver's own URL parser, whose extra
 * parameters could read files on our machine (e.g. pg's `sslrootcert`) or reach a local socket
 * (`?host=/var/run/…`). Only `sslmode` may appear in the query string; TLS material goes in the
 * credential's options. Where to connect is decided by `resolveDatabaseAddress`: the host is
 * resolved once, and the checked address is the one connected to. Private addresses are refused
 * unless the operator allows them (SVC_LIVE_ALLOW_PRIVATE=1); the unspecified address, link-local
 * and cloud metadata addresses always; and so is every database on a server the control plane
 * itself uses (matched by address and port, with every address of this host counted as one).
 *
 * Messages never contain the URL, the password or any part of them.
 */
import dns from 'node:dns';
import net from 'node:net';
import os from 'node:os';
import { ApiError } from '../errors.js';
import type { CredentialKindDef } from '../live/types.js';
import { canonicalAddress, isForbiddenAddress, isPrivateUseAddress } from '../net/index.js';

export const SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

export interface DatabaseUrl {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly database: string;
  readonly sslmode: SslMode | undefined;
}

export interface DatabaseOptions {
  readonly sslmode: SslMode;
  /** PEM CA certificate(s) the server's certificate must chain to (verify-ca / verify-full) */
  readonly ca: string | undefined;
}

const bad = (field: string, message: string): ApiError => new ApiError('invalid_request', message, { field });

/** Parse a database URL of one of `schemes` (e.g. ['postgres:', 'postgresql:']); throws 400 without echoing it. */
export function parseDatabaseUrl(secret: string, schemes: readonly string[], defaultPort: number, example: string): DatabaseUrl {
  // a `#` left unencoded in a password starts the fragment: `u:1234#x@db` reads as host `u`, port 1234
  if (/#.*@/.test(secret)) throw bad('secret', 'the URL has a # before its @: percent-encode # in the user name or password as %23');
  // so does an unencoded ?: `u:S3cr@t?Xy9@db` reads as host `t` and a parameter named "Xy9@db/…", which no message repeats
  if (/\?.*@/.test(secret)) throw bad('secret', 'the URL has a ? before its @: percent-encode ? in the user name or password as %3F (and @ as %40)');
  let u: URL;
  try {
    u = new URL(secret);
  } catch {
    throw bad('secret', `secret must be a connection URL like ${example}`);
  }
  if (!schemes.includes(u.protocol)) throw bad('secret', `secret must be a ${schemes.map((s) => s.replace(/:$/, '://')).join(' or ')} URL, like ${example}`);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (host === '') throw bad('secret', `the URL must name a host, like ${example}`);
  let decodedHost = host;
  try {
    decodedHost = decodeURIComponent(host);
  } catch {
    // stays as written: refused below
  }
  if (decodedHost.includes('/') || decodedHost.startsWith('@')) {
    throw bad('secret', 'the URL host is a Unix socket path; svc connects to databases over TCP only: give a host name or IP address (and a port)');
  }
  if (!/^[A-Za-z0-9.\-:]+$/.test(host)) throw bad('secret', 'the URL host is not a valid host name or address');
  const port = u.port === '' ? defaultPort : Number(u.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw bad('secret', 'the URL port must be 1 to 65535');
  let user: string;
  let password: string;
  let database: string;
  try {
    user = decodeURIComponent(u.username);
    password = decodeURIComponent(u.password);
    database = decodeURIComponent(u.pathname.replace(/^\//, ''));
  } catch {
    throw bad('secret', 'the URL has a malformed percent-encoding');
  }
  if (user === '') throw bad('secret', `the URL must name a user (a read-only role), like ${example}`);
  if (database === '' || database.includes('/')) throw bad('secret', `the URL must name one database as its path, like ${example}`);
  if (u.hash !== '') throw bad('secret', 'the URL must not have a #fragment');
  let sslmode: SslMode | undefined;
  for (const [k, v] of u.searchParams) {
    if (k !== 'sslmode') throw bad('secret', `the URL may carry only the sslmode parameter (got a parameter named ${JSON.stringify(k.slice(0, 40))}); put TLS settings in options`);
    if (!(SSL_MODES as readonly string[]).includes(v)) throw bad('secret', `sslmode must be one of ${SSL_MODES.join(', ')}`);
    sslmode = v as SslMode;
  }
  return { host, port, user, password, database, sslmode };
}

/** Validate a database credential's options: `sslmode` and `ca` (PEM). */
export function databaseOptions(options: Readonly<Record<string, unknown>>, url: DatabaseUrl): DatabaseOptions {
  for (const k of Object.keys(options)) {
    if (k !== 'sslmode' && k !== 'ca') throw bad(`options.${k}`, `unknown option ${JSON.stringify(k.slice(0, 40))}; options: sslmode, ca`);
  }
  const modeOpt = options['sslmode'];
  if (modeOpt !== undefined && (typeof modeOpt !== 'string' || !(SSL_MODES as readonly string[]).includes(modeOpt))) {
    throw bad('options.sslmode', `options.sslmode must be one of ${SSL_MODES.join(', ')}`);
  }
  if (modeOpt !== undefined && url.sslmode !== undefined && modeOpt !== url.sslmode) {
    throw bad('options.sslmode', 'options.sslmode and the URL sslmode disagree; give it once');
  }
  const ca = options['ca'];
  if (ca !== undefined && (typeof ca !== 'string' || !/-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----/.test(ca) || ca.length > 65_536)) {
    throw bad('options.ca', 'options.ca must be PEM certificate text (-----BEGIN CERTIFICATE----- …)');
  }
  const sslmode = (modeOpt as SslMode | undefined) ?? url.sslmode ?? 'prefer';
  if (ca !== undefined && sslmode !== 'verify-ca' && sslmode !== 'verify-full') {
    throw bad('options.ca', 'options.ca is used only with sslmode verify-ca or verify-full');
  }
  return { sslmode, ca: ca as string | undefined };
}

/**
 * A database server the control plane itself uses (state, demo data): no database on it is
 * reachable as a customer database (`database` is kept for messages only; matching is by address
 * and port).
 */
export interface ReservedDatabase {
  readonly host: string;
  readonly port: number;
  readonly database: string;
}

export function reservedFromUrl(url: string | undefined): ReservedDatabase[] {
  if (!url) return [];
  try {
    const u = new URL(url);
    return [{ host: u.hostname.replace(/^\[|\]$/g, '') || 'localhost', port: u.port ? Number(u.port) : 5432, database: decodeURIComponent(u.pathname.replace(/^\//, '')) || decodeURIComponent(u.username) }];
  } catch {
    return [];
  }
}

async function lookupAll(host: string): Promise<string[]> {
  if (net.isIP(host)) return [host];
  const found = await dns.promises.lookup(host, { all: true, verbatim: true });
  return found.map((a) => a.address);
}

/**
 * Whether `ip` is this machine: loopback (127/8, ::1), the unspecified address (0.0.0.0/8, ::,
 * which the kernel connects to this host), or any address of a local interface — in any spelling
 * (an IPv4-mapped IPv6 form counts as its IPv4 address).
 */
export function isThisHost(ip: string): boolean {
  const c = canonicalAddress(ip);
  if (c === undefined) return false;
  if (net.isIPv4(c)) {
    if (c.startsWith('127.') || c.startsWith('0.')) return true;
  } else if (c === '0:0:0:0:0:0:0:0' || c === '0:0:0:0:0:0:0:1') return true;
  for (const list of Object.values(os.networkInterfaces())) {
    for (const i of list ?? []) if (canonicalAddress(i.address) === c) return true;
  }
  return false;
}

const sameServerAddress = (a: string, b: string): boolean => {
  const ca = canonicalAddress(a);
  return (ca !== undefined && ca === canonicalAddress(b)) || (isThisHost(a) && isThisHost(b));
};

/** Azure's platform endpoint (wire server, metadata): a public-looking address that answers inside the cloud */
const AZURE_PLATFORM = '168.63.129.16';

/**
 * Whether a resolved address may be connected to: public addresses always; the private ranges
 * (loopback, RFC 1918, CGNAT, unique-local) only with `allowPrivate`; the unspecified address,
 * link-local, cloud metadata, multicast and reserved ranges never.
 */
export function databaseAddressAllowed(ip: string, allowPrivate: boolean): boolean {
  if (!isForbiddenAddress(ip)) return canonicalAddress(ip) !== AZURE_PLATFORM;
  return allowPrivate && isPrivateUseAddress(ip);
}

/**
 * The address to connect to for a credential's host: resolved once, every address checked
 * (loopback/private refused unless `allowPrivate`), and never one of the control plane's own
 * databases. Throws 400 invalid_request (reason `address_not_allowed`) or 503 when the name does
 * not resolve.
 */
export async function resolveDatabaseAddress(
  kind: string,
  url: DatabaseUrl,
  o: { allowPrivate: boolean; reserved: readonly ReservedDatabase[]; registering?: boolean },
): Promise<string> {
  // a credential being registered is "this" one, its secret the field refused; a query's is the registered one
  const subject = o.registering === true ? `this ${kind} credential` : `the registered ${kind} credential`;
  const refused = { connector_kind: kind, reason: 'address_not_allowed', ...(o.registering === true ? { field: 'secret' } : {}) };
  let addresses: string[];
  try {
    addresses = await lookupAll(url.host);
  } catch {
    throw new ApiError('service_unavailable', `the host of the registered ${kind} credential does not resolve; check it, or register the credential again`, { connector_kind: kind, reason: 'dns' });
  }
  if (addresses.length === 0) throw new ApiError('service_unavailable', `the host of the registered ${kind} credential does not resolve`, { connector_kind: kind, reason: 'dns' });
  // one refused answer refuses the host: a name mixing public and private answers is a rebinding trick
  if (addresses.some((a) => !databaseAddressAllowed(a, o.allowPrivate))) {
    const why = o.allowPrivate
      ? 'an unspecified, link-local, cloud metadata or reserved address, which this control plane never connects to'
      : 'a loopback, private or otherwise non-public address, which this control plane does not connect to (SVC_LIVE_ALLOW_PRIVATE=0)';
    throw new ApiError('invalid_request', `${subject} points at ${why}`, refused);
  }
  for (const r of o.reserved) {
    if (r.port !== url.port) continue;
    const theirs = await lookupAll(r.host).catch(() => [] as string[]);
    if (addresses.some((a) => theirs.some((b) => sameServerAddress(a, b)))) {
      throw new ApiError('invalid_request', `${subject} points at a database server of the control plane itself, which no connection can read`, refused);
    }
  }
  return addresses[0] as string;
}

/**
 * The address check of `resolveDatabaseAddress`, made when a credential is registered: a host
 * that resolves to an address no query may reach (loopback or private without
 * SVC_LIVE_ALLOW_PRIVATE=1, link-local, metadata, a database server of the control plane) is
 * refused now, with the 400 `address_not_allowed` a query would get (naming "this" credential and
 * its field, `secret`), rather than at the first query. A name that does not resolve (yet), or does not answer within `timeoutMs`, is accepted:
 * the query path resolves it again for every statement and answers 503 until it does.
 */
export async function checkDatabaseAddress(kind: string, url: DatabaseUrl, o: { allowPrivate: boolean; reserved: readonly ReservedDatabase[] }, timeoutMs = 3000): Promise<void> {
  const check = resolveDatabaseAddress(kind, url, { ...o, registering: true }).then(
    () => undefined,
    (err: unknown) => {
      if (err instanceof ApiError && err.details?.['reason'] === 'address_not_allowed') throw err;
    },
  );
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
  try {
    await Promise.race([check, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Remove the credential's secrets from a driver's message before it goes anywhere (error bodies,
 * audit events, logs): the whole secret and the password, as written and percent-encoded. The
 * user name is left (a server's "password authentication failed for user …" names it, and it is
 * the organization's own).
 */
export function scrub(message: string, secret: string, url?: DatabaseUrl): string {
  let out = message;
  const parts = [secret, url?.password, url && url.password ? encodeURIComponent(url.password) : undefined].filter((p): p is string => typeof p === 'string' && p.length >= 3);
  for (const p of parts) out = out.split(p).join('[redacted]');
  return out;
}

/** The stored credential refused by its server (or no longer valid): 400 naming the kind to register again. */
export function credentialRejected(kind: string, why: string): ApiError {
  return new ApiError('invalid_request', `the ${kind} server refused the registered ${kind} credential (${why}); register it again with POST /v1/connections/credentials`, {
    reason: 'credential_rejected',
    connector_kind: kind,
  });
}

export interface DatabaseEndpoint {
  readonly url: DatabaseUrl;
  readonly options: DatabaseOptions;
  /** the checked address to connect to */
  readonly address: string;
}

/** A stored database credential opened for one statement: parsed again, and its address checked. */
export async function databaseEndpoint(
  kind: string,
  credential: { readonly secret: string; readonly options: Readonly<Record<string, unknown>> },
  parse: (secret: string) => DatabaseUrl,
  network: { allowPrivate: boolean; reserved: readonly ReservedDatabase[] },
): Promise<DatabaseEndpoint> {
  let url: DatabaseUrl;
  let options: DatabaseOptions;
  try {
    url = parse(credential.secret);
    options = databaseOptions(credential.options, url);
  } catch {
    throw credentialRejected(kind, 'the stored URL no longer passes validation');
  }
  return { url, options, address: await resolveDatabaseAddress(kind, url, network) };
}

/** The credential kind of a database (`postgres`, `mysql`): a URL of `schemes`, the sslmode and ca options. */
export function databaseCredentialKind(d: {
  readonly kind: string;
  readonly product: string;
  readonly schemes: readonly string[];
  readonly example: string;
  /** what sslmode=prefer does with this driver */
  readonly prefer: string;
  readonly parse: (secret: string) => DatabaseUrl;
}): CredentialKindDef {
  const schemes = d.schemes.map((x) => x.replace(/:$/, '://'));
  return {
    kind: d.kind,
    targets: [d.kind],
    description: `A ${d.product} connection URL for a role that can only read what agents may see (GRANT SELECT on those tables, nothing else).`,
    secret: { description: `a ${schemes.join(' (or ')}) URL naming user, password, host, port and database; only the sslmode parameter is accepted in it`, example: d.example },
    options: [
      { name: 'sslmode', required: false, description: `TLS: disable, prefer (the default: ${d.prefer}), require (TLS, certificate not checked), verify-ca, verify-full (certificate and host name checked)` },
      { name: 'ca', required: false, description: 'PEM CA certificate(s) for verify-ca / verify-full (default: the system trust store)' },
    ],
    validation: `the URL must parse, use ${schemes.join(' or ')}, and name a user, a host and one database; sslmode one of ${SSL_MODES.join(', ')}; ca PEM text`,
    validate(secret, options) {
      const o = databaseOptions(options, d.parse(secret));
      return { sslmode: o.sslmode, ...(o.ca !== undefined ? { ca: o.ca } : {}) };
    },
  };
}
