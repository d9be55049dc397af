/**
 * The delivery worker: claims due outbox rows (FOR UPDATE SKIP LOCKED, then a lease, so several
 * control-plane replicas share one outbox and a crashed one's claims come back when the lease
 * runs out), resolves the receiver and secret at each attempt, signs, sends through the SSRF
 * guard, records the attempt and schedules the retry. It also notices expired connections once
 * each (connection.expired). Nothing lives only in memory: a killed process loses no delivery,
 * at most an attempt in flight is made again (same delivery id).
 */
import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import { guardedRequest, NetError, type GuardedResponse } from '../net/index.js';
import { open, type MasterKey } from '../secrets/index.js';
import type { Sql, Store } from '../store/index.js';
import { deliveryFailedResource } from './events.js';
import { enqueue, enqueueLifecycle, getChaos, type ChaosProfile, type Environment } from './outbox.js';
import { signedHeaders } from './signing.js';

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
/** retry delays are multiplied by a uniform factor in [1 - JITTER, 1 + JITTER] */
export const JITTER = 0.1;

interface Claimed {
  id: string;
  org_id: string;
  connection_id: string | null;
  event: string;
  body: string;
  attempts: number;
  run_attempts: number;
}

interface Outcome {
  ok: boolean;
  statusCode: number | null;
  errorClass: string | null;
  errorMessage: string | null;
  excerpt: string | null;
  retryAfterMs: number | null;
  url: string | null;
  chaos: string | null;
}

/** Retry-After as seconds or an HTTP date, in ms from now; undefined when absent or malformed. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Math.min(Number(v) * 1000, MAX_RETRY_AFTER_MS);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS);
}

export function jittered(ms: number, random: () => number = Math.random): number {
  return Math.round(ms * (1 - JITTER + 2 * JITTER * random()));
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

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
  private readonly inflight = new Map<string, { done: Promise<void>; abort: AbortController }>();
  private lastSweep = 0;

  constructor(options: WorkerOptions) {
    this.o = { concurrency: 16, pollMs: 250, expirySweepMs: 1000, ...options, log: options.log };
  }

  /** A lease outlives any attempt: the deadline, the slow profile's hold, and slack. */
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

  /** Stop claiming; attempts in flight finish within `graceMs`, the rest are aborted and released (due again at once). */
  async stop(graceMs = Math.min(this.o.timeoutMs, 5000)): Promise<void> {
    if (!this.running) return;
    this.stopping = true;
    this.kick();
    await this.loop;
    const pending = [...this.inflight.values()].map((f) => f.done);
    await Promise.race([Promise.allSettled(pending), sleep(graceMs)]);
    const left = [...this.inflight.keys()];
    for (const f of this.inflight.values()) f.abort.abort();
    await Promise.allSettled([...this.inflight.values()].map((f) => f.done));
    if (left.length > 0) {
      await this.o.store
        .query(`UPDATE webhook_deliveries SET lease_until = NULL, next_attempt_at = $2 WHERE id = ANY($1::text[]) AND status = 'pending'`, [left, new Date().toISOString()])
        .catch(() => undefined);
    }
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
          const rows = await this.claim(room);
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
      if (!this.wake.signal.aborted) await sleep(this.o.pollMs, this.wake.signal);
      this.wake = new AbortController();
    }
  }

  private spawn(row: Claimed): void {
    const abort = new AbortController();
    const done = this.attempt(row, abort.signal)
      .catch((err: unknown) => this.o.log?.warn({ delivery_id: row.id, err: { message: (err as Error).message } }, 'webhook attempt could not be recorded'))
      .finally(() => {
        this.inflight.delete(row.id);
        this.kick(); // a slot is free
      });
    this.inflight.set(row.id, { done, abort });
  }

  private async claim(limit: number): Promise<Claimed[]> {
    const now = new Date();
    const lease = new Date(now.getTime() + this.leaseMs).toISOString();
    return this.o.store.tx(async (sql) => {
      const due = await sql.query<{ id: string }>(
        `SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
        [now.toISOString(), limit],
      );
      if (due.length === 0) return [];
      return sql.query<Claimed>(
        `UPDATE webhook_deliveries SET lease_until = $2, next_attempt_at = $2 WHERE id = ANY($1::text[])
         RETURNING id, org_id, connection_id, event, body, attempts, run_attempts`,
        [due.map((d) => d.id), lease],
      );
    });
  }

  private async attempt(row: Claimed, signal: AbortSignal): Promise<void> {
    const started = new Date();
    const t0 = performance.now();
    const outcome = await this.send(row, signal);
    if (signal.aborted && outcome.errorClass === 'aborted') return; // released by stop(), not an attempt
    const durationMs = Math.round(performance.now() - t0);
    await this.record(row, started, durationMs, outcome);
    if (!outcome.ok) this.o.log?.debug({ delivery_id: row.id, error_class: outcome.errorClass, status_code: outcome.statusCode }, 'webhook attempt failed');
  }

  private async send(row: Claimed, signal: AbortSignal): Promise<Outcome> {
    const base: Outcome = { ok: false, statusCode: null, errorClass: null, errorMessage: null, excerpt: null, retryAfterMs: null, url: null, chaos: null };
    const [endpoint] = await this.o.store.query<{ url: string; secret_sealed: string }>(
      // the connection's override sorts after the default ('') and wins
      `SELECT url, secret_sealed FROM webhook_endpoints WHERE org_id = $1 AND connection_id IN ('', $2) ORDER BY connection_id DESC LIMIT 1`,
      [row.org_id, row.connection_id ?? ''],
    );
    if (!endpoint) return { ...base, errorClass: 'no_endpoint', errorMessage: 'no webhook URL is configured (POST /v1/agent/webhook)' };
    let secret: string;
    try {
      secret = open(await this.o.keys(), endpoint.secret_sealed).toString('utf8');
    } catch (err) {
      return { ...base, url: endpoint.url, errorClass: 'secret_unavailable', errorMessage: (err as Error).message };
    }
    const chaos = await getChaos(this.o.store, row.org_id);
    const faulted = chaos.mode !== 'off' && (chaos.mode === 'slow' || row.run_attempts < chaos.failures);
    const headers = signedHeaders(secret, row.id, row.event, row.body);
    if (faulted) headers['x-service-chaos'] = chaos.mode;
    let timeoutMs = this.o.timeoutMs;
    const out: Outcome = { ...base, url: endpoint.url, chaos: faulted ? chaos.mode : null };
    if (faulted && chaos.mode === 'slow') {
      // a receiver that answers late: the hold counts against the deadline
      await sleep(Math.min(chaos.delay_ms, this.o.timeoutMs), signal);
      if (signal.aborted) return { ...out, errorClass: 'aborted' };
      if (chaos.delay_ms >= this.o.timeoutMs) return { ...out, errorClass: 'timeout', errorMessage: `no answer within ${this.o.timeoutMs} ms (chaos profile slow holds ${chaos.delay_ms} ms)` };
      timeoutMs -= chaos.delay_ms;
    }
    let res: GuardedResponse;
    try {
      res = await guardedRequest(endpoint.url, { method: 'POST', headers, body: row.body, timeoutMs, maxResponseBytes: RESPONSE_EXCERPT_BYTES, allowPrivate: this.o.allowPrivate, signal });
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

  private async record(row: Claimed, started: Date, durationMs: number, o: Outcome): Promise<void> {
    const attemptNo = row.attempts + 1;
    const runNo = row.run_attempts + 1;
    const kind = row.attempts === 0 ? 'initial' : row.run_attempts === 0 ? 'replay' : 'retry';
    const now = new Date();
    await this.o.store.tx(async (sql) => {
      await sql.query(
        `INSERT INTO webhook_attempts (delivery_id, attempt, kind, started_at, duration_ms, url, status_code, error_class, error_message, response_excerpt, chaos, retry_after_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
        [row.id, attemptNo, kind, started.toISOString(), durationMs, o.url, o.statusCode, o.errorClass, o.errorMessage, o.excerpt, o.chaos, o.retryAfterMs],
      );
      const common = [row.id, attemptNo, runNo, now.toISOString()];
      if (o.ok) {
        await sql.query(
          `UPDATE webhook_deliveries SET status = 'delivered', attempts = $2, run_attempts = $3, last_attempt_at = $4, completed_at = $4, lease_until = NULL, next_attempt_at = NULL WHERE id = $1`,
          common,
        );
        return;
      }
      const delay = this.o.retryDelaysMs[runNo - 1];
      if (delay === undefined) {
        await sql.query(
          `UPDATE webhook_deliveries SET status = 'failed', attempts = $2, run_attempts = $3, last_attempt_at = $4, completed_at = $4, lease_until = NULL, next_attempt_at = NULL WHERE id = $1`,
          common,
        );
        await this.failedEvent(sql, row, attemptNo, o);
        return;
      }
      const wait = Math.max(jittered(delay), o.retryAfterMs ?? 0);
      await sql.query(
        `UPDATE webhook_deliveries SET attempts = $2, run_attempts = $3, last_attempt_at = $4, lease_until = NULL, next_attempt_at = $5 WHERE id = $1`,
        [...common, new Date(now.getTime() + wait).toISOString()],
      );
    });
  }

  /** delivery.failed, in the transaction that fails the delivery (never about a delivery.* event: no loops). */
  private async failedEvent(sql: Sql, row: Claimed, attempts: number, o: Outcome): Promise<void> {
    if (row.event.startsWith('delivery.')) return;
    let environment: Environment = 'sandbox';
    try {
      environment = (JSON.parse(row.body) as { environment?: Environment }).environment ?? 'sandbox';
    } catch {
      // the stored body is ours and always JSON
    }
    const lastError = `${o.errorClass ?? 'error'}: ${o.errorMessage ?? ''}`;
    const queued = await enqueue(sql, {
      orgId: row.org_id,
      connectionId: row.connection_id,
      event: 'delivery.failed',
      environment,
      resource: deliveryFailedResource({ deliveryId: row.id, event: row.event, attempts, lastError }),
      data: { delivery_id: row.id, failed_event: row.event, attempts, last_error_class: o.errorClass, last_status_code: o.statusCode },
    });
    if (queued) this.kick();
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
