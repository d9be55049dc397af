/**
 * The svc-relay daemon: one outbound mutual-TLS WebSocket to `tunnel_url`, wrapped as the
 * protocol transport (client role), answering the control plane's streams with the executor.
 *
 * State machine: connecting → connected → draining → closed (checked transitions; a lost
 * tunnel goes connected → connecting). Reconnects use full-jitter exponential backoff
 * (delay = random() × min(maxDelay, baseDelay × 2^attempt)) with an injectable clock and random,
 * and STOP on permanent refusals: HTTP 401/403 on the upgrade, close codes 4401/4403, or a close
 * reason / stream-0 error code in PERMANENT_REASONS (relay_revoked, …), or our own certificate
 * having expired.
 *
 * Certificate renewal (with `renewal`): at about half the certificate's lifetime (counted from
 * when the relay obtained it, plus a little jitter) the agent gets a new certificate for a new key
 * (renew.ts) and switches tunnels without dropping a query: it dials a second tunnel with the new
 * certificate, and once that session is ready it becomes the current one; the control plane
 * drains the previous one (GOAWAY, its running streams finish). The run loop follows the new
 * session, so the old one's close is not a lost tunnel. A failed renewal is retried with backoff;
 * a relay offline at its renewal time renews once connected.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isIP } from 'node:net';
import { X509Certificate } from 'node:crypto';
import { memoryUsage } from 'node:process';
import WebSocket from 'ws';
import { CloseCode, Session, type IncomingQuery, type SessionCloseInfo, type SessionOptions, type Transport, webSocketTransport } from '../protocol/index.js';
import { tlsClientOptions } from '../pki/index.js';
import type { LoadedConfig } from './enroll.js';
import { RelayError } from './errors.js';
import type { CertificateValidity } from './renew.js';

export const RELAY_AGENT_VERSION = 'svc-relay/0.1.0';

export type TunnelState = 'connecting' | 'connected' | 'draining' | 'closed';
export const TUNNEL_STATES: readonly TunnelState[] = ['connecting', 'connected', 'draining', 'closed'];

const TRANSITIONS: Record<TunnelState, readonly TunnelState[]> = {
  connecting: ['connected', 'closed'],
  connected: ['connecting', 'draining', 'closed'],
  draining: ['closed'],
  closed: [],
};

export function canTransition(from: TunnelState, to: TunnelState): boolean {
  return TRANSITIONS[from].includes(to);
}

/** close reasons (or stream-0 ERROR codes) from the control plane after which reconnecting is pointless */
export const PERMANENT_REASONS: ReadonlySet<string> = new Set([
  'relay_revoked',
  'relay_deleted',
  'relay_unknown',
  'certificate_revoked',
  'certificate_expired',
  'certificate_invalid',
  'unauthorized',
  'forbidden',
]);
/** WebSocket close codes treated as permanent (HTTP-like 401/403 in the private range) */
export const PERMANENT_CLOSE_CODES: ReadonlySet<number> = new Set([4401, 4403]);

/** a failed dial; `permanent` stops the reconnect loop */
export class DialError extends Error {
  readonly permanent: boolean;
  readonly status: number | undefined;
  constructor(message: string, opts: { permanent?: boolean; status?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'DialError';
    this.permanent = opts.permanent ?? false;
    this.status = opts.status;
  }
}

export type Dialer = (signal: AbortSignal) => Promise<Transport>;

export interface AgentClock {
  now(): number;
  /** resolves after ms, or early (without throwing) when signal aborts */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export const realAgentClock: AgentClock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    }),
};

export interface BackoffOptions {
  /** first ceiling, ms (default 500) */
  baseDelayMs?: number;
  /** largest ceiling, ms (default 60 000) */
  maxDelayMs?: number;
  /** [0, 1) (default Math.random) */
  random?: () => number;
}

/** full jitter: a uniform delay in [0, min(max, base × 2^attempt)) */
export function backoffDelay(attempt: number, o: BackoffOptions = {}): number {
  const base = o.baseDelayMs ?? 500;
  const max = o.maxDelayMs ?? 60_000;
  const ceiling = Math.min(max, base * 2 ** Math.min(attempt, 30));
  return Math.floor((o.random ?? Math.random)() * ceiling);
}

export interface AgentOptions {
  dial: Dialer;
  /** answers each stream the control plane opens (the executor's `handle`) */
  handler: (q: IncomingQuery) => Promise<void>;
  backoff?: BackoffOptions;
  clock?: AgentClock;
  /** options for each protocol Session (role is always client) */
  session?: Omit<SessionOptions, 'role'>;
  /** how long a SIGTERM drain waits for running queries (default 30 s) */
  drainTimeoutMs?: number;
  /** certificate expiry, for the metric and the expired-certificate check (default: renewal.certificate.notAfter) */
  certificateNotAfter?: Date;
  /** renew the certificate by itself at about half its lifetime */
  renewal?: RenewalOptions;
  log?: (line: string) => void;
}

export interface RenewalOptions {
  /** the certificate in use now */
  certificate: CertificateValidity;
  /** gets a new certificate for a new key and makes the dialer present it from now on (RelayCredentials.renew) */
  renew: (signal: AbortSignal) => Promise<CertificateValidity>;
  /** renew at this fraction of the lifetime (default 0.5) */
  fraction?: number;
  /** up to this fraction of the lifetime is added at random, so a fleet does not renew at once (default 0.05) */
  jitter?: number;
  /** backoff of retries after a failed renewal (default 1 s growing to 5 min, full jitter) */
  retry?: BackoffOptions;
  /** how long after a switch the previous tunnel is drained from this side if the control plane has not closed it (default 10 s) */
  switchGraceMs?: number;
}

export interface AgentExit {
  /** `stopped`: drained or closed on request; `permanent`: the control plane refused us for good */
  reason: 'stopped' | 'permanent';
  message: string;
}

export class RelayAgent {
  #state: TunnelState = 'connecting';
  #session: Session | null = null;
  #reconnects = 0;
  #inflight = 0;
  #attempt = 0;
  #stopping = false;
  readonly #stop = new AbortController();
  readonly #o: AgentOptions;
  readonly #clock: AgentClock;
  readonly #listeners: ((s: TunnelState) => void)[] = [];
  #running: Promise<AgentExit> | null = null;
  #lastError: string | null = null;
  // certificate and renewal
  #cert: CertificateValidity | null;
  #notAfter: Date | undefined;
  #jitterDraw = 0;
  #renewals = 0;
  #renewFailures = 0;
  #renewing: Promise<CertificateValidity> | null = null;
  #switching: Promise<void> | null = null;
  #kick = new AbortController();
  #connectedWaiters: (() => void)[] = [];

  constructor(o: AgentOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realAgentClock;
    const fraction = o.renewal?.fraction ?? 0.5;
    const jitter = o.renewal?.jitter ?? 0.05;
    if (!(fraction > 0 && fraction < 1)) throw new RelayError('RELAY_ERR_INVALID_ARGUMENT', `renewal.fraction must be in (0, 1), got ${fraction}`);
    if (!(jitter >= 0 && fraction + jitter < 1)) throw new RelayError('RELAY_ERR_INVALID_ARGUMENT', `renewal.jitter must be >= 0 with fraction + jitter < 1, got ${jitter}`);
    this.#cert = o.renewal?.certificate ?? null;
    this.#notAfter = o.certificateNotAfter ?? o.renewal?.certificate.notAfter;
    this.#jitterDraw = (o.backoff?.random ?? Math.random)();
  }

  get state(): TunnelState {
    return this.#state;
  }
  get reconnects(): number {
    return this.#reconnects;
  }
  get inflight(): number {
    return this.#inflight;
  }
  get lastError(): string | null {
    return this.#lastError;
  }
  get session(): Session | null {
    return this.#session;
  }
  /** the certificate in use (when renewal is configured) */
  get certificate(): CertificateValidity | null {
    return this.#cert;
  }
  /** certificates renewed since start */
  get renewals(): number {
    return this.#renewals;
  }
  /** renewal attempts that failed since the last success */
  get renewalFailures(): number {
    return this.#renewFailures;
  }

  /** when the certificate is due for renewal (epoch ms), or null without renewal */
  renewAt(): number | null {
    const c = this.#cert;
    if (!c) return null;
    const start = Math.max(c.notBefore.getTime(), c.obtainedAt.getTime());
    const life = Math.max(0, c.notAfter.getTime() - start);
    return Math.floor(start + life * (this.#o.renewal?.fraction ?? 0.5) + life * (this.#o.renewal?.jitter ?? 0.05) * this.#jitterDraw);
  }
  onState(cb: (s: TunnelState) => void): void {
    this.#listeners.push(cb);
  }

  /** seconds until the certificate expires (negative once expired), or null when unknown */
  certificateExpirySeconds(): number | null {
    const na = this.#notAfter;
    return na ? Math.floor((na.getTime() - this.#clock.now()) / 1000) : null;
  }

  #to(next: TunnelState): void {
    if (!canTransition(this.#state, next)) throw new RelayError('RELAY_ERR_STATE', `invalid tunnel state transition ${this.#state} → ${next}`);
    this.#state = next;
    if (next === 'connected' || next === 'closed') for (const w of this.#connectedWaiters.splice(0)) w();
    for (const cb of this.#listeners) cb(next);
  }

  #log(line: string): void {
    this.#o.log?.(line);
  }

  /** runs until stopped or permanently refused */
  run(): Promise<AgentExit> {
    if (!this.#running) {
      this.#running = this.#loop();
      if (this.#o.renewal) void this.#renewLoop();
    }
    return this.#running;
  }

  async #loop(): Promise<AgentExit> {
    for (;;) {
      if (this.#stopping) return this.#closed({ reason: 'stopped', message: 'stopped' });
      const na = this.#notAfter;
      if (na && na.getTime() <= this.#clock.now()) {
        return this.#closed({ reason: 'permanent', message: `the relay certificate expired at ${na.toISOString()}; re-enroll with \`svc-relay enroll --force\`` });
      }
      let transport: Transport;
      try {
        transport = await this.#o.dial(this.#stop.signal);
      } catch (err) {
        if (this.#stopping) return this.#closed({ reason: 'stopped', message: 'stopped' });
        const msg = (err as Error).message;
        this.#lastError = msg;
        if (err instanceof DialError && err.permanent) return this.#closed({ reason: 'permanent', message: `the control plane refused the relay: ${msg}` });
        this.#log(`tunnel dial failed: ${msg}`);
        await this.#backoff();
        continue;
      }
      if (this.#stopping) {
        transport.close(CloseCode.NORMAL, 'relay stopping');
        return this.#closed({ reason: 'stopped', message: 'stopped' });
      }
      const session = this.#newSession(transport);
      this.#session = session;
      const ok = await session.ready.then(
        () => true,
        () => false,
      );
      if (ok && session.state !== 'closed') {
        this.#to('connected');
        this.#attempt = 0;
        this.#log('tunnel connected');
      }
      const info = await this.#follow(session);
      this.#session = null;
      if (this.#stopping || this.#state === 'draining') return this.#closed({ reason: 'stopped', message: 'drained' });
      const why = info.error?.code && info.error.remote ? info.error.code : info.reason;
      const text = `${info.code} ${info.reason}${info.error ? ` (${info.error.message})` : ''}`;
      this.#lastError = text;
      if (PERMANENT_CLOSE_CODES.has(info.code) || PERMANENT_REASONS.has(info.reason) || PERMANENT_REASONS.has(why)) {
        return this.#closed({ reason: 'permanent', message: `the control plane closed the tunnel for good (${why}): ${text}. The relay was revoked or deleted, or its certificate is no longer accepted; re-enroll with a new token` });
      }
      if (this.#state === 'connected') this.#to('connecting');
      this.#log(`tunnel lost: ${text}`);
      await this.#backoff();
    }
  }

  #newSession(transport: Transport): Session {
    const session = new Session(transport, { ...(this.#o.session ?? {}), role: 'client', agent: this.#o.session?.agent ?? RELAY_AGENT_VERSION });
    session.onStream(async (q) => {
      this.#inflight++;
      try {
        await this.#o.handler(q);
      } finally {
        this.#inflight--;
      }
    });
    return session;
  }

  /** waits for the current session to close, following it across switches to a renewed certificate */
  async #follow(first: Session): Promise<SessionCloseInfo> {
    let s = first;
    for (;;) {
      const info = await s.closed;
      if (this.#switching) await this.#switching; // a switch in progress decides what is current
      const next = this.#session;
      if (next && next !== s && next.state !== 'closed') {
        s = next;
        continue;
      }
      return info;
    }
  }

  /** resolves once connected (at once if connected now), or when the agent stops */
  #whenConnected(): Promise<void> {
    if (this.#state === 'connected' || this.#state === 'closed' || this.#stop.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      this.#connectedWaiters.push(resolve);
      this.#stop.signal.addEventListener('abort', () => resolve(), { once: true });
    });
  }

  async #renewLoop(): Promise<void> {
    const retry: BackoffOptions = { baseDelayMs: 1000, maxDelayMs: 300_000, ...(this.#o.renewal?.retry ?? {}) };
    while (!this.#stopping && !this.#stop.signal.aborted) {
      const at = this.renewAt();
      if (at === null) return;
      const wait = at - this.#clock.now();
      if (wait > 0) {
        // woken early by renewNow() (a new certificate, a new time) or by stop
        await this.#clock.sleep(Math.min(wait, 2 ** 31 - 1), AbortSignal.any([this.#stop.signal, this.#kick.signal]));
        continue;
      }
      // due: renewal goes to the tunnel's port, so a relay offline now renews once connected
      if (this.#state !== 'connected') {
        await this.#whenConnected();
        continue;
      }
      try {
        await this.renewNow();
      } catch (err) {
        if (this.#stopping || this.#stop.signal.aborted) return;
        const delay = backoffDelay(this.#renewFailures - 1, retry);
        this.#log(`certificate renewal failed (attempt ${this.#renewFailures}): ${(err as Error).message}; retrying in ${delay} ms`);
        await this.#clock.sleep(delay, this.#stop.signal);
      }
    }
  }

  /**
   * Renew the certificate now (the renewal loop calls this when due; tests call it directly),
   * then switch to a tunnel that presents it. Concurrent calls share one renewal.
   */
  renewNow(): Promise<CertificateValidity> {
    const r = this.#o.renewal;
    if (!r) return Promise.reject(new RelayError('RELAY_ERR_INVALID_ARGUMENT', 'this agent has no renewal configured'));
    this.#renewing ??= (async () => {
      try {
        let v: CertificateValidity;
        try {
          v = await r.renew(this.#stop.signal);
        } catch (err) {
          this.#renewFailures++;
          throw err;
        }
        this.#renewFailures = 0;
        this.#cert = v;
        this.#notAfter = v.notAfter;
        this.#jitterDraw = (this.#o.backoff?.random ?? Math.random)();
        this.#renewals++;
        this.#log(`certificate renewed: serial ${v.serial}, valid until ${v.notAfter.toISOString()}`);
        if (this.#state === 'connected') {
          const sw = this.#switchTunnel().catch((err: unknown) => {
            this.#log(`switching to the renewed certificate failed (${(err as Error).message}); the current tunnel stays up and the next reconnect presents the new certificate`);
          });
          this.#switching = sw;
          await sw;
          if (this.#switching === sw) this.#switching = null;
        }
        return v;
      } finally {
        this.#renewing = null;
        this.#kick.abort();
        this.#kick = new AbortController();
      }
    })();
    return this.#renewing;
  }

  /** a second tunnel with the (renewed) certificate the dialer now presents; the first drains */
  async #switchTunnel(): Promise<void> {
    const old = this.#session;
    if (!old || this.#stopping) return;
    const transport = await this.#o.dial(this.#stop.signal);
    const s = this.#newSession(transport);
    const ok = await s.ready.then(
      () => true,
      () => false,
    );
    if (!ok || s.state === 'closed') {
      s.close();
      throw new RelayError('RELAY_ERR_STATE', `the tunnel with the renewed certificate closed before it was ready (${s.closeInfo?.reason ?? 'closed'})`);
    }
    // the run loop waits for this switch before it decides the tunnel was lost
    if (this.#stopping || this.#session !== old || this.#state !== 'connected') {
      s.close(CloseCode.NORMAL, 'not needed');
      return;
    }
    this.#session = s;
    this.#log('switched to the tunnel with the renewed certificate; the previous one drains');
    // a control plane that did not drain the replaced tunnel itself: drain it from this side
    const grace = setTimeout(() => {
      if (old.state !== 'closed') void old.drain({ timeoutMs: this.#o.drainTimeoutMs ?? 30_000, message: 'switched to a renewed certificate' });
    }, this.#o.renewal?.switchGraceMs ?? 10_000);
    grace.unref?.();
    void old.closed.then(() => clearTimeout(grace));
  }

  async #backoff(): Promise<void> {
    const delay = backoffDelay(this.#attempt, this.#o.backoff);
    this.#attempt++;
    this.#reconnects++;
    this.#log(`reconnecting in ${delay} ms`);
    await this.#clock.sleep(delay, this.#stop.signal);
  }

  #closed(exit: AgentExit): AgentExit {
    if (this.#state !== 'closed') this.#to('closed');
    this.#stop.abort(); // ends the renewal loop too
    this.#log(`relay ${exit.reason}: ${exit.message}`);
    return exit;
  }

  /**
   * Graceful stop (SIGTERM): GOAWAY, let running queries finish (up to drainTimeoutMs), close.
   * Resolves with the run's exit.
   */
  async drain(): Promise<AgentExit> {
    this.#stopping = true;
    const s = this.#session;
    if (this.#state === 'connected' && s) {
      this.#to('draining');
      await s.drain({ timeoutMs: this.#o.drainTimeoutMs ?? 30_000, message: 'relay shutting down' }).catch(() => {});
    } else {
      s?.close(CloseCode.NORMAL, 'relay stopping');
    }
    this.#stop.abort();
    if (this.#running) return this.#running;
    return this.#closed({ reason: 'stopped', message: 'stopped before running' });
  }
}

// ------------------------------------------------------------------ ws transport and dialer

/** the protocol transport over a connected `ws` socket; messages are buffered until the session listens */
/** The tunnel's WebSocket as the protocol transport (kept as a name for existing callers). */
export const wsTransport = (ws: WebSocket): Transport => webSocketTransport(ws);

/** TLS alerts that mean our certificate is refused for good */
const PERMANENT_TLS = /certificate revoked|certificate expired|CERTIFICATE_REVOKED|CERTIFICATE_EXPIRED|unknown ca|UNKNOWN_CA|bad certificate|BAD_CERTIFICATE/i;

export interface WsDialerOptions {
  maxPayload?: number;
  handshakeTimeoutMs?: number;
}

type DialMaterial = Pick<LoadedConfig, 'tunnel_url' | 'keyPem' | 'certPem' | 'caCertPem' | 'relay_id'>;

/**
 * dials `tunnel_url` with ws over mutual TLS using the enrolled key, certificate and CA; pass a
 * function (e.g. `() => credentials.current`) to present a renewed certificate on later dials
 */
export function wsDialer(material: DialMaterial | (() => DialMaterial), o: WsDialerOptions = {}): Dialer {
  return (signal) =>
    new Promise<Transport>((resolve, reject) => {
      const cfg = typeof material === 'function' ? material() : material;
      let url: URL;
      try {
        url = new URL(cfg.tunnel_url);
      } catch {
        reject(new DialError(`tunnel_url is not a URL: ${cfg.tunnel_url}`, { permanent: true }));
        return;
      }
      const host = url.hostname.replace(/^\[|\]$/g, '');
      const ws = new WebSocket(cfg.tunnel_url, {
        ...tlsClientOptions({ keyPem: cfg.keyPem, certPem: cfg.certPem, caCertPem: cfg.caCertPem }),
        ...(isIP(host) ? {} : { servername: host }),
        maxPayload: o.maxPayload ?? 1024 * 1024 + 12,
        // the tunnel carries its own framing and credit; compression would only add zlib buffers
        // per connection (the control plane declines it anyway)
        perMessageDeflate: false,
        handshakeTimeout: o.handshakeTimeoutMs ?? 10_000,
        headers: { 'user-agent': RELAY_AGENT_VERSION, 'x-svc-relay-id': cfg.relay_id },
      });
      let settled = false;
      const settle = (fn: () => void): void => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        fn();
      };
      const onAbort = (): void => {
        settle(() => reject(new DialError('dial aborted')));
        ws.terminate();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      ws.on('unexpected-response', (req, res) => {
        const status = res.statusCode ?? 0;
        let body = '';
        res.on('data', (c: Buffer) => {
          if (body.length < 2000) body += c.toString();
        });
        res.on('end', () => {
          let detail = body.slice(0, 300);
          try {
            const j = JSON.parse(body) as { error?: { code?: string; message?: string }; code?: string; message?: string };
            const e = j.error ?? j;
            if (e.code || e.message) detail = `${e.code ?? ''} ${e.message ?? ''}`.trim();
          } catch {
            /* not JSON */
          }
          settle(() => reject(new DialError(`tunnel upgrade refused with HTTP ${status}${detail ? `: ${detail}` : ''}`, { status, permanent: status === 401 || status === 403 })));
          req.destroy();
        });
        const bare = (): void => {
          settle(() => reject(new DialError(`tunnel upgrade refused with HTTP ${status}`, { status, permanent: status === 401 || status === 403 })));
          req.destroy();
        };
        res.on('error', bare);
        res.on('close', bare);
        setTimeout(bare, 5000).unref();
      });
      ws.on('open', () => settle(() => resolve(wsTransport(ws))));
      ws.on('error', (err) => {
        const msg = err.message;
        settle(() => reject(new DialError(`cannot reach the tunnel at ${cfg.tunnel_url}: ${msg}`, { cause: err, permanent: PERMANENT_TLS.test(msg) })));
      });
      ws.on('close', (code, reason) => settle(() => reject(new DialError(`tunnel closed during the handshake (${code} ${reason.toString()})`, { permanent: PERMANENT_CLOSE_CODES.has(code) || PERMANENT_REASONS.has(reason.toString()) }))));
    });
}

export function certificateNotAfter(certPem: string): Date {
  return new Date(new X509Certificate(certPem).validTo);
}

// ------------------------------------------------------------------ /healthz and /metrics

export function renderMetrics(agent: RelayAgent): string {
  const lines: string[] = [];
  lines.push('# HELP svc_relay_tunnel_state Tunnel state (1 for the current state).', '# TYPE svc_relay_tunnel_state gauge');
  for (const s of TUNNEL_STATES) lines.push(`svc_relay_tunnel_state{state="${s}"} ${agent.state === s ? 1 : 0}`);
  lines.push('# HELP svc_relay_reconnects_total Reconnect attempts since start.', '# TYPE svc_relay_reconnects_total counter', `svc_relay_reconnects_total ${agent.reconnects}`);
  lines.push('# HELP svc_relay_inflight_streams Queries running now.', '# TYPE svc_relay_inflight_streams gauge', `svc_relay_inflight_streams ${agent.inflight}`);
  const exp = agent.certificateExpirySeconds();
  if (exp !== null) lines.push('# HELP svc_relay_certificate_expiry_seconds Seconds until the relay certificate expires.', '# TYPE svc_relay_certificate_expiry_seconds gauge', `svc_relay_certificate_expiry_seconds ${exp}`);
  const renewAt = agent.renewAt();
  if (renewAt !== null) {
    lines.push('# HELP svc_relay_certificate_renewal_seconds Seconds until the relay renews its certificate (negative: overdue).', '# TYPE svc_relay_certificate_renewal_seconds gauge', `svc_relay_certificate_renewal_seconds ${Math.floor((renewAt - Date.now()) / 1000)}`);
  }
  lines.push('# HELP svc_relay_certificate_renewals_total Certificates renewed since start.', '# TYPE svc_relay_certificate_renewals_total counter', `svc_relay_certificate_renewals_total ${agent.renewals}`);
  lines.push('# HELP svc_relay_certificate_renewal_failures Renewal attempts failed since the last success.', '# TYPE svc_relay_certificate_renewal_failures gauge', `svc_relay_certificate_renewal_failures ${agent.renewalFailures}`);
  lines.push('# HELP process_resident_memory_bytes Resident memory size in bytes.', '# TYPE process_resident_memory_bytes gauge', `process_resident_memory_bytes ${memoryUsage.rss()}`);
  const mem = memoryUsage();
  lines.push('# HELP nodejs_memory_bytes V8 heap and off-heap memory of the relay process.', '# TYPE nodejs_memory_bytes gauge');
  for (const [k, v] of [['heap_total', mem.heapTotal], ['heap_used', mem.heapUsed], ['external', mem.external], ['array_buffers', mem.arrayBuffers]] as const) lines.push(`nodejs_memory_bytes{kind="${k}"} ${v}`);
  return lines.join('\n') + '\n';
}

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

/** local /healthz (200 only while connected, else 503) and /metrics (Prometheus text) */
export async function startHealthServer(agent: RelayAgent, port: number, host = '127.0.0.1'): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405).end();
    } else if (path === '/healthz') {
      const up = agent.state === 'connected';
      res.writeHead(up ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: up ? 'ok' : 'unavailable', state: agent.state }));
    } else if (path === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(renderMetrics(agent));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
