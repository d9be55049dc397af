/**
 * Outbound HTTP to addresses a customer gives us (webhook receivers, REST connectors), guarded
 * against server-side request forgery:
 *
 * - only `http:` / `https:` URLs, no credentials in the URL, bounded length;
 * - the host is resolved once, EVERY resolved address is checked (private, loopback, link-local,
 *   CGNAT, metadata, multicast, reserved, IPv6 loopback/ULA/link-local, v4 embedded in v6 …),
 *   and the connection is made to the checked address itself (the check runs inside the socket's
 *   `lookup`, so a DNS answer cannot change between the check and the connect);
 * - redirects are never followed (a 3xx is returned as it is);
 * - a deadline covers connect, request and response; the response body is read up to a cap.
 *
 * `allowPrivate: 'private-use'` (webhook receivers under SVC_WEBHOOK_ALLOW_PRIVATE=1) lifts the
 * address check for loopback, RFC 1918, CGNAT and unique-local addresses only
 * ({@link isPrivateUseAddress}): link-local, cloud metadata, unspecified, multicast and reserved
 * addresses stay refused. `allowPrivate: true` (URLs the operator configured, SVC_HTTP_FILES_ALLOW_PRIVATE)
 * lifts it entirely. The other rules stay either way.
 *
 * Public API (kept stable; other modules import it):
 *   isForbiddenAddress(ip)           true when an IP literal must not be contacted
 *   checkUrl(url, options)           syntax rules + IP-literal hosts; returns the parsed URL
 *   assertPublicUrl(url, options)    checkUrl + resolve the host and check every address
 *   guardedLookup(options)           a `lookup` for net/http/https that refuses forbidden addresses
 *   guardedRequest(url, options)     one HTTP request under all of the above
 *   guardedFetch(url, init)          the same, answered as a WHATWG `Response` (body buffered, capped)
 */
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

export type NetErrorCode =
  | 'NET_ERR_INVALID_URL'
  | 'NET_ERR_SCHEME'
  | 'NET_ERR_CREDENTIALS'
  | 'NET_ERR_URL_TOO_LONG'
  | 'NET_ERR_FORBIDDEN_ADDRESS'
  | 'NET_ERR_DNS'
  | 'NET_ERR_TIMEOUT'
  | 'NET_ERR_CONNECT'
  | 'NET_ERR_TLS'
  | 'NET_ERR_RESPONSE_TOO_LARGE'
  | 'NET_ERR_ABORTED';

export class NetError extends Error {
  readonly code: NetErrorCode;
  constructor(code: NetErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NetError';
    this.code = code;
  }
}

export const MAX_URL_LENGTH = 2048;

export interface GuardOptions {
  /**
   * `'private-use'`: also loopback and private addresses, never link-local, metadata or reserved
   * ones (SVC_WEBHOOK_ALLOW_PRIVATE=1); `true`: any address; default false: public addresses only
   */
  readonly allowPrivate?: boolean | 'private-use';
  /** default 2048 */
  readonly maxUrlLength?: number;
}

// ---------------------------------------------------------------- addresses

const V4_FORBIDDEN: ReadonlyArray<readonly [string, number]> = [
  ['0.0.0.0', 8], // "this network", 0.0.0.0
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // CGNAT (and 100.100.100.200, a cloud metadata address)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (169.254.169.254: cloud metadata)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // TEST-NET-1
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // TEST-NET-2
  ['203.0.113.0', 24], // TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];

const V6_FORBIDDEN: ReadonlyArray<readonly [string, number]> = [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['100::', 64], // discard
  ['2001::', 23], // IETF protocol assignments (Teredo, ORCHID, …)
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local (fd00:ec2::254: a cloud metadata address)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
];

const blockV4 = new net.BlockList();
for (const [a, p] of V4_FORBIDDEN) blockV4.addSubnet(a, p, 'ipv4');
const blockV6 = new net.BlockList();
for (const [a, p] of V6_FORBIDDEN) blockV6.addSubnet(a, p, 'ipv6');

/** 16 bytes of an IPv6 literal (with an optional trailing dotted quad), or undefined. */
function ipv6Bytes(text: string): Buffer | undefined {
  let s = text.replace(/^\[|\]$/g, '');
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (net.isIPv6(s) === false) return undefined;
  const words: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted?.[1]) {
    const parts = dotted[1].split('.').map(Number);
    s = `${s.slice(0, -dotted[1].length)}${(((parts[0] ?? 0) << 8) | (parts[1] ?? 0)).toString(16)}:${(((parts[2] ?? 0) << 8) | (parts[3] ?? 0)).toString(16)}`;
  }
  const [head = '', tail] = s.split('::') as [string, string | undefined];
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = tail === undefined ? 0 : 8 - h.length - t.length;
  for (const w of h) words.push(parseInt(w, 16));
  for (let i = 0; i < fill; i++) words.push(0);
  for (const w of t) words.push(parseInt(w, 16));
  if (words.length !== 8 || words.some((w) => !Number.isInteger(w) || w < 0 || w > 0xffff)) return undefined;
  const b = Buffer.alloc(16);
  words.forEach((w, i) => b.writeUInt16BE(w, i * 2));
  return b;
}

const v4 = (b: Buffer, at: number): string => `${b[at]}.${b[at + 1]}.${b[at + 2]}.${b[at + 3]}`;

/** The IPv4 address embedded in an IPv6 one (mapped, translated, compatible, NAT64, 6to4), if any. */
function embeddedV4(b: Buffer): string | undefined {
  const zeros = (from: number, to: number): boolean => b.subarray(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(b, 12); // ::ffff:a.b.c.d
  if (zeros(0, 8) && b[8] === 0xff && b[9] === 0xff && zeros(10, 12)) return v4(b, 12); // ::ffff:0:a.b.c.d (SIIT, IPv4-translated)
  if (zeros(0, 12) && !zeros(12, 14)) return v4(b, 12); // ::a.b.c.d (deprecated compatible form)
  if (b.readUInt32BE(0) === 0x0064ff9b && zeros(4, 12)) return v4(b, 12); // 64:ff9b::/96 NAT64
  if (b.readUInt32BE(0) === 0x0064ff9b && b.readUInt16BE(4) === 1) return v4(b, 12); // 64:ff9b:1::/48 local NAT64
  if (b.readUInt16BE(0) === 0x2002) return v4(b, 2); // 2002::/16 6to4
  return undefined;
}

/**
 * True when `ip` (an IPv4 or IPv6 literal, brackets allowed) must not be contacted: private,
 * loopback, link-local, CGNAT, metadata, multicast, reserved, documentation, unspecified, or an
 * IPv6 form embedding such an IPv4 address. Anything that is not an IP literal is forbidden too.
 */
export function isForbiddenAddress(ip: string): boolean {
  const text = ip.trim().replace(/^\[|\]$/g, '');
  if (net.isIPv4(text)) return blockV4.check(text, 'ipv4');
  const b = ipv6Bytes(text);
  if (!b) return true;
  const inner = embeddedV4(b);
  if (inner !== undefined && blockV4.check(inner, 'ipv4')) return true;
  const canonical = Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2).toString(16)).join(':');
  return blockV6.check(canonical, 'ipv6');
}

/**
 * The canonical text of an IP literal (brackets and zone dropped): an IPv4-mapped IPv6 address
 * becomes its IPv4 address, other IPv6 addresses eight lower-case hex groups. Undefined for
 * anything that is not an IP literal. Two spellings of one address compare equal.
 */
export function canonicalAddress(ip: string): string | undefined {
  const text = ip.trim().replace(/^\[|\]$/g, '');
  if (net.isIPv4(text)) return text;
  const b = ipv6Bytes(text);
  if (!b) return undefined;
  if (b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff) return v4(b, 12);
  return Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2).toString(16)).join(':');
}

const privateUseV4 = new net.BlockList();
for (const [a, p] of [
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
] as const) {
  privateUseV4.addSubnet(a, p, 'ipv4');
}
const privateUseV6 = new net.BlockList();
privateUseV6.addAddress('::1', 'ipv6');
privateUseV6.addSubnet('fc00::', 7, 'ipv6');
/** metadata services inside the private ranges above (Alibaba Cloud, AWS IPv6 IMDS) */
const METADATA = new Set(['100.100.100.200', 'fd00:ec2:0:0:0:0:0:254']);

/**
 * True for the private ranges an operator may choose to reach (loopback, RFC 1918, CGNAT, IPv6
 * loopback and unique-local, and IPv4-mapped forms of these), except the cloud metadata
 * addresses among them. Never true for the unspecified address, link-local (169.254/16,
 * fe80::/10, with the metadata endpoint 169.254.169.254), multicast or reserved ranges.
 */
export function isPrivateUseAddress(ip: string): boolean {
  const c = canonicalAddress(ip);
  if (c === undefined || METADATA.has(c)) return false;
  return net.isIPv4(c) ? privateUseV4.check(c, 'ipv4') : privateUseV6.check(c, 'ipv6');
}

// ---------------------------------------------------------------- URLs

/**
 * The URL's syntax rules: parseable, `http:`/`https:`, no user or password, at most
 * `maxUrlLength` characters, a host; an IP-literal host is checked here (no DNS happens for it).
 */
export function checkUrl(url: string | URL, options: GuardOptions = {}): URL {
  const text = typeof url === 'string' ? url : url.href;
  const max = options.maxUrlLength ?? MAX_URL_LENGTH;
  if (text.length > max) throw new NetError('NET_ERR_URL_TOO_LONG', `the URL is ${text.length} characters; at most ${max} are accepted`);
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new NetError('NET_ERR_INVALID_URL', 'not a valid absolute URL');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new NetError('NET_ERR_SCHEME', `only http and https URLs are accepted, not ${u.protocol.replace(/:$/, '')}`);
  if (u.username !== '' || u.password !== '') throw new NetError('NET_ERR_CREDENTIALS', 'credentials in the URL are not accepted (put secrets in the signing secret or a header instead)');
  if (u.hostname === '') throw new NetError('NET_ERR_INVALID_URL', 'the URL has no host');
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host) !== 0 && refused(host, options)) throw new NetError('NET_ERR_FORBIDDEN_ADDRESS', forbidden(host, true, options));
  return u;
}

/** whether `ip` must not be contacted under `options` */
function refused(ip: string, options: GuardOptions): boolean {
  if (options.allowPrivate === true || !isForbiddenAddress(ip)) return false;
  return !(options.allowPrivate === 'private-use' && isPrivateUseAddress(ip));
}

/** why an address is refused: `host` is the address itself (`typed`) or a name that resolves to it (which stays out of the message) */
function forbidden(host: string, typed: boolean, options: GuardOptions): string {
  if (options.allowPrivate === 'private-use') {
    return `${typed ? `the address ${host} is` : `${host} resolves to an address that is`} link-local, a cloud metadata address, unspecified, multicast or reserved: refused even where private receivers are allowed`;
  }
  return typed
    ? `the address ${host} is private, loopback, link-local or reserved; receivers must be public`
    : `${host} resolves to a non-public address (private, loopback, link-local or reserved); receivers must be public`;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;
type Resolver = (hostname: string) => Promise<dns.LookupAddress[]>;

const systemResolver: Resolver = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

/** Resolve `hostname` and check every address; returns the allowed addresses (first one is used). */
async function resolveChecked(hostname: string, options: GuardOptions, resolve: Resolver = systemResolver): Promise<dns.LookupAddress[]> {
  const host = hostname.replace(/^\[|\]$/g, '');
  const family = net.isIP(host);
  let addresses: dns.LookupAddress[];
  if (family !== 0) addresses = [{ address: host, family }];
  else {
    try {
      addresses = await resolve(host);
    } catch (err) {
      throw new NetError('NET_ERR_DNS', `cannot resolve ${host}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`, { cause: err });
    }
  }
  if (addresses.length === 0) throw new NetError('NET_ERR_DNS', `${host} has no addresses`);
  // one forbidden answer refuses the host: a name that mixes public and private answers is a rebinding trick
  const bad = addresses.find((a) => refused(a.address, options));
  // the address itself stays out of the message: it reaches the customer, who must not learn how internal names resolve
  if (bad) throw new NetError('NET_ERR_FORBIDDEN_ADDRESS', forbidden(host, family !== 0, options));
  return addresses;
}

/** checkUrl, then resolve the host and check every address it resolves to. */
export async function assertPublicUrl(url: string | URL, options: GuardOptions = {}): Promise<{ url: URL; addresses: dns.LookupAddress[] }> {
  const u = checkUrl(url, options);
  return { url: u, addresses: await resolveChecked(u.hostname, options) };
}

/**
 * A `lookup` function for net/tls/http(s): it resolves, refuses forbidden addresses, and hands
 * the socket exactly the address it checked.
 */
export function guardedLookup(options: GuardOptions = {}, resolve?: Resolver): net.LookupFunction {
  return ((hostname: string, opts: dns.LookupOptions | number | undefined, callback: LookupCallback) => {
    const all = typeof opts === 'object' && opts !== null && opts.all === true;
    resolveChecked(hostname, options, resolve).then(
      (addresses) => {
        const first = addresses[0] as dns.LookupAddress;
        if (all) callback(null, addresses);
        else callback(null, first.address, first.family);
      },
      (err: unknown) => callback(err as NodeJS.ErrnoException, ''),
    );
  }) as unknown as net.LookupFunction;
}

// ---------------------------------------------------------------- requests

export interface GuardedRequestOptions extends GuardOptions {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Buffer;
  /** deadline for connect + request + response headers + body (default 10 s) */
  readonly timeoutMs?: number;
  /** bytes of the response body kept (default 1 MiB) */
  readonly maxResponseBytes?: number;
  /** past maxResponseBytes: stop reading and mark `truncated` (default), or fail */
  readonly onOverflow?: 'truncate' | 'error';
  readonly signal?: AbortSignal;
  /** extra TLS options (e.g. a test CA); never used to disable verification in production */
  readonly tls?: Pick<https.RequestOptions, 'ca' | 'rejectUnauthorized' | 'servername'>;
  /**
   * Asked once the status is known: a function given the body's pieces as they arrive, under the
   * same cap, instead of keeping them (the answer's `body` is then empty), or undefined to keep
   * them. What it throws ends the request and is what the request rejects with.
   */
  readonly sink?: (status: number) => ((piece: Buffer) => void) | undefined;
}

export interface GuardedResponse {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** the first maxResponseBytes of the body */
  readonly body: Buffer;
  readonly truncated: boolean;
  /** the address actually connected to */
  readonly remoteAddress: string | undefined;
}

/**
 * The certificate verification codes Node reports (OpenSSL's X509_V_ERR_* names without the
 * prefix) that the pattern in guardedRequest does not catch by name: UNABLE_TO_VERIFY_LEAF_SIGNATURE
 * is what a certificate from an unknown CA, sent without its chain, fails with
 * (test/webhooks/tls-receiver.test.ts). UNSPECIFIED is Node's code for every verification failure
 * it does not name (a CA whose keyUsage lacks keyCertSign, a name-constraint violation:
 * test/webhooks/ssrf.test.ts).
 */
const X509_VERIFY_CODES: ReadonlySet<string> = new Set([
  'UNABLE_TO_GET_CRL',
  'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'CRL_SIGNATURE_FAILURE',
  'CRL_NOT_YET_VALID',
  'CRL_HAS_EXPIRED',
  'ERROR_IN_CRL_LAST_UPDATE_FIELD',
  'ERROR_IN_CRL_NEXT_UPDATE_FIELD',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE',
  'UNSPECIFIED',
]);

/** One request, never following redirects, to a checked address, under one deadline. */
export async function guardedRequest(url: string | URL, options: GuardedRequestOptions = {}): Promise<GuardedResponse> {
  const u = checkUrl(url, options);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const cap = options.maxResponseBytes ?? 1_048_576;
  const mod = u.protocol === 'https:' ? https : http;
  const body = options.body === undefined ? undefined : Buffer.isBuffer(options.body) ? options.body : Buffer.from(options.body, 'utf8');
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (body !== undefined) headers['content-length'] = String(body.length);

  return new Promise<GuardedResponse>((resolve, reject) => {
    let settled = false;
    const finish = (err: Error | undefined, res?: GuardedResponse): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      if (err) {
        req.destroy();
        reject(err);
      } else resolve(res as GuardedResponse);
    };
    const onAbort = (): void => finish(new NetError('NET_ERR_ABORTED', 'the request was aborted'));
    const req = mod.request(u, {
      method: options.method ?? 'GET',
      headers,
      lookup: guardedLookup(options),
      agent: false, // a fresh socket per request: nothing pooled past its check
      ...(u.protocol === 'https:' ? (options.tls ?? {}) : {}),
    });
    const timer = setTimeout(() => finish(new NetError('NET_ERR_TIMEOUT', `no complete answer within ${timeoutMs} ms`)), timeoutMs);
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });

    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err instanceof NetError) return finish(err);
      const tlsLike = typeof err.code === 'string' && (/CERT|SSL|TLS|SELF_SIGNED|HOSTNAME/.test(err.code) || X509_VERIFY_CODES.has(err.code));
      // "connect ECONNREFUSED <address>:<port>": a host name's resolved address stays out of the message
      const address = (err as NodeJS.ErrnoException & { address?: unknown }).address;
      const message = typeof address === 'string' && address !== '' && net.isIP(u.hostname.replace(/^\[|\]$/g, '')) === 0 ? err.message.split(address).join(u.hostname) : err.message;
      finish(new NetError(tlsLike ? 'NET_ERR_TLS' : 'NET_ERR_CONNECT', `${err.code ?? 'error'}: ${message}`, { cause: err }));
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      let truncated = false;
      let sink: ((piece: Buffer) => void) | undefined;
      const keep = (piece: Buffer): void => {
        if (!sink) return void chunks.push(piece);
        try {
          sink(piece);
        } catch (err) {
          finish(err instanceof Error ? err : new Error(String(err)));
        }
      };
      const done = (): void =>
        finish(undefined, { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), truncated, remoteAddress: res.socket?.remoteAddress });
      try {
        sink = options.sink?.(res.statusCode ?? 0);
      } catch (err) {
        return finish(err instanceof Error ? err : new Error(String(err)));
      }
      res.on('data', (chunk: Buffer) => {
        if (truncated || settled) return;
        const room = cap - kept;
        if (chunk.length <= room) {
          kept += chunk.length;
          return keep(chunk);
        }
        if (options.onOverflow === 'error') return finish(new NetError('NET_ERR_RESPONSE_TOO_LARGE', `the response body is over ${cap} bytes`));
        kept = cap;
        truncated = true;
        keep(chunk.subarray(0, room));
        done();
        res.destroy();
      });
      res.on('end', done);
      res.on('error', (err) => finish(new NetError('NET_ERR_CONNECT', `the response broke off: ${err.message}`, { cause: err })));
    });
    req.end(body);
  });
}

export interface GuardedFetchInit extends GuardOptions {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Buffer;
  readonly timeoutMs?: number;
  /** default 10 MiB; a larger body fails with NET_ERR_RESPONSE_TOO_LARGE */
  readonly maxResponseBytes?: number;
  readonly signal?: AbortSignal;
}

/** guardedRequest answered as a WHATWG Response (redirects come back as the 3xx itself). */
export async function guardedFetch(url: string | URL, init: GuardedFetchInit = {}): Promise<Response> {
  const res = await guardedRequest(url, { ...init, maxResponseBytes: init.maxResponseBytes ?? 10 * 1_048_576, onOverflow: 'error' });
  const headers = new Headers();
  for (const [k, v] of Object.entries(res.headers)) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) headers.append(k, one);
  }
  const nullBody = res.status === 204 || res.status === 205 || res.status === 304 || res.status < 200;
  return new Response(nullBody ? null : res.body, { status: res.status < 200 ? 200 : res.status, headers });
}
