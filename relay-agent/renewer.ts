/**
 * The certificate renewer: at about half the certificate's lifetime (counted from when the relay
 * obtained it, plus a little jitter) it gets a new certificate for a new key (renew.ts), then
 * asks the supervisor to replace the tunnel connection with one that presents it, so no query is
 * dropped (supervisor.ts `replaceConnection`). A failed renewal is retried with backoff; a relay
 * offline at its renewal time renews once connected. It also keeps the certificate's expiry,
 * which the supervisor checks before each dial and /metrics reports.
 */
import { X509Certificate } from 'node:crypto';
import { RelayError } from './errors.js';
import type { CertificateValidity } from './renew.js';
import { backoffDelay, type AgentClock, type BackoffOptions, type ReplaceOptions, type TunnelState } from './supervisor.js';

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

/** What the renewer needs of the supervisor. */
export interface RenewalHost {
  readonly state: TunnelState;
  /** asked to stop, or stopped */
  readonly stopped: boolean;
  /** aborted once stopped */
  readonly signal: AbortSignal;
  whenConnected(): Promise<void>;
  replaceConnection(o: ReplaceOptions): Promise<boolean>;
}

export interface RenewerOptions {
  renewal?: RenewalOptions | undefined;
  /** certificate expiry when known otherwise (default: renewal.certificate.notAfter) */
  certificateNotAfter?: Date | undefined;
  clock: AgentClock;
  /** [0, 1), draws the jitter (default Math.random) */
  random?: (() => number) | undefined;
  log?: ((line: string) => void) | undefined;
}

export function certificateNotAfter(certPem: string): Date {
  return new Date(new X509Certificate(certPem).validTo);
}

export class CertificateRenewer {
  #cert: CertificateValidity | null;
  #notAfter: Date | undefined;
  #jitterDraw: number;
  #renewals = 0;
  #renewFailures = 0;
  #renewing: Promise<CertificateValidity> | null = null;
  #kick = new AbortController();
  #started = false;
  readonly #host: RenewalHost;
  readonly #o: RenewerOptions;

  constructor(host: RenewalHost, o: RenewerOptions) {
    const fraction = o.renewal?.fraction ?? 0.5;
    const jitter = o.renewal?.jitter ?? 0.05;
    if (!(fraction > 0 && fraction < 1)) throw new RelayError('RELAY_ERR_INVALID_ARGUMENT', `renewal.fraction must be in (0, 1), got ${fraction}`);
    if (!(jitter >= 0 && fraction + jitter < 1)) throw new RelayError('RELAY_ERR_INVALID_ARGUMENT', `renewal.jitter must be >= 0 with fraction + jitter < 1, got ${jitter}`);
    this.#host = host;
    this.#o = o;
    this.#cert = o.renewal?.certificate ?? null;
    this.#notAfter = o.certificateNotAfter ?? o.renewal?.certificate.notAfter;
    this.#jitterDraw = this.#random();
  }

  #random(): number {
    return (this.#o.random ?? Math.random)();
  }

  #log(line: string): void {
    this.#o.log?.(line);
  }

  /** the certificate in use (when renewal is configured) */
  get certificate(): CertificateValidity | null {
    return this.#cert;
  }
  /** the certificate's expiry, when known */
  get notAfter(): Date | undefined {
    return this.#notAfter;
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

  /** seconds until the certificate expires (negative once expired), or null when unknown */
  certificateExpirySeconds(): number | null {
    const na = this.#notAfter;
    return na ? Math.floor((na.getTime() - this.#o.clock.now()) / 1000) : null;
  }

  /** starts the renewal loop (once; nothing without renewal); it ends when the host stops */
  start(): void {
    if (this.#started || !this.#o.renewal) return;
    this.#started = true;
    void this.#loop();
  }

  async #loop(): Promise<void> {
    const retry: BackoffOptions = { baseDelayMs: 1000, maxDelayMs: 300_000, ...(this.#o.renewal?.retry ?? {}) };
    const host = this.#host;
    while (!host.stopped) {
      const at = this.renewAt();
      if (at === null) return;
      const wait = at - this.#o.clock.now();
      if (wait > 0) {
        // woken early by renewNow() (a new certificate, a new time) or by stop
        await this.#o.clock.sleep(Math.min(wait, 2 ** 31 - 1), AbortSignal.any([host.signal, this.#kick.signal]));
        continue;
      }
      // due: renewal goes to the tunnel's port, so a relay offline now renews once connected
      if (host.state !== 'connected') {
        await host.whenConnected();
        continue;
      }
      try {
        await this.renewNow();
      } catch (err) {
        if (host.stopped) return;
        const delay = backoffDelay(this.#renewFailures - 1, retry);
        this.#log(`certificate renewal failed (attempt ${this.#renewFailures}): ${(err as Error).message}; retrying in ${delay} ms`);
        await this.#o.clock.sleep(delay, host.signal);
      }
    }
  }

  /**
   * Renew the certificate now (the renewal loop calls this when due; tests call it directly),
   * then have the supervisor switch to a tunnel that presents it. Concurrent calls share one renewal.
   */
  renewNow(): Promise<CertificateValidity> {
    const r = this.#o.renewal;
    if (!r) return Promise.reject(new RelayError('RELAY_ERR_INVALID_ARGUMENT', 'this agent has no renewal configured'));
    this.#renewing ??= (async () => {
      try {
        let v: CertificateValidity;
        try {
          v = await r.renew(this.#host.signal);
        } catch (err) {
          this.#renewFailures++;
          throw err;
        }
        this.#renewFailures = 0;
        this.#cert = v;
        this.#notAfter = v.notAfter;
        this.#jitterDraw = this.#random();
        this.#renewals++;
        this.#log(`certificate renewed: serial ${v.serial}, valid until ${v.notAfter.toISOString()}`);
        await this.#switchTunnel(r);
        return v;
      } finally {
        this.#renewing = null;
        this.#kick.abort();
        this.#kick = new AbortController();
      }
    })();
    return this.#renewing;
  }

  /** a second tunnel with the renewed certificate the dialer now presents; the first drains */
  async #switchTunnel(r: RenewalOptions): Promise<void> {
    try {
      if (await this.#host.replaceConnection({ goaway: 'switched to a renewed certificate', graceMs: r.switchGraceMs ?? 10_000 })) {
        this.#log('switched to the tunnel with the renewed certificate; the previous one drains');
      }
    } catch (err) {
      this.#log(`switching to the renewed certificate failed (${(err as Error).message}); the current tunnel stays up and the next reconnect presents the new certificate`);
    }
  }
}
