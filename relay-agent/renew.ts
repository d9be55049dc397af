/**
 * Certificate renewal by the relay itself: a NEW key pair made here (the private key never leaves
 * the machine), its CSR sent over mutual TLS with the CURRENT certificate to
 * `POST /v1/relay/renew` on the tunnel port, and the answer written into the config directory
 * atomically: the new key and certificate are first written complete as `key.pem.next` and
 * `cert.pem.next` (temporary file 0600, then rename), then renamed over key.pem and cert.pem;
 * loadConfig FINISHES an interrupted switch (the old certificate is superseded by then and can
 * no longer renew), so a crash leaves the new pair in place once both `.next` files were written.
 *
 * The POST is retried (retry.ts) when it gets no answer, times out, or is answered 408, 429 or a
 * 5xx; a refusal (another 4xx: revoked relay, superseded certificate, reused key) ends it at once.
 * Every attempt sends the same CSR (one new key per renewal).
 *
 * `RelayCredentials` holds what the dialer presents; after `renew()` the next dial uses the new
 * certificate. When to renew, and again after a failed renewal, is the agent's business
 * (agent.ts: about half the lifetime).
 */
import { createPrivateKey, generateKeyPair, X509Certificate } from 'node:crypto';
import { renameSync, statSync } from 'node:fs';
import https from 'node:https';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createCsr, DEFAULT_RELAY_KEY_BITS, serialOf, tlsClientOptions } from '../pki/index.js';
import { CA_FILE, CERT_FILE, KEY_FILE, NEXT_SUFFIX, RELAY_JSON, writeFileAtomic, type LoadedConfig, type RelayConfig } from './enroll.js';
import { RelayError } from './errors.js';
import { retryAfterMs, retrying, transient, transientNetworkError, transientStatus, type HttpRetryOptions } from './retry.js';

/** the path on the tunnel port (see control-plane/tunnel) */
export const RENEW_PATH = '/v1/relay/renew';

/** what the agent needs to know about a certificate to schedule its renewal */
export interface CertificateValidity {
  readonly serial: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** when this relay obtained it (renewal counts from here: the CA back-dates notBefore for clock skew) */
  readonly obtainedAt: Date;
}

export interface RenewedCertificate extends CertificateValidity {
  readonly keyPem: string;
  readonly certPem: string;
  readonly caCertPem: string;
}

/** a refused or failed renewal; `status` is the HTTP status when the control plane answered */
export class RenewError extends RelayError {
  readonly status: number | undefined;
  readonly reason: string | undefined;
  constructor(message: string, o: { status?: number; reason?: string; cause?: unknown } = {}) {
    super('RELAY_ERR_RENEW_FAILED', message, { ...(o.cause === undefined ? {} : { cause: o.cause }), detail: { status: o.status, reason: o.reason } });
    this.status = o.status;
    this.reason = o.reason;
  }
}

export function validityOf(certPem: string, obtainedAt: Date): CertificateValidity {
  const x = new X509Certificate(certPem);
  return { serial: serialOf(x), notBefore: new Date(x.validFrom), notAfter: new Date(x.validTo), obtainedAt };
}

/** https://host:port/v1/relay/renew from the tunnel's wss:// URL */
export function renewUrl(tunnelUrl: string): URL {
  const u = new URL(tunnelUrl);
  if (u.protocol !== 'wss:') throw new RelayError('RELAY_ERR_CONFIG_INVALID', `tunnel_url must be wss://, got ${tunnelUrl}`);
  return new URL(RENEW_PATH, `https://${u.host}`);
}

const generateKeyPairAsync = promisify(generateKeyPair);

/** a fresh RSA key off the event loop (running queries are not paused) and its CSR */
async function newKeyAndCsr(bits: number): Promise<{ keyPem: string; csrPem: string }> {
  const { privateKey } = await generateKeyPairAsync('rsa', {
    modulusLength: bits,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { keyPem: privateKey, csrPem: createCsr(privateKey) };
}

export interface RequestRenewalOptions {
  keyBits?: number;
  /** each attempt's timeout (default 30 s) */
  timeoutMs?: number;
  /** how no answer, a timeout, 408, 429 and 5xx are retried (retry.ts; default 4 retries from 0.5 s); a refusal (other 4xx) ends at once */
  retry?: HttpRetryOptions;
  /** hears about each failed attempt that is tried again */
  log?: (line: string) => void;
  signal?: AbortSignal;
  /** test hook: the CSR to send instead of one for a fresh key (e.g. a key already used) */
  csr?: { keyPem: string; csrPem: string };
}

type Current = Pick<LoadedConfig, 'tunnel_url' | 'keyPem' | 'certPem' | 'caCertPem'>;

/** POST a CSR for a new key over mutual TLS with the current certificate; nothing is written */
export async function requestRenewal(current: Current, o: RequestRenewalOptions = {}): Promise<RenewedCertificate> {
  const url = renewUrl(current.tunnel_url);
  const fresh = o.csr ?? (await newKeyAndCsr(o.keyBits ?? DEFAULT_RELAY_KEY_BITS));
  const body = JSON.stringify({ csr_pem: fresh.csrPem });
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const timeoutMs = o.timeoutMs ?? 30_000;
  const post = (): Promise<{ status: number; retryAfter: string | string[] | undefined; text: string }> =>
    new Promise((resolve, reject) => {
      const req = https.request(
        url,
        {
          method: 'POST',
          ...tlsClientOptions({ keyPem: current.keyPem, certPem: current.certPem, caCertPem: current.caCertPem }),
          ...(isIP(host) ? {} : { servername: host }),
          agent: false,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), accept: 'application/json' },
          timeout: timeoutMs,
          ...(o.signal ? { signal: o.signal } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' })));
      req.on('error', reject);
      req.end(body);
    });
  const json = await retrying(
    async () => {
      const { status, retryAfter, text } = await post().catch((err: unknown) => {
        const e = new RenewError(`cannot reach ${url.href}: ${(err as Error).message}`, { cause: err });
        throw transientNetworkError(err) && !o.signal?.aborted ? transient(e) : e;
      });
      let parsed: Record<string, unknown> | null = null;
      try {
        parsed = JSON.parse(text) as Record<string, unknown>;
      } catch {
        parsed = null;
      }
      if (status === 200) return parsed;
      const e = (parsed?.['error'] ?? {}) as { code?: unknown; message?: unknown; reason?: unknown };
      const reason = typeof e.reason === 'string' ? e.reason : typeof e.code === 'string' ? e.code : undefined;
      const message = typeof e.message === 'string' ? e.message : text.slice(0, 200);
      const refused = new RenewError(`the control plane refused the renewal (HTTP ${status}${reason ? ` ${reason}` : ''}): ${message}`, { status, ...(reason ? { reason } : {}) });
      throw transientStatus(status) ? transient(refused, retryAfterMs(retryAfter)) : refused;
    },
    { what: 'certificate renewal', ...(o.retry ? { retry: o.retry } : {}), ...(o.log ? { log: o.log } : {}), ...(o.signal ? { signal: o.signal } : {}) },
  );
  const certPem = json?.['certificate_pem'];
  const caCertPem = json?.['ca_certificate_pem'];
  if (typeof certPem !== 'string' || typeof caCertPem !== 'string') throw new RenewError('the control plane answered 200 without certificate_pem and ca_certificate_pem', { status: 200 });
  const cert = new X509Certificate(certPem);
  if (!cert.checkPrivateKey(createPrivateKey(fresh.keyPem))) {
    throw new RenewError('the renewed certificate does not match the key made for it', { status: 200 });
  }
  return { ...validityOf(certPem, new Date()), keyPem: fresh.keyPem, certPem, caCertPem };
}

export { writeFileAtomic };

/** The relay's key, certificate and CA as the dialer presents them; renewable in place. */
export class RelayCredentials {
  #current: LoadedConfig;
  #validity: CertificateValidity;
  readonly #configDir: string | undefined;
  readonly #o: Omit<RequestRenewalOptions, 'signal' | 'csr'>;

  /** `configDir`: where renewals are written (omit to keep them in memory only) */
  constructor(cfg: LoadedConfig, o: { configDir?: string; obtainedAt?: Date } & Omit<RequestRenewalOptions, 'signal' | 'csr'> = {}) {
    this.#current = cfg;
    this.#configDir = o.configDir;
    this.#o = { ...(o.keyBits ? { keyBits: o.keyBits } : {}), ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}), ...(o.retry ? { retry: o.retry } : {}), ...(o.log ? { log: o.log } : {}) };
    let obtainedAt = o.obtainedAt;
    if (!obtainedAt && o.configDir) {
      try {
        obtainedAt = statSync(join(o.configDir, CERT_FILE)).mtime;
      } catch {
        obtainedAt = undefined;
      }
    }
    const v = validityOf(cfg.certPem, new Date(0));
    // the certificate file's time says when it was obtained; never before notBefore
    this.#validity = { ...v, obtainedAt: new Date(Math.max(v.notBefore.getTime(), Math.min(obtainedAt?.getTime() ?? 0, v.notAfter.getTime()))) };
  }

  get current(): LoadedConfig {
    return this.#current;
  }

  get validity(): CertificateValidity {
    return this.#validity;
  }

  /** asks for a new certificate (new key), writes it (when a config dir is set), and presents it from now on */
  async renew(signal?: AbortSignal): Promise<CertificateValidity> {
    const r = await requestRenewal(this.#current, { ...this.#o, ...(signal ? { signal } : {}) });
    // from here the control plane has superseded the certificate in use, which can no longer
    // renew: present the new one from now on, even if writing it fails below
    const previous = this.#current;
    this.#current = { ...previous, keyPem: r.keyPem, certPem: r.certPem, caCertPem: r.caCertPem, expires_at: r.notAfter.toISOString() };
    this.#validity = { serial: r.serial, notBefore: r.notBefore, notAfter: r.notAfter, obtainedAt: r.obtainedAt };
    if (this.#configDir) {
      const dir = this.#configDir;
      const cfg: RelayConfig = { relay_id: previous.relay_id, tunnel_url: previous.tunnel_url, control_plane: previous.control_plane, expires_at: r.notAfter.toISOString() };
      try {
        // the CA first, so that loadConfig can check an interrupted switch's certificate against it
        if (r.caCertPem !== previous.caCertPem) writeFileAtomic(dir, CA_FILE, r.caCertPem);
        writeFileAtomic(dir, KEY_FILE + NEXT_SUFFIX, r.keyPem);
        writeFileAtomic(dir, CERT_FILE + NEXT_SUFFIX, r.certPem);
        // key, then certificate: loadConfig completes the second rename after a crash in between
        renameSync(join(dir, KEY_FILE + NEXT_SUFFIX), join(dir, KEY_FILE));
        renameSync(join(dir, CERT_FILE + NEXT_SUFFIX), join(dir, CERT_FILE));
        writeFileAtomic(dir, RELAY_JSON, JSON.stringify(cfg, null, 2) + '\n');
      } catch (err) {
        throw new RenewError(`renewed (this process presents the new certificate), but it could not be written to ${dir}: ${(err as Error).message}; the next renewal writes again`, { cause: err });
      }
    }
    return this.#validity;
  }
}
