/**
 * `svc-relay enroll`: makes the key pair on this machine, sends only the CSR with the enroll
 * token to the control plane, and writes key/cert/CA/relay.json into the config directory
 * (directory 0700, files 0600). The private key never leaves the machine.
 * The registration is retried (retry.ts) when it gets no answer, times out, or is answered 408,
 * 429 or a 5xx; a refusal (another 4xx: unknown, used or expired token) ends it at once.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { chmodSync, closeSync, constants, existsSync, fstatSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateKeyAndCsr, identityOf } from '../pki/index.js';
import { RelayError } from './errors.js';
import { retryAfterMs, retrying, transient, transientNetworkError, transientStatus, type HttpRetryOptions } from './retry.js';

export const KEY_FILE = 'key.pem';
export const CERT_FILE = 'cert.pem';
export const CA_FILE = 'ca.pem';
export const RELAY_JSON = 'relay.json';
/** a renewed key/certificate waiting to be renamed into place (see renew.ts) */
export const NEXT_SUFFIX = '.next';

export interface RelayConfig {
  relay_id: string;
  tunnel_url: string;
  control_plane: string;
  expires_at: string;
}

export interface EnrollOptions {
  controlPlane: string;
  token: string;
  configDir: string;
  name?: string;
  /** replace an existing configuration */
  force?: boolean;
  /** RSA key size (default pki's DEFAULT_RELAY_KEY_BITS) */
  keyBits?: number;
  /** request timeout of each attempt (default 30 s) */
  timeoutMs?: number;
  /** how no answer, a timeout, 408, 429 and 5xx are retried (retry.ts; default 4 retries from 0.5 s); other refusals end at once */
  retry?: HttpRetryOptions;
  /** hears about each failed attempt that is tried again */
  log?: (line: string) => void;
  fetch?: typeof fetch;
}

export interface EnrollResult extends RelayConfig {
  configDir: string;
}

function isStr(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0;
}

export async function enroll(opts: EnrollOptions): Promise<EnrollResult> {
  if (!isStr(opts.controlPlane)) throw new RelayError('RELAY_ERR_INVALID_ARGUMENT', 'a control plane URL is required');
  if (!isStr(opts.token)) throw new RelayError('RELAY_ERR_INVALID_ARGUMENT', 'an enroll token is required');
  if (!isStr(opts.configDir)) throw new RelayError('RELAY_ERR_INVALID_ARGUMENT', 'a config directory is required');
  let base: URL;
  try {
    base = new URL(opts.controlPlane);
  } catch {
    throw new RelayError('RELAY_ERR_INVALID_ARGUMENT', `not a URL: ${opts.controlPlane}`);
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new RelayError('RELAY_ERR_INVALID_ARGUMENT', `the control plane URL must be http(s): ${opts.controlPlane}`);
  const cleartext = cleartextEnrollment(opts.controlPlane);
  if (cleartext !== null) opts.log?.(`warning: ${cleartext}`);
  const controlPlane = opts.controlPlane.replace(/\/+$/, '');
  const dir = opts.configDir;
  const existing = [KEY_FILE, CERT_FILE, CA_FILE, RELAY_JSON].filter((f) => existsSync(join(dir, f)));
  if (existing.length > 0 && !opts.force) {
    throw new RelayError('RELAY_ERR_CONFIG_EXISTS', `${dir} already holds a relay configuration (${existing.join(', ')}); pass --force to replace it`);
  }

  const { keyPem, csrPem } = generateKeyAndCsr({ commonName: opts.name && opts.name.length <= 64 ? opts.name : 'svc-relay', ...(opts.keyBits ? { keyBits: opts.keyBits } : {}) });
  const body: Record<string, string> = { enroll_token: opts.token, csr_pem: csrPem };
  if (opts.name !== undefined) body.name = opts.name;

  const doFetch = opts.fetch ?? fetch;
  // set once an attempt got no answer, or a gateway's: the control plane may have registered it
  let unanswered = false;
  const json = await retrying(
    async () => {
      let res: Response;
      try {
        res = await doFetch(`${controlPlane}/v1/relays/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(opts.timeoutMs ?? 30_000),
        });
      } catch (err) {
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        const why = cause?.code ?? cause?.message ?? (err as Error).message;
        const e = new RelayError('RELAY_ERR_UNREACHABLE', `cannot reach the control plane at ${controlPlane}: ${why}`, { cause: err });
        if (!transientNetworkError(err)) throw e;
        // a refused connection never reached it; a reset or a timeout may have
        if ((err as { cause?: { code?: string } }).cause?.code !== 'ECONNREFUSED') unanswered = true;
        throw transient(e);
      }
      const text = await res.text().catch(() => '');
      let parsed: unknown = null;
      try {
        parsed = text.length > 0 ? JSON.parse(text) : null;
      } catch {
        parsed = null;
      }
      if (res.status === 201) return parsed;
      const e = (parsed && typeof parsed === 'object' ? ((parsed as { error?: unknown }).error ?? parsed) : {}) as { code?: unknown; message?: unknown };
      const code = typeof e.code === 'string' ? e.code : `http_${res.status}`;
      const message = typeof e.message === 'string' ? e.message : text.slice(0, 200) || res.statusText;
      const hint =
        unanswered && res.status >= 400 && res.status < 500
          ? '; an earlier attempt got no answer and may have registered this relay with the token: list the relays (`svc relay list`), delete one that never came online, and enroll with a new token'
          : '';
      const refused = new RelayError('RELAY_ERR_REGISTER_REFUSED', `the control plane refused the registration (HTTP ${res.status} ${code}): ${message}${hint}`, { detail: { status: res.status, code } });
      if (!transientStatus(res.status)) throw refused;
      if (res.status === 502 || res.status === 504) unanswered = true;
      throw transient(refused, retryAfterMs(res.headers.get('retry-after')));
    },
    { what: 'registration', ...(opts.retry ? { retry: opts.retry } : {}), ...(opts.log ? { log: opts.log } : {}) },
  );
  const r = json as Record<string, unknown> | null;
  if (!r || !isStr(r.relay_id) || !isStr(r.certificate_pem) || !isStr(r.ca_certificate_pem) || !isStr(r.tunnel_url) || !isStr(r.expires_at)) {
    throw new RelayError('RELAY_ERR_BAD_RESPONSE', 'the control plane answered 201 without relay_id, certificate_pem, ca_certificate_pem, tunnel_url and expires_at');
  }
  const badUrl = tunnelUrlProblem(r.tunnel_url);
  if (badUrl !== null) throw new RelayError('RELAY_ERR_BAD_RESPONSE', `the control plane answered 201 with an unusable tunnel: ${badUrl}; nothing was written`);
  const config: RelayConfig = { relay_id: r.relay_id, tunnel_url: r.tunnel_url, control_plane: controlPlane, expires_at: r.expires_at };

  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const files: [string, string][] = [
    [KEY_FILE, keyPem],
    [CERT_FILE, r.certificate_pem],
    [CA_FILE, r.ca_certificate_pem],
    [RELAY_JSON, JSON.stringify(config, null, 2) + '\n'],
  ];
  for (const [name, content] of files) {
    const p = join(dir, name);
    if (opts.force) rmSync(p, { force: true });
    writeFileSync(p, content, { mode: 0o600, flag: 'wx' });
    chmodSync(p, 0o600);
  }
  return { ...config, configDir: dir };
}

/** write `content` to `dir/name` atomically, mode 0600 */
export function writeFileAtomic(dir: string, name: string, content: string): void {
  const final = join(dir, name);
  const tmp = join(dir, `.${name}.${process.pid}.tmp`);
  rmSync(tmp, { force: true });
  writeFileSync(tmp, content, { mode: 0o600, flag: 'wx' });
  chmodSync(tmp, 0o600);
  renameSync(tmp, final);
}

export interface LoadedConfig extends RelayConfig {
  keyPem: string;
  certPem: string;
  caCertPem: string;
}

/**
 * Why a `.next` certificate cannot finish a switch (null: it can): it must be a certificate for
 * `keyPem`, issued by our CA (ca.pem), for this relay, and not expired.
 */
function unusableNext(certPem: string, keyPem: string, caPem: string, relayId: string | undefined, now = new Date()): string | null {
  try {
    const cert = new X509Certificate(certPem);
    const ca = new X509Certificate(caPem);
    if (!cert.checkPrivateKey(createPrivateKey(keyPem))) return 'it is not the certificate of the new key';
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return 'it was not issued by the CA in ca.pem';
    if (relayId !== undefined && identityOf(cert).relayId !== relayId) return 'it names another relay';
    if (new Date(cert.validTo).getTime() <= now.getTime()) return 'it expired';
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * A renewal (renew.ts) writes key.pem.next and cert.pem.next complete, then renames the key, then
 * the certificate. By then the control plane has already superseded the old certificate, and a
 * superseded certificate can no longer renew: so an interrupted switch is FINISHED whenever the
 * new pair is usable (the certificate belongs to the new key, our CA issued it for this relay, it
 * has not expired), and only an unusable `.next` file is dropped.
 *  - key.pem.next and cert.pem.next: the renames never started; finish both.
 *  - only cert.pem.next: the key was switched; finish with the certificate.
 *  - only key.pem.next: the certificate never reached the disk; the old pair stands (it still opens
 *    the tunnel during its overlap window, but cannot renew: enroll again before it expires).
 * Returns what was done, for the log.
 */
export function finishInterruptedRenewal(configDir: string): string | null {
  const keyNext = join(configDir, KEY_FILE + NEXT_SUFFIX);
  const certNext = join(configDir, CERT_FILE + NEXT_SUFFIX);
  const keyFile = join(configDir, KEY_FILE);
  const hasKeyNext = existsSync(keyNext);
  if (!existsSync(certNext)) {
    if (!hasKeyNext) return null;
    rmSync(keyNext, { force: true });
    return `dropped ${KEY_FILE + NEXT_SUFFIX}: the renewed certificate never reached the disk, the previous certificate stands (it cannot renew itself: enroll again before it expires)`;
  }
  const certPem = readFileSync(certNext, 'utf8');
  const newKey = readFileSync(hasKeyNext ? keyNext : keyFile, 'utf8');
  let relayId: string | undefined;
  try {
    const id = (JSON.parse(readFileSync(join(configDir, RELAY_JSON), 'utf8')) as { relay_id?: unknown }).relay_id;
    relayId = typeof id === 'string' ? id : undefined;
  } catch {
    relayId = undefined;
  }
  const why = unusableNext(certPem, newKey, readFileSync(join(configDir, CA_FILE), 'utf8'), relayId);
  if (why !== null) {
    // the old pair stands, unless the key was already switched (then nothing matches the key)
    rmSync(certNext, { force: true });
    rmSync(keyNext, { force: true });
    return `dropped the interrupted renewal's ${CERT_FILE + NEXT_SUFFIX} (${why})`;
  }
  if (hasKeyNext) renameSync(keyNext, keyFile);
  renameSync(certNext, join(configDir, CERT_FILE));
  try {
    const cfg = JSON.parse(readFileSync(join(configDir, RELAY_JSON), 'utf8')) as Record<string, unknown>;
    cfg['expires_at'] = new Date(new X509Certificate(certPem).validTo).toISOString();
    writeFileAtomic(configDir, RELAY_JSON, JSON.stringify(cfg, null, 2) + '\n');
  } catch {
    /* relay.json is read (and its errors reported) by loadConfig */
  }
  return `finished an interrupted certificate renewal: the renewed key and certificate are in place`;
}

/**
 * A warning when enrolling through `controlPlane` is in the clear across a network (`http://` to
 * a host other than this one's loopback), else null: the answer carries ca.pem, the only CA the
 * relay will trust for its tunnel, and the request the enrollment token, so whoever is on the path
 * could give the relay a CA of their own or spend the token.
 */
export function cleartextEnrollment(controlPlane: string): string | null {
  let u: URL;
  try {
    u = new URL(controlPlane);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:') return null;
  const host = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)) return null;
  return `${controlPlane} is http://: the enrollment token and the CA certificate this relay will trust travel unencrypted to ${u.host}, and anyone on the path could replace that CA; enroll with the control plane's https:// URL`;
}

/**
 * Why `tunnelUrl` cannot be dialled (null: it can). The tunnel is mutual TLS or nothing: over
 * `ws://` ws would connect in the clear, check no server certificate and present none, so
 * whoever answered there could send statements and read their rows.
 */
export function tunnelUrlProblem(tunnelUrl: string): string | null {
  let u: URL;
  try {
    u = new URL(tunnelUrl);
  } catch {
    return `tunnel_url is not a URL: ${tunnelUrl}`;
  }
  return u.protocol === 'wss:' ? null : `tunnel_url must be wss:// (the tunnel is mutual TLS), got ${tunnelUrl}`;
}

/** Reads what enroll wrote (and what renewals replaced); `log` hears about a finished interrupted renewal. */
export function loadConfig(configDir: string, log?: (line: string) => void): LoadedConfig {
  try {
    const done = finishInterruptedRenewal(configDir);
    if (done !== null) log?.(done);
  } catch (err) {
    throw new RelayError('RELAY_ERR_CONFIG_INVALID', `cannot finish an interrupted certificate renewal in ${configDir}: ${(err as Error).message}`, { cause: err });
  }
  const read = (f: string): string => {
    try {
      return readFileSync(join(configDir, f), 'utf8');
    } catch (err) {
      throw new RelayError('RELAY_ERR_CONFIG_MISSING', `cannot read ${join(configDir, f)}: run \`svc-relay enroll\` first`, { cause: err });
    }
  };
  let cfg: Partial<RelayConfig>;
  try {
    cfg = JSON.parse(read(RELAY_JSON)) as Partial<RelayConfig>;
  } catch (err) {
    if (err instanceof RelayError) throw err;
    throw new RelayError('RELAY_ERR_CONFIG_INVALID', `${join(configDir, RELAY_JSON)} is not valid JSON`, { cause: err });
  }
  if (!isStr(cfg.relay_id) || !isStr(cfg.tunnel_url) || !isStr(cfg.expires_at)) {
    throw new RelayError('RELAY_ERR_CONFIG_INVALID', `${join(configDir, RELAY_JSON)} lacks relay_id, tunnel_url or expires_at`);
  }
  const badUrl = tunnelUrlProblem(cfg.tunnel_url);
  if (badUrl !== null) throw new RelayError('RELAY_ERR_CONFIG_INVALID', `${join(configDir, RELAY_JSON)}: ${badUrl}; enroll again (svc-relay enroll --force)`);
  const keyPem = readKeyFile(configDir);
  const certPem = read(CERT_FILE);
  const caCertPem = read(CA_FILE);
  checkKeyPair(configDir, keyPem, certPem);
  // the certificate's own end, not relay.json's copy: a pair installed by hand (an operator's
  // renew or rotate-cert) leaves that copy behind
  const expiresAt = new Date(new X509Certificate(certPem).validTo).toISOString();
  return { relay_id: cfg.relay_id, tunnel_url: cfg.tunnel_url, control_plane: cfg.control_plane ?? '', expires_at: expiresAt, keyPem, certPem, caCertPem };
}

/**
 * The private key, which must be readable by its owner only, as enroll and every renewal write it
 * (0600): the relay already refuses such a `--database-url-file`, and this key is its identity.
 * The mode is read from the file opened, so the file checked is the file read.
 */
function readKeyFile(configDir: string): string {
  const file = join(configDir, KEY_FILE);
  let fd: number;
  try {
    // O_NONBLOCK: opening a named pipe must not wait for a writer (fstat refuses it next)
    fd = openSync(file, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    throw new RelayError('RELAY_ERR_CONFIG_MISSING', `cannot read ${file}: run \`svc-relay enroll\` first`, { cause: err });
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new RelayError('RELAY_ERR_CONFIG_INVALID', `${file} is not a regular file`);
    const mode = st.mode & 0o777;
    if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
      throw new RelayError('RELAY_ERR_CONFIG_INVALID', `${file} can be read by other users (mode ${mode.toString(8)}); chmod 600 it (the key may have leaked: if others could read it, delete the relay and enroll again)`);
    }
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}

/**
 * key.pem must be the key of cert.pem: a pair put together by hand (a certificate from the
 * operators' `/renew` or `/rotate-cert` installed without its key, or the other way round) can
 * never open the tunnel, and would otherwise be redialled for ever with a TLS library's
 * "key values mismatch".
 */
function checkKeyPair(configDir: string, keyPem: string, certPem: string): void {
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|^Proc-Type: *4,ENCRYPTED/m.test(keyPem)) {
    // OpenSSL would only say "interrupted or cancelled" (no passphrase was given: svc-relay takes none)
    throw new RelayError(
      'RELAY_ERR_CONFIG_INVALID',
      `${join(configDir, KEY_FILE)} is encrypted with a passphrase, which svc-relay cannot use: write it unencrypted (openssl pkey -in key.pem -out key.pem.plain, then move it over key.pem, mode 0600), or enroll again`,
    );
  }
  let matches: boolean;
  try {
    matches = new X509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem));
  } catch (err) {
    throw new RelayError('RELAY_ERR_CONFIG_INVALID', `cannot read the key pair in ${configDir} (${KEY_FILE}, ${CERT_FILE}): ${(err as Error).message}`, { cause: err });
  }
  if (!matches) {
    throw new RelayError(
      'RELAY_ERR_CONFIG_INVALID',
      `${join(configDir, KEY_FILE)} is not the private key of ${join(configDir, CERT_FILE)}: put back the key that belongs to this certificate, or enroll again (svc-relay enroll --force with a new token)`,
    );
  }
}
