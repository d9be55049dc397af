/**
 * The tunnel supervisor: keeps ONE tunnel connection (connection.ts) up to the control plane, and
 * briefly two while it replaces the current one (after a certificate renewal: renewer.ts).
 *
 * State machine: connecting → connected → draining → closed (checked transitions; a lost
 * tunnel goes connected → connecting). Every attempt is a new connection. Reconnects use
 * full-jitter exponential backoff (delay = random() × min(maxDelay, baseDelay × 2^attempt)) with
 * an injectable clock and random, reset once a session is up (but not after a takeover: the control
 * plane drained the current connection for a newer one this process did not dial, a second relay
 * with the same configuration; the delay keeps growing while they repeat), and STOP on permanent refusals:
 * the dialer's (HTTP 401/403 on the upgrade, a certificate refused in the TLS handshake), a close
 * the control plane sends as permanent (protocol/relay-contract.ts: relay_revoked,
 * certificate_revoked), or our own certificate having expired.
 *
 * Replacing the connection (`replaceConnection`): a second connection is dialed; once its session
 * is ready it becomes the current one and the control plane drains the previous one (GOAWAY, its
 * running streams finish), or this side does after a grace period. The run loop follows the
 * current connection, so the previous one's close is not a lost tunnel.
 */
import { CloseCode, type IncomingQuery, type SessionOptions, type Session } from '../protocol/index.js';
import { TunnelDrain } from '../protocol/relay-contract.js';
import { DialError, TunnelConnection, type ConnectionEnd, type Dialer } from './connection.js';
import { RelayError } from './errors.js';

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

export interface AgentExit {
  /** `stopped`: drained or closed on request; `permanent`: the control plane refused us for good */
  reason: 'stopped' | 'permanent';
  message: string;
}

export interface SupervisorOptions {
  dial: Dialer;
  /** answers each stream the control plane opens */
  handler: (q: IncomingQuery) => Promise<void>;
  backoff?: BackoffOptions | undefined;
  clock: AgentClock;
  /** options for each protocol Session (role is always client) */
  session?: Omit<SessionOptions, 'role'> | undefined;
  /** how long a drain waits for running queries (default 30 s) */
  drainTimeoutMs?: number | undefined;
  /** the certificate's expiry as known now: an expired certificate is not dialed */
  certificateNotAfter: () => Date | undefined;
  log?: ((line: string) => void) | undefined;
}

export interface ReplaceOptions {
  /** the GOAWAY message of the previous connection when this side drains it */
  goaway: string;
  /** how long after the switch the previous connection is drained from this side if the control plane has not closed it */
  graceMs: number;
}

export class Supervisor {
  #state: TunnelState = 'connecting';
  #current: TunnelConnection | null = null;
  #replacing: Promise<void> | null = null;
  #reconnects = 0;
  #inflight = 0;
  #attempt = 0;
  /** connections in a row the control plane drained for a newer one this process did not dial */
  #takeovers = 0;
  #stopping = false;
  #lastError: string | null = null;
  #running: Promise<AgentExit> | null = null;
  readonly #stop = new AbortController();
  readonly #o: SupervisorOptions;
  readonly #listeners: ((s: TunnelState) => void)[] = [];
  readonly #connectedWaiters: (() => void)[] = [];

  constructor(o: SupervisorOptions) {
    this.#o = o;
  }

  get state(): TunnelState {
    return this.#state;
  }
  get reconnects(): number {
    return this.#reconnects;
  }
  /** streams being answered now, on every connection */
  get inflight(): number {
    return this.#inflight;
  }
  get lastError(): string | null {
    return this.#lastError;
  }
  /** the current connection's session */
  get session(): Session | null {
    return this.#current?.session ?? null;
  }
  /** aborted once the supervisor stops */
  get signal(): AbortSignal {
    return this.#stop.signal;
  }
  /** asked to stop, or stopped */
  get stopped(): boolean {
    return this.#stopping || this.#stop.signal.aborted;
  }

  onState(cb: (s: TunnelState) => void): void {
    this.#listeners.push(cb);
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

  readonly #handler = async (q: IncomingQuery): Promise<void> => {
    this.#inflight++;
    try {
      await this.#o.handler(q);
    } finally {
      this.#inflight--;
    }
  };

  #connection(): TunnelConnection {
    return new TunnelConnection({ dial: this.#o.dial, handler: this.#handler, ...(this.#o.session ? { session: this.#o.session } : {}) });
  }

  /** runs until stopped or permanently refused */
  run(): Promise<AgentExit> {
    this.#running ??= this.#loop();
    return this.#running;
  }

  async #loop(): Promise<AgentExit> {
    for (;;) {
      if (this.#stopping) return this.#closed({ reason: 'stopped', message: 'stopped' });
      const na = this.#o.certificateNotAfter();
      if (na && na.getTime() <= this.#o.clock.now()) {
        return this.#closed({ reason: 'permanent', message: `the relay certificate expired at ${na.toISOString()}; re-enroll with \`svc-relay enroll --force\`` });
      }
      const conn = this.#connection();
      try {
        await conn.dial(this.#stop.signal);
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
        conn.close(CloseCode.NORMAL, 'relay stopping');
        return this.#closed({ reason: 'stopped', message: 'stopped' });
      }
      this.#current = conn;
      if (await conn.open()) {
        this.#to('connected');
        this.#attempt = 0;
        this.#log('tunnel connected');
      }
      const end = await this.#follow(conn);
      this.#current = null;
      if (this.#stopping || this.#state === 'draining') return this.#closed({ reason: 'stopped', message: 'drained' });
      this.#lastError = end.text;
      if (end.permanent) {
        return this.#closed({ reason: 'permanent', message: `the control plane closed the tunnel for good (${end.why}): ${end.text}. The relay was revoked or deleted, or its certificate is no longer accepted; re-enroll with a new token` });
      }
      if (this.#state === 'connected') this.#to('connecting');
      if (end.drainedByPeer?.code === TunnelDrain.CERTIFICATE_LAPSED) {
        // not a takeover: the certificate this tunnel was opened with expired, or was replaced
        // and its overlap window ended; the next dial presents the certificate this process
        // holds now (a renewed one), or the handshake refuses it and says why
        this.#takeovers = 0;
        this.#log(`tunnel drained by the control plane: ${end.drainedByPeer.message ?? 'its certificate expired or was replaced'}`);
      } else if (end.drainedByPeer) {
        // The control plane made a newer connection of this relay current, one this process did
        // not dial: most likely a second svc-relay with the same configuration. Reconnecting at
        // once would take the tunnel back and forth between the two several times a second, so
        // the delay keeps growing while takeovers repeat.
        this.#takeovers++;
        this.#attempt = Math.max(this.#attempt, this.#takeovers);
        this.#log(
          `tunnel taken over: the control plane drained it for a newer connection of this relay (${end.drainedByPeer.message ?? end.text}; ${this.#takeovers} in a row); is another svc-relay running with this configuration?`,
        );
      } else {
        this.#takeovers = 0;
        this.#log(`tunnel lost: ${end.text}`);
      }
      await this.#backoff();
    }
  }

  /** waits for the current connection to close, following it across replacements */
  async #follow(first: TunnelConnection): Promise<ConnectionEnd> {
    let c = first;
    for (;;) {
      const end = await c.closed();
      if (this.#replacing) await this.#replacing; // a replacement in progress decides what is current
      const next = this.#current;
      if (next && next !== c && next.phase !== 'closed') {
        c = next;
        continue;
      }
      return end;
    }
  }

  /** resolves once connected (at once if connected now), or when the supervisor stops */
  whenConnected(): Promise<void> {
    if (this.#state === 'connected' || this.#state === 'closed' || this.#stop.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      this.#connectedWaiters.push(resolve);
      this.#stop.signal.addEventListener('abort', () => resolve(), { once: true });
    });
  }

  /**
   * Replaces the current connection without dropping a query: a new connection is dialed, and
   * once its session is ready it becomes the current one; the previous one drains. True when it
   * switched; false when there was nothing to replace (not connected, stopping, or the current
   * connection changed meanwhile). Rejects when the new connection failed (the current one stays).
   */
  async replaceConnection(o: ReplaceOptions): Promise<boolean> {
    if (this.#state !== 'connected') return false;
    const attempt = this.#replace(o);
    const settled = attempt.then(
      () => undefined,
      () => undefined,
    );
    this.#replacing = settled;
    try {
      return await attempt;
    } finally {
      if (this.#replacing === settled) this.#replacing = null;
    }
  }

  async #replace(o: ReplaceOptions): Promise<boolean> {
    const old = this.#current;
    if (!old || this.#stopping) return false;
    const conn = this.#connection();
    await conn.dial(this.#stop.signal);
    if (!(await conn.open())) {
      conn.close();
      throw new RelayError('RELAY_ERR_STATE', `the new tunnel closed before it was ready (${conn.session?.closeInfo?.reason ?? 'closed'})`);
    }
    // the run loop waits for this replacement before it decides the tunnel was lost
    if (this.#stopping || this.#current !== old || this.#state !== 'connected') {
      conn.close(CloseCode.NORMAL, 'not needed');
      return false;
    }
    this.#current = conn;
    // a control plane that did not drain the replaced connection itself: drain it from this side
    const grace = setTimeout(() => {
      if (old.phase !== 'closed') void old.drain(this.#o.drainTimeoutMs ?? 30_000, o.goaway);
    }, o.graceMs);
    grace.unref?.();
    void old.closed().then(() => clearTimeout(grace));
    return true;
  }

  async #backoff(): Promise<void> {
    const delay = backoffDelay(this.#attempt, this.#o.backoff);
    this.#attempt++;
    this.#reconnects++;
    this.#log(`reconnecting in ${delay} ms`);
    await this.#o.clock.sleep(delay, this.#stop.signal);
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
    const c = this.#current;
    if (this.#state === 'connected' && c) {
      this.#to('draining');
      await c.drain(this.#o.drainTimeoutMs ?? 30_000, 'relay shutting down').catch(() => {});
    } else {
      c?.close(CloseCode.NORMAL, 'relay stopping');
    }
    this.#stop.abort();
    if (this.#running) return this.#running;
    return this.#closed({ reason: 'stopped', message: 'stopped before running' });
  }
}
