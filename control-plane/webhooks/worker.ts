/**
 * The delivery worker: claims due outbox rows fairly across organizations (claims.ts: at most
 * `perOrgConcurrency` in flight per organization, round-robin; FOR UPDATE SKIP LOCKED, then a
 * lease, so several control-plane replicas share one outbox and a crashed one's claims come back
 * when the lease runs out), resolves the receiver and secret at each attempt, signs, sends
 * through the SSRF guard, records the attempt (fenced by the lease) and schedules the retry.
 * The sandbox `slow` profile's hold is a scheduled delay (holdClaim), not a waiting slot. It also
 * notices expired connections once each (connection.expired). Nothing lives only in memory: a
 * killed process loses no delivery, at most an attempt in flight is made again (same delivery id).
 */
import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import { guardedRequest, NetError, type GuardedResponse } from '../net/index.js';
import { open, type MasterKey } from '../secrets/index.js';
import type { Store } from '../store/index.js';
import { claimDue, holdClaim, recordAttempt, releaseClaims, type Claim, type Outcome } from './claims.js';
import { endpointSecretContext, enqueueLifecycle, getChaos, type ChaosProfile } from './outbox.js';
import { signedHeaders } from './signing.js';
import { pause } from '../time.js';

export interface WorkerOptions {
  readonly store: Store;
  /** master keys that open sealed secrets (current first) */
  readonly keys: () => Promise<readonly MasterKey[]>;
  /** waits after attempt 1, 2, … (SVC_WEBHOOK_RETRY_DELAYS); the delivery fails after the last */
  readonly retryDelaysMs: readonly number[];
  /** per-attempt deadline (10 s) */
  readonly timeoutMs: number;
  readonly allowPrivate: boolean;
  /** attempts in flight at once per process (default 16) */
  readonly concurrency?: number;
  /** attempts in flight at once per organization, across replicas (SVC_WEBHOOK_ORG_CONCURRENCY, default 4) */
  readonly perOrgConcurrency?: number;
  /** how often the outbox is looked at when idle (default 250 ms) */
  readonly pollMs?: number;
  /** how often expired connections are looked for (default 1 s) */
  readonly expirySweepMs?: number;
  readonly log?: FastifyBaseLogger;
}

/** bytes of the receiver's answer kept with the attempt */
export const RESPONSE_EXCERPT_BYTES = 512;
/** a Retry-After beyond this is capped */
export const MAX_RETRY_AFTER_MS = 3_600_000;

/** Retry-After as seconds or an HTTP date, in ms from now; undefined when absent or malformed. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Math.min(Number(v) * 1000, MAX_RETRY_AFTER_MS);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS);
}

function classify(err: unknown): { errorClass: string; message: string } {
  if (err instanceof NetError) {
    const map: Record<string, string> = {
      NET_ERR_TIMEOUT: 'timeout',
      NET_ERR_FORBIDDEN_ADDRESS: 'forbidden_address',
      NET_ERR_DNS: 'dns',
      NET_ERR_CONNECT: 'connection',
      NET_ERR_TLS: 'tls',
      NET_ERR_ABORTED: 'aborted',
    };
    return { errorClass: map[err.code] ?? 'invalid_url', message: err.message };
  }
  return { errorClass: 'internal', message: (err as Error).message };
}

export class DeliveryWorker {
  private readonly o: Required<Omit<WorkerOptions, 'log'>> & { log: FastifyBaseLogger | undefined };
  private running = false;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private wake: AbortController = new AbortController();
  private readonly inflight = new Map<string, { claim: Claim; done: Promise<void>; abort: AbortController }>();
  private lastSweep = 0;

  constructor(options: WorkerOptions) {
    this.o = { concurrency: 16, perOrgConcurrency: 4, pollMs: 250, expirySweepMs: 1000, ...options, log: options.log };
  }

  /** A lease outlives any attempt: the deadline and slack. */
  private get leaseMs(): number {
    return 2 * this.o.timeoutMs + 5000;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Look at the outbox now (after a commit that enqueued something). */
  kick(): void {
    this.wake.abort();
  }

  /**
   * Stop claiming; attempts in flight finish within `graceMs`, the rest are aborted and released
   * (due again at once). The release is fenced by each claim's lease: an attempt that finished
   * meanwhile keeps the retry time it recorded.
   */
  async stop(graceMs = Math.min(this.o.timeoutMs, 5000)): Promise<void> {
    if (!this.running) return;
    this.stopping = true;
    this.kick();
    await this.loop;
    const pending = [...this.inflight.values()].map((f) => f.done);
    const graceOver = new AbortController();
    await Promise.race([Promise.allSettled(pending), pause(graceMs, graceOver.signal)]);
    graceOver.abort(); // the grace timer must not hold the process open for graceMs after a quick stop
    const left = [...this.inflight.values()].map((f) => f.claim);
    for (const f of this.inflight.values()) f.abort.abort();
    await Promise.allSettled([...this.inflight.values()].map((f) => f.done));
    await releaseClaims(this.o.store, left).catch(() => undefined);
    this.running = false;
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      let claimed = 0;
      try {
        if (Date.now() - this.lastSweep >= this.o.expirySweepMs) {
          this.lastSweep = Date.now();
          await this.sweepExpired();
        }
        const room = this.o.concurrency - this.inflight.size;
        if (room > 0) {
          const rows = await claimDue(this.o.store, { limit: room, perOrg: this.o.perOrgConcurrency, leaseMs: this.leaseMs });
          claimed = rows.length;
          for (const row of rows) this.spawn(row);
        }
      } catch (err) {
        if (this.stopping) break;
        this.o.log?.warn({ err: { message: (err as Error).message } }, 'webhook worker cycle failed');
      }
      if (this.stopping) break;
      if (claimed > 0 && this.inflight.size < this.o.concurrency) continue;
      // a kick during this cycle means: look again at once
      if (!this.wake.signal.aborted) await pause(this.o.pollMs, this.wake.signal);
      this.wake = new AbortController();
    }
  }

  private spawn(claim: Claim): void {
    const abort = new AbortController();
    const done = this.attempt(claim, abort.signal)
      .catch((err: unknown) => this.o.log?.warn({ delivery_id: claim.id, err: { message: (err as Error).message } }, 'webhook attempt could not be recorded'))
      .finally(() => {
        this.inflight.delete(claim.id);
        this.kick(); // a slot is free
      });
    this.inflight.set(claim.id, { claim, done, abort });
  }

  private async attempt(claim: Claim, signal: AbortSignal): Promise<void> {
    const chaos = await getChaos(this.o.store, claim.org_id);
    if (chaos.mode === 'slow' && claim.held_since === null) {
      // a receiver that answers late, as a schedule: no slot waits out the hold
      await holdClaim(this.o.store, claim, Math.min(chaos.delay_ms, this.o.timeoutMs));
      return;
    }
    const started = claim.held_since ?? new Date();
    const t0 = performance.now() - (Date.now() - started.getTime());
    const outcome = await this.send(claim, chaos, signal);
    if (signal.aborted && outcome.errorClass === 'aborted') return; // released by stop(), not an attempt
    const durationMs = Math.round(performance.now() - t0);
    const result = await recordAttempt(this.o.store, claim, { started, durationMs, outcome }, { retryDelaysMs: this.o.retryDelaysMs });
    if (result === 'failed') this.kick(); // delivery.failed may be queued
    if (result === 'stale') this.o.log?.warn({ delivery_id: claim.id }, 'webhook attempt outlived its lease; another claim owns the delivery, nothing recorded');
    else if (!outcome.ok) this.o.log?.debug({ delivery_id: claim.id, error_class: outcome.errorClass, status_code: outcome.statusCode }, 'webhook attempt failed');
  }

  private async send(row: Claim, chaos: ChaosProfile, signal: AbortSignal): Promise<Outcome> {
    const base: Outcome = { ok: false, statusCode: null, errorClass: null, errorMessage: null, excerpt: null, retryAfterMs: null, url: null, chaos: null };
    const [endpoint] = await this.o.store.query<{ url: string; secret_sealed: string; connection_id: string }>(
      // the connection's override sorts after the default ('') and wins
      `SELECT url, secret_sealed, connection_id FROM webhook_endpoints WHERE org_id = $1 AND connection_id IN ('', $2) ORDER BY connection_id DESC LIMIT 1`,
      [row.org_id, row.connection_id ?? ''],
    );
    if (!endpoint) return { ...base, errorClass: 'no_endpoint', errorMessage: 'no webhook URL is configured (POST /v1/agent/webhook)' };
    let secret: string;
    try {
      secret = open(await this.o.keys(), endpoint.secret_sealed, endpointSecretContext(row.org_id, endpoint.connection_id)).toString('utf8');
    } catch (err) {
      return { ...base, url: endpoint.url, errorClass: 'secret_unavailable', errorMessage: (err as Error).message };
    }
    const faulted = chaos.mode !== 'off' && (chaos.mode === 'slow' || row.run_attempts < chaos.failures);
    const headers = signedHeaders(secret, row.id, row.event, row.body);
    if (faulted) headers['x-service-chaos'] = chaos.mode;
    let timeoutMs = this.o.timeoutMs;
    const out: Outcome = { ...base, url: endpoint.url, chaos: faulted ? chaos.mode : null };
    if (faulted && chaos.mode === 'slow') {
      // the hold (served as a schedule before this claim) counts against the deadline
      if (chaos.delay_ms >= this.o.timeoutMs) return { ...out, errorClass: 'timeout', errorMessage: `no answer within ${this.o.timeoutMs} ms (chaos profile slow holds ${chaos.delay_ms} ms)` };
      timeoutMs -= chaos.delay_ms;
    }
    let res: GuardedResponse;
    try {
      res = await guardedRequest(endpoint.url, { method: 'POST', headers, body: row.body, timeoutMs, maxResponseBytes: RESPONSE_EXCERPT_BYTES, allowPrivate: this.o.allowPrivate ? 'private-use' : false, signal });
    } catch (err) {
      const c = classify(err);
      return { ...out, errorClass: c.errorClass, errorMessage: c.message };
    }
    const excerpt = res.body.toString('utf8').replace(/\uFFFD+$/, '');
    const answered = { ...out, statusCode: res.status, excerpt };
    if (faulted && chaos.mode !== 'slow') return this.injected(answered, chaos);
    if (res.status >= 200 && res.status < 300) return { ...answered, ok: true };
    if (res.status >= 300 && res.status < 400) return { ...answered, errorClass: 'redirect', errorMessage: `answered ${res.status}; redirects are not followed (configure the final URL)` };
    if (res.status === 429) return { ...answered, errorClass: 'rate_limited', errorMessage: 'answered 429', retryAfterMs: parseRetryAfter(res.headers['retry-after']) ?? null };
    const retryAfterMs = res.status === 503 ? (parseRetryAfter(res.headers['retry-after']) ?? null) : null;
    return { ...answered, errorClass: 'http_status', errorMessage: `answered ${res.status}`, retryAfterMs };
  }

  /** The receiver was really sent the attempt; the chaos profile decides its outcome. */
  private injected(o: Outcome, chaos: ChaosProfile): Outcome {
    const real = `the receiver answered ${o.statusCode}`;
    if (chaos.mode === 'rate_limit') {
      return { ...o, statusCode: 429, errorClass: 'rate_limited', errorMessage: `429 injected by chaos profile rate_limit (Retry-After: ${chaos.retry_after_seconds}); ${real}`, retryAfterMs: chaos.retry_after_seconds * 1000 };
    }
    return { ...o, statusCode: 503, errorClass: 'http_status', errorMessage: `503 injected by chaos profile transient_503; ${real}` };
  }

  /** connection.expired, once per connection, in the transaction that marks it noticed. */
  private async sweepExpired(): Promise<void> {
    const now = new Date();
    const n = await this.o.store.tx(async (sql) => {
      const rows = await sql.query<{ id: string; org_id: string; target_id: string; expires_at: Date }>(
        `SELECT id, org_id, target_id, expires_at FROM connections
         WHERE expiry_notified_at IS NULL AND revoked_at IS NULL AND expires_at <= $1 ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED`,
        [now.toISOString()],
      );
      for (const c of rows) {
        await sql.query('UPDATE connections SET expiry_notified_at = $2 WHERE id = $1', [c.id, now.toISOString()]);
        await enqueueLifecycle(sql, 'connection.expired', { connectionId: c.id, orgId: c.org_id, targetId: c.target_id, at: new Date(c.expires_at) });
      }
      return rows.length;
    });
    if (n > 0) this.kick();
  }
}
