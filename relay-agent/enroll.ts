/**
 * `svc-relay enroll`: makes the key pair on this machine, sends only the CSR with the enroll
 * token to the control plane, and writes key/cert/CA/relay.json into the config directory
 * (directory 0700, files 0600). The private key never leaves the machine.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateKeyAndCsr } from '../pki/index.js';
import { RelayError } from './errors.js';

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
  /** request timeout (default 30 s) */
  timeoutMs?: number;
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
    throw new RelayError('RELAY_ERR_UNREACHABLE', `cannot reach the control plane at ${controlPlane}: ${why}`, { cause: err });
  }
  const text = await res.text().catch(() => '');
  let json: unknown = null;
  try {
    json = text.length > 0 ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (res.status !== 201) {
    const e = (json && typeof json === 'object' ? ((json as { error?: unknown }).error ?? json) : {}) as { code?: unknown; message?: unknown };
    const code = typeof e.code === 'string' ? e.code : `http_${res.status}`;
    const message = typeof e.message === 'string' ? e.message : text.slice(0, 200) || res.statusText;
    throw new RelayError('RELAY_ERR_REGISTER_REFUSED', `the control plane refused the registration (HTTP ${res.status} ${code}): ${message}`, { detail: { status: res.status, code } });
  }
  const r = json as Record<string, unknown> | null;
  if (!r || !isStr(r.relay_id) || !isStr(r.certificate_pem) || !isStr(r.ca_certificate_pem) || !isStr(r.tunnel_url) || !isStr(r.expires_at)) {
    throw new RelayError('RELAY_ERR_BAD_RESPONSE', 'the control plane answered 201 without relay_id, certificate_pem, ca_certificate_pem, tunnel_url and expires_at');
  }
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

export interface LoadedConfig extends RelayConfig {
  keyPem: string;
  certPem: string;
  caCertPem: string;
}

/**
 * A renewal writes key.pem.next and cert.pem.next, then renames the key, then the certificate.
 * Both still there: the switch never started, the old pair stands. Only the certificate there:
 * the key was switched, finish with the certificate.
 */
function finishInterruptedRenewal(configDir: string): void {
  const keyNext = join(configDir, KEY_FILE + NEXT_SUFFIX);
  const certNext = join(configDir, CERT_FILE + NEXT_SUFFIX);
  if (!existsSync(certNext)) return rmSync(keyNext, { force: true });
  if (existsSync(keyNext)) {
    rmSync(keyNext, { force: true });
    rmSync(certNext, { force: true });
    return;
  }
  renameSync(certNext, join(configDir, CERT_FILE));
}

/** Reads what enroll wrote (and what renewals replaced). */
export function loadConfig(configDir: string): LoadedConfig {
  try {
    finishInterruptedRenewal(configDir);
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
  return {
    relay_id: cfg.relay_id,
    tunnel_url: cfg.tunnel_url,
    control_plane: cfg.control_plane ?? '',
    expires_at: cfg.expires_at,
    keyPem: read(KEY_FILE),
    certPem: read(CERT_FILE),
    caCertPem: read(CA_FILE),
  };
}
