/**
 * One tunnel connection: dial → session → close, never reused (the supervisor makes a new one for
 * every attempt). `dial()` gets a transport from the dialer (wsDialer: a mutual-TLS WebSocket to
 * `tunnel_url`); `open()` runs the protocol session over it (client role; the control plane
 * opens the streams and `handler` answers them) until HELLO completes; `closed` resolves once the
 * session is over, with how it ended and whether that ending is permanent (the relay contract,
 * protocol/relay-contract.ts).
 */
import { isIP } from 'node:net';
import WebSocket from 'ws';
import { CloseCode, Session, type GoawayInfo, type IncomingQuery, type SessionCloseInfo, type SessionOptions, type Transport } from '../protocol/index.js';
import { isPermanentClose, isPermanentRefusal, RELAY_FEATURES, wsTransport } from '../protocol/relay-contract.js';
import { tlsClientOptions } from '../pki/index.js';
import { tunnelUrlProblem, type LoadedConfig } from './enroll.js';
import { RelayError } from './errors.js';
import { RELAY_AGENT_VERSION } from './version.js';

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

export interface ConnectionOptions {
  dial: Dialer;
  /** answers each stream the control plane opens */
  handler: (q: IncomingQuery) => Promise<void>;
  /** options for the protocol Session (role is always client) */
  session?: Omit<SessionOptions, 'role'>;
}

export type ConnectionPhase = 'new' | 'dialing' | 'dialed' | 'session' | 'closed';

/** How a connection's session ended. */
export interface ConnectionEnd {
  info: SessionCloseInfo;
  /** the control plane closed the tunnel for good (the relay contract's permanent closes) */
  permanent: boolean;
  /** the remote error code when the peer sent one, else the close reason */
  why: string;
  /** `<code> <reason>` and the error's message */
  text: string;
  /**
   * the control plane drained the session (GOAWAY) before it ended, with the GOAWAY's code (why:
   * TunnelDrain in the relay contract) and message when it sent them
   */
  drainedByPeer: { code: string | undefined; message: string | undefined } | null;
}

/** How a session's close reads in logs, and whether it is permanent. `goaway`: the peer's GOAWAY, when it sent one. */
export function connectionEnd(info: SessionCloseInfo, goaway: GoawayInfo | null = null): ConnectionEnd {
  const why = info.error?.code && info.error.remote ? info.error.code : info.reason;
  const text = `${info.code} ${info.reason}${info.error ? ` (${info.error.message})` : ''}`;
  return { info, permanent: isPermanentClose(info.code, info.reason), why, text, drainedByPeer: goaway ? { code: goaway.code, message: goaway.message } : null };
}

export class TunnelConnection {
  #phase: ConnectionPhase = 'new';
  #transport: Transport | null = null;
  #session: Session | null = null;
  #peerGoaway: GoawayInfo | null = null;
  readonly #o: ConnectionOptions;

  constructor(o: ConnectionOptions) {
    this.#o = o;
  }

  get phase(): ConnectionPhase {
    return this.#session?.state === 'closed' ? 'closed' : this.#phase;
  }
  /** the protocol session, once `open()` started it */
  get session(): Session | null {
    return this.#session;
  }

  /** Dials (once). Rejects with the dialer's error: a DialError says whether the refusal is permanent. */
  async dial(signal: AbortSignal): Promise<void> {
    if (this.#phase !== 'new') throw new RelayError('RELAY_ERR_STATE', `a tunnel connection dials once (it is ${this.#phase})`);
    this.#phase = 'dialing';
    try {
      this.#transport = await this.#o.dial(signal);
      this.#phase = 'dialed';
    } catch (err) {
      this.#phase = 'closed';
      throw err;
    }
  }

  /** Starts the session on the dialed transport; true once HELLO completed (false: it closed first). */
  async open(): Promise<boolean> {
    const transport = this.#transport;
    if (this.#phase !== 'dialed' || !transport) throw new RelayError('RELAY_ERR_STATE', `a tunnel connection opens its session once, after dialing (it is ${this.#phase})`);
    // (the features: what this relay does that the control plane relies on, e.g. the search_path pin)
    const session = new Session(transport, { features: [...RELAY_FEATURES], ...(this.#o.session ?? {}), role: 'client', agent: this.#o.session?.agent ?? RELAY_AGENT_VERSION });
    session.onStream((q) => this.#o.handler(q));
    session.onGoaway((g) => (this.#peerGoaway ??= g));
    this.#session = session;
    this.#phase = 'session';
    const ok = await session.ready.then(
      () => true,
      () => false,
    );
    return ok && session.state !== 'closed';
  }

  /** Resolves once the session is over (at once for a connection that never opened one). */
  async closed(): Promise<ConnectionEnd> {
    const s = this.#session;
    if (!s) return connectionEnd({ code: CloseCode.NORMAL, reason: 'closed before its session started', error: null });
    return connectionEnd(await s.closed, this.#peerGoaway);
  }

  /** GOAWAY, the running streams finish, then closed (at the latest after timeoutMs). */
  drain(timeoutMs: number, message: string): Promise<void> {
    if (!this.#session) {
      this.close(CloseCode.NORMAL, message);
      return Promise.resolve();
    }
    return this.#session.drain({ timeoutMs, message });
  }

  /** Closes now (the session's running streams fail). */
  close(code: number = CloseCode.NORMAL, reason = 'closed'): void {
    if (this.#session) this.#session.close(code, reason);
    else if (this.#phase === 'dialed') this.#transport?.close(code, reason);
    this.#phase = 'closed';
  }
}

// ------------------------------------------------------------------ the WebSocket dialer

/** TLS alerts that mean our certificate is refused for good */
const PERMANENT_TLS = /certificate revoked|certificate expired|CERTIFICATE_REVOKED|CERTIFICATE_EXPIRED|unknown ca|UNKNOWN_CA|bad certificate|BAD_CERTIFICATE/i;

/** Node's codes for a server certificate our CA (ca.pem) did not sign, or that names another host */
const UNTRUSTED_SERVER = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_SIGNATURE_FAILURE',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * What to do about a tunnel whose certificate the relay does not trust. Still retried (a balancer
 * put right, a DNS name moved back, needs no restart), but each failure says what is wrong.
 */
export function untrustedServerHint(code: unknown): string | undefined {
  if (typeof code !== 'string' || !UNTRUSTED_SERVER.has(code)) return undefined;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return 'the tunnel certificate does not name this host: tunnel_url must use a name the control plane serves (SVC_TUNNEL_PUBLIC_URL)';
  return 'the tunnel certificate is not signed by the CA in the relay config (ca.pem): tunnel_url reaches another control plane, something in between terminates TLS (a balancer must pass the tunnel through), or the control plane CA changed while this relay was away (re-enroll with `svc-relay enroll --force`)';
}

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
      const badUrl = tunnelUrlProblem(cfg.tunnel_url);
      if (badUrl !== null) {
        reject(new DialError(badUrl, { permanent: true }));
        return;
      }
      const url = new URL(cfg.tunnel_url);
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
          settle(() => reject(new DialError(`tunnel upgrade refused with HTTP ${status}${detail ? `: ${detail}` : ''}`, { status, permanent: isPermanentRefusal(status) })));
          req.destroy();
        });
        const bare = (): void => {
          settle(() => reject(new DialError(`tunnel upgrade refused with HTTP ${status}`, { status, permanent: isPermanentRefusal(status) })));
          req.destroy();
        };
        res.on('error', bare);
        res.on('close', bare);
        setTimeout(bare, 5000).unref();
      });
      ws.on('open', () => settle(() => resolve(wsTransport(ws))));
      ws.on('error', (err) => {
        const msg = err.message;
        const hint = untrustedServerHint((err as NodeJS.ErrnoException).code);
        settle(() => reject(new DialError(`cannot reach the tunnel at ${cfg.tunnel_url}: ${msg}${hint ? ` (${hint})` : ''}`, { cause: err, permanent: PERMANENT_TLS.test(msg) })));
      });
      ws.on('close', (code, reason) => settle(() => reject(new DialError(`tunnel closed during the handshake (${code} ${reason.toString()})`, { permanent: isPermanentClose(code, reason.toString()) }))));
    });
}
