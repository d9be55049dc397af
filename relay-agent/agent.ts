/**
 * The svc-relay daemon's tunnel agent: an outbound mutual-TLS WebSocket to `tunnel_url`, wrapped
 * as the protocol transport (client role), answering the control plane's streams with the
 * executor. `RelayAgent` puts together:
 *
 *  - the supervisor (supervisor.ts): state machine, full-jitter backoff, the permanent-refusal
 *    policy, one connection at a time (two while replacing one);
 *  - tunnel connections (connection.ts): dial → session → close, never reused; `wsDialer`;
 *  - the certificate renewer (renewer.ts): renews at about half the lifetime, then asks the
 *    supervisor to replace the connection with one presenting the new certificate;
 *  - health and metrics (health.ts, metrics.ts) read it.
 *
 * The relay ↔ control-plane contract (close reasons, refusals, stream error codes) is
 * protocol/relay-contract.ts.
 */
import type { IncomingQuery, Session, SessionOptions } from '../protocol/index.js';
import type { Dialer } from './connection.js';
import type { CertificateValidity } from './renew.js';
import { CertificateRenewer, type RenewalOptions } from './renewer.js';
import { Supervisor, realAgentClock, type AgentClock, type AgentExit, type BackoffOptions, type TunnelState } from './supervisor.js';

/**
 * How often the relay pings the control plane (default of every tunnel session; two missed pongs
 * in a row and the tunnel is given up): a replica that stops answering without closing the
 * connection (frozen, or cut off by the network) is left within 10 to 15 s, and the relay dials
 * through the balancer again. The protocol's own default (15 s) would take 30 to 45 s.
 */
export const RELAY_PING_INTERVAL_MS = 5000;

export interface AgentOptions {
  dial: Dialer;
  /** answers each stream the control plane opens (the executor's `handle`) */
  handler: (q: IncomingQuery) => Promise<void>;
  backoff?: BackoffOptions;
  clock?: AgentClock;
  /** options for each protocol Session (role is always client; pings every RELAY_PING_INTERVAL_MS unless set) */
  session?: Omit<SessionOptions, 'role'>;
  /** how long a SIGTERM drain waits for running queries (default 30 s) */
  drainTimeoutMs?: number;
  /** certificate expiry, for the metric and the expired-certificate check (default: renewal.certificate.notAfter) */
  certificateNotAfter?: Date;
  /** renew the certificate by itself at about half its lifetime */
  renewal?: RenewalOptions;
  log?: (line: string) => void;
}

export class RelayAgent {
  readonly #supervisor: Supervisor;
  readonly #renewer: CertificateRenewer;

  constructor(o: AgentOptions) {
    const clock = o.clock ?? realAgentClock;
    this.#supervisor = new Supervisor({
      dial: o.dial,
      handler: o.handler,
      backoff: o.backoff,
      clock,
      session: { pingIntervalMs: RELAY_PING_INTERVAL_MS, ...o.session },
      drainTimeoutMs: o.drainTimeoutMs,
      certificateNotAfter: () => this.#renewer.notAfter,
      log: o.log,
    });
    this.#renewer = new CertificateRenewer(this.#supervisor, { renewal: o.renewal, certificateNotAfter: o.certificateNotAfter, clock, random: o.backoff?.random, log: o.log });
  }

  get state(): TunnelState {
    return this.#supervisor.state;
  }
  get reconnects(): number {
    return this.#supervisor.reconnects;
  }
  get inflight(): number {
    return this.#supervisor.inflight;
  }
  get lastError(): string | null {
    return this.#supervisor.lastError;
  }
  get session(): Session | null {
    return this.#supervisor.session;
  }
  /** the certificate in use (when renewal is configured) */
  get certificate(): CertificateValidity | null {
    return this.#renewer.certificate;
  }
  /** certificates renewed since start */
  get renewals(): number {
    return this.#renewer.renewals;
  }
  /** renewal attempts that failed since the last success */
  get renewalFailures(): number {
    return this.#renewer.renewalFailures;
  }

  /** when the certificate is due for renewal (epoch ms), or null without renewal */
  renewAt(): number | null {
    return this.#renewer.renewAt();
  }

  onState(cb: (s: TunnelState) => void): void {
    this.#supervisor.onState(cb);
  }

  /** seconds until the certificate expires (negative once expired), or null when unknown */
  certificateExpirySeconds(): number | null {
    return this.#renewer.certificateExpirySeconds();
  }

  /** runs until stopped or permanently refused (and renews the certificate meanwhile, with `renewal`) */
  run(): Promise<AgentExit> {
    const running = this.#supervisor.run();
    this.#renewer.start();
    return running;
  }

  /**
   * Renew the certificate now (the renewal loop calls this when due; tests call it directly),
   * then switch to a tunnel that presents it. Concurrent calls share one renewal.
   */
  renewNow(): Promise<CertificateValidity> {
    return this.#renewer.renewNow();
  }

  /**
   * Graceful stop (SIGTERM): GOAWAY, let running queries finish (up to drainTimeoutMs), close.
   * Resolves with the run's exit.
   */
  drain(): Promise<AgentExit> {
    return this.#supervisor.drain();
  }
}
