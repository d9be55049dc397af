/**
 * Expensive checks run off the event loop, in one worker thread per {@link SqlChecker} (the app
 * makes one and closes it at shutdown; the worker starts on first use, unref'd, and is replaced if
 * it dies):
 * - PostgreSQL-dialect statements of {@link OFFLOAD_MIN_CHARS} characters or more (shorter ones,
 *   nearly all, stay on the main thread: libpg_query parses them in well under a millisecond);
 * - every MySQL-dialect statement: its parser is JavaScript, about 30 µs a character, so even a
 *   4 KB statement would hold the event loop for 100 ms or more.
 * The worker takes one check at a time, for at most {@link CHECK_TIMEOUT_MS} (then it is replaced); the waiting ones are
 * served deficit round-robin by organization and statement length: one agent flooding large
 * statements waits behind its own, and others' short statements go first.
 */
import { Worker } from 'node:worker_threads';
import { threadOptions } from '../../embedded/index.js';
import { ApiError, type ApiErrorCode } from '../../errors.js';
import { SqlPolicyError, type SqlPolicyErrorCode, type SqlPolicyErrorDetail } from './errors.js';
import type { CheckedQuery, SqlPolicy } from './index.js';
import { checkAndRewrite } from './index.js';
import type { MysqlChecked } from '../../live/mysql/check.js';
import type { MysqlPolicy } from '../../live/mysql/policy.js';

export const OFFLOAD_MIN_CHARS = 4096;

export type CheckRequest =
  | { readonly id: number; readonly kind: 'postgres'; readonly sql: string; readonly policy: SqlPolicy }
  | { readonly id: number; readonly kind: 'mysql'; readonly sql: string; readonly policy: MysqlPolicy };

export type CheckReply =
  | { readonly id: number; readonly ok: CheckedQuery | MysqlChecked }
  | { readonly id: number; readonly refused: { code: SqlPolicyErrorCode; message: string; detail: SqlPolicyErrorDetail; position?: number } }
  | { readonly id: number; readonly api: { code: ApiErrorCode; message: string; details?: Record<string, unknown> } }
  | { readonly id: number; readonly failed: 'too_complex' | 'error' };

interface Pending {
  readonly req: CheckRequest;
  resolve(q: CheckedQuery | MysqlChecked): void;
  reject(err: unknown): void;
}

/**
 * The longest one check may hold the worker: the largest statement accepted (64 KB) takes about
 * 2 s; past this the worker is ended and replaced, and the check answered `too_complex`.
 */
export const CHECK_TIMEOUT_MS = 10_000;
/**
 * Characters of statement an organization may have checked per turn (deficit round-robin): an
 * organization sending short statements is served after at most the check in the worker, even
 * when others have many large statements waiting.
 */
const QUANTUM_CHARS = 512;

function workerUrl(): URL {
  return new URL(`./check-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url);
}

export interface SqlCheckerOptions {
  /** the longest one check may hold the worker (default {@link CHECK_TIMEOUT_MS}; tests shorten it) */
  readonly timeoutMs?: number;
}

/**
 * A check its app's worker was closed under (shutdown): the service's answer while it shuts down
 * (503, retry), not a failure of ours (500) or the agent's.
 */
function stoppedError(): ApiError {
  return new ApiError('service_unavailable', 'the SQL check worker was stopped: the service is shutting down; retry shortly', undefined, { 'Retry-After': '1' });
}

/** One app's SQL checks off the event loop: its worker thread and the checks waiting for it. */
export class SqlChecker {
  /** the longest one check may hold the worker; a change applies from the next check's time limit */
  timeoutMs: number;
  private worker: Worker | undefined;
  private nextId = 1;
  /** the check in the worker now (one at a time), and its time limit */
  private inFlight: Pending | undefined;
  private inFlightTimer: NodeJS.Timeout | undefined;
  /** whether the current worker has loaded its parsers (the time limit counts from then) */
  private workerReady = false;
  /** waiting checks per organization, each organization's unused turn, and the order they are served */
  private readonly waiting = new Map<string, Pending[]>();
  private readonly deficit = new Map<string, number>();
  private readonly rotation: string[] = [];
  private closed = false;

  constructor(options: SqlCheckerOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? CHECK_TIMEOUT_MS;
  }

  /** `checkAndRewrite` (sql/index.ts), in the worker thread when `sql` is large; `tenant` is whose turn it takes. */
  async check(sql: string, policy: SqlPolicy, tenant = ''): Promise<CheckedQuery> {
    if (sql.length < OFFLOAD_MIN_CHARS) return checkAndRewrite(sql, policy);
    return (await this.inWorker(tenant, { id: this.nextId++, kind: 'postgres', sql, policy })) as CheckedQuery;
  }

  /**
   * The MySQL check (live/mysql/check.ts `checkMysql`), always in the worker thread: the MySQL-dialect parser is a PEG parser in
   * JavaScript, about 30 µs a character (a 4 KB statement 120 ms, a 49 KB IN list 1.5 s).
   */
  async checkMysql(sql: string, policy: MysqlPolicy, tenant = ''): Promise<MysqlChecked> {
    return (await this.inWorker(tenant, { id: this.nextId++, kind: 'mysql', sql, policy })) as MysqlChecked;
  }

  /** Stops the worker and fails the waiting checks (shutdown); later checks fail, no new worker starts. */
  async close(): Promise<void> {
    this.closed = true;
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
    const stopped = stoppedError();
    this.failInFlight(stopped);
    for (const queue of this.waiting.values()) for (const p of queue.splice(0)) p.reject(stopped);
    this.waiting.clear();
    this.deficit.clear();
    this.rotation.length = 0;
  }

  private inWorker(tenant: string, req: CheckRequest): Promise<CheckedQuery | MysqlChecked> {
    if (this.closed) return Promise.reject(stoppedError());
    return new Promise<CheckedQuery | MysqlChecked>((resolve, reject) => {
      let queue = this.waiting.get(tenant);
      if (!queue) {
        this.waiting.set(tenant, (queue = []));
        this.rotation.push(tenant);
      }
      queue.push({ req, resolve, reject });
      this.pump();
    });
  }

  /** the in-flight check failed with the worker; the waiting ones go to a new worker */
  private failInFlight(err: unknown): void {
    const p = this.inFlight;
    this.inFlight = undefined;
    if (this.inFlightTimer) clearTimeout(this.inFlightTimer);
    this.inFlightTimer = undefined;
    p?.reject(err);
    this.pump();
  }

  /** The next check, deficit round-robin by statement length across organizations. */
  private nextPending(): Pending | undefined {
    for (;;) {
      const tenant = this.rotation.shift();
      if (tenant === undefined) return undefined;
      const queue = this.waiting.get(tenant);
      const head = queue?.[0];
      if (!queue || !head) {
        this.waiting.delete(tenant);
        this.deficit.delete(tenant);
        continue;
      }
      const credit = (this.deficit.get(tenant) ?? 0) + QUANTUM_CHARS;
      if (head.req.sql.length > credit) {
        // not its turn yet: it keeps what it earned and goes to the back
        this.deficit.set(tenant, credit);
        this.rotation.push(tenant);
        continue;
      }
      queue.shift();
      if (queue.length > 0) {
        this.deficit.set(tenant, credit - head.req.sql.length);
        this.rotation.push(tenant);
      } else {
        this.waiting.delete(tenant);
        this.deficit.delete(tenant);
      }
      return head;
    }
  }

  private pump(): void {
    if (this.inFlight || this.closed) return;
    const next = this.nextPending();
    if (!next) {
      this.worker?.unref();
      return;
    }
    this.inFlight = next;
    try {
      this.worker ??= this.start();
      this.worker.ref(); // keep the process up while a check is pending
      this.worker.postMessage(next.req);
    } catch (err) {
      // the worker could not be started or written to: this check fails, the next one tries again
      this.worker = undefined;
      queueMicrotask(() => this.failInFlight(err));
      return;
    }
    if (this.workerReady) this.armTimer();
  }

  /** The in-flight check's time limit, from when the worker is ready (its start is not the check's). */
  private armTimer(): void {
    if (!this.inFlight || this.inFlightTimer) return;
    this.inFlightTimer = setTimeout(() => {
      this.inFlightTimer = undefined;
      const w = this.worker;
      this.worker = undefined;
      void w?.terminate();
      this.failInFlight(new SqlPolicyError('invalid_sql', `the statement took longer than ${this.timeoutMs / 1000} s to check; split it into smaller queries or simplify it`, { reason: 'too_complex' }));
    }, this.timeoutMs);
    this.inFlightTimer.unref();
  }

  private start(): Worker {
    const w = new Worker(workerUrl(), threadOptions(workerUrl()));
    this.workerReady = false;
    w.unref();
    w.on('message', (msg: CheckReply | { ready: true }) => {
      if (!('id' in msg)) {
        if (this.worker === w) {
          this.workerReady = true;
          this.armTimer();
        }
        return;
      }
      const p = this.inFlight;
      if (!p || p.req.id !== msg.id) return;
      this.inFlight = undefined;
      if (this.inFlightTimer) clearTimeout(this.inFlightTimer);
      this.inFlightTimer = undefined;
      queueMicrotask(() => this.pump());
      if ('ok' in msg) p.resolve(msg.ok);
      else if ('api' in msg) p.reject(new ApiError(msg.api.code, msg.api.message, msg.api.details));
      else if ('refused' in msg) p.reject(new SqlPolicyError(msg.refused.code, msg.refused.message, msg.refused.detail, msg.refused.position));
      else if (msg.failed === 'too_complex') p.reject(new SqlPolicyError('invalid_sql', 'the statement is too complex to check; split it into smaller queries or simplify it', { reason: 'too_complex' }));
      else p.reject(new Error('the SQL check failed unexpectedly'));
    });
    const gone = (why: string): void => {
      if (this.worker !== w) return;
      this.worker = undefined;
      this.failInFlight(new Error(`the SQL check worker stopped (${why})`));
    };
    w.on('error', (err) => gone(err.message));
    w.on('exit', (code) => gone(`exit ${code}`));
    return w;
  }
}
