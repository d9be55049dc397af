/**
 * Expensive checks run off the event loop, in one worker thread (started on first use, unref'd,
 * replaced if it dies):
 * - PostgreSQL-dialect statements of {@link OFFLOAD_MIN_CHARS} characters or more (shorter ones,
 *   nearly all, stay on the main thread: libpg_query parses them in well under a millisecond);
 * - every MySQL-dialect statement: its parser is JavaScript, about 30 µs a character, so even a
 *   4 KB statement would hold the event loop for 100 ms or more.
 * The worker takes one check at a time, for at most {@link CHECK_TIMEOUT_MS} (then it is replaced); the waiting ones are
 * served deficit round-robin by organization and statement length: one agent flooding large
 * statements waits behind its own, and others' short statements go first.
 */
import { Worker } from 'node:worker_threads';
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
let checkTimeoutMs = CHECK_TIMEOUT_MS;

/** Sets the per-check time limit (tests); returns the previous one. */
export function setCheckTimeout(ms: number): number {
  const previous = checkTimeoutMs;
  checkTimeoutMs = ms;
  return previous;
}
/**
 * Characters of statement an organization may have checked per turn (deficit round-robin): an
 * organization sending short statements is served after at most the check in the worker, even
 * when others have many large statements waiting.
 */
const QUANTUM_CHARS = 512;

let worker: Worker | undefined;
let nextId = 1;
/** the check in the worker now (one at a time), and its time limit */
let inFlight: Pending | undefined;
let inFlightTimer: NodeJS.Timeout | undefined;
/** whether the current worker has loaded its parsers (the time limit counts from then) */
let workerReady = false;
/** waiting checks per organization, each organization's unused turn, and the order they are served */
const waiting = new Map<string, Pending[]>();
const deficit = new Map<string, number>();
const rotation: string[] = [];
let closing = false;

function workerUrl(): URL {
  return new URL(`./check-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url);
}

/** the in-flight check failed with the worker; the waiting ones go to a new worker */
function failInFlight(err: unknown): void {
  const p = inFlight;
  inFlight = undefined;
  if (inFlightTimer) clearTimeout(inFlightTimer);
  inFlightTimer = undefined;
  p?.reject(err);
  pump();
}

/** The next check, deficit round-robin by statement length across organizations. */
function nextPending(): Pending | undefined {
  for (;;) {
    const tenant = rotation.shift();
    if (tenant === undefined) return undefined;
    const queue = waiting.get(tenant);
    const head = queue?.[0];
    if (!queue || !head) {
      waiting.delete(tenant);
      deficit.delete(tenant);
      continue;
    }
    const credit = (deficit.get(tenant) ?? 0) + QUANTUM_CHARS;
    if (head.req.sql.length > credit) {
      // not its turn yet: it keeps what it earned and goes to the back
      deficit.set(tenant, credit);
      rotation.push(tenant);
      continue;
    }
    queue.shift();
    if (queue.length > 0) {
      deficit.set(tenant, credit - head.req.sql.length);
      rotation.push(tenant);
    } else {
      waiting.delete(tenant);
      deficit.delete(tenant);
    }
    return head;
  }
}

function pump(): void {
  if (inFlight || closing) return;
  const next = nextPending();
  if (!next) {
    worker?.unref();
    return;
  }
  inFlight = next;
  try {
    worker ??= start();
    worker.ref(); // keep the process up while a check is pending
    worker.postMessage(next.req);
  } catch (err) {
    // the worker could not be started or written to: this check fails, the next one tries again
    worker = undefined;
    queueMicrotask(() => failInFlight(err));
    return;
  }
  if (workerReady) armTimer();
}

/** The in-flight check's time limit, from when the worker is ready (its start is not the check's). */
function armTimer(): void {
  if (!inFlight || inFlightTimer) return;
  inFlightTimer = setTimeout(() => {
    inFlightTimer = undefined;
    const w = worker;
    worker = undefined;
    void w?.terminate();
    failInFlight(new SqlPolicyError('invalid_sql', `the statement took longer than ${checkTimeoutMs / 1000} s to check; split it into smaller queries or simplify it`, { reason: 'too_complex' }));
  }, checkTimeoutMs);
  inFlightTimer.unref();
}

function start(): Worker {
  const w = new Worker(workerUrl());
  workerReady = false;
  w.unref();
  w.on('message', (msg: CheckReply | { ready: true }) => {
    if (!('id' in msg)) {
      if (worker === w) {
        workerReady = true;
        armTimer();
      }
      return;
    }
    const p = inFlight;
    if (!p || p.req.id !== msg.id) return;
    inFlight = undefined;
    if (inFlightTimer) clearTimeout(inFlightTimer);
    inFlightTimer = undefined;
    queueMicrotask(pump);
    if ('ok' in msg) p.resolve(msg.ok);
    else if ('api' in msg) p.reject(new ApiError(msg.api.code, msg.api.message, msg.api.details));
    else if ('refused' in msg) p.reject(new SqlPolicyError(msg.refused.code, msg.refused.message, msg.refused.detail, msg.refused.position));
    else if (msg.failed === 'too_complex') p.reject(new SqlPolicyError('invalid_sql', 'the statement is too complex to check; split it into smaller queries or simplify it', { reason: 'too_complex' }));
    else p.reject(new Error('the SQL check failed unexpectedly'));
  });
  const gone = (why: string): void => {
    if (worker !== w) return;
    worker = undefined;
    failInFlight(new Error(`the SQL check worker stopped (${why})`));
  };
  w.on('error', (err) => gone(err.message));
  w.on('exit', (code) => gone(`exit ${code}`));
  return w;
}

function inWorker(tenant: string, req: CheckRequest): Promise<CheckedQuery | MysqlChecked> {
  if (closing) return Promise.reject(new Error('the SQL check worker was stopped'));
  return new Promise<CheckedQuery | MysqlChecked>((resolve, reject) => {
    let queue = waiting.get(tenant);
    if (!queue) {
      waiting.set(tenant, (queue = []));
      rotation.push(tenant);
    }
    queue.push({ req, resolve, reject });
    pump();
  });
}

/** {@link checkAndRewrite}, in the worker thread when `sql` is large; `tenant` is whose turn it takes. */
export async function checkAndRewriteAsync(sql: string, policy: SqlPolicy, tenant = ''): Promise<CheckedQuery> {
  if (sql.length < OFFLOAD_MIN_CHARS) return checkAndRewrite(sql, policy);
  return (await inWorker(tenant, { id: nextId++, kind: 'postgres', sql, policy })) as CheckedQuery;
}

/**
 * The MySQL check (live/mysql/check.ts `checkMysql`), always in the worker thread: the MySQL-dialect parser is a PEG parser in
 * JavaScript, about 30 µs a character (a 4 KB statement 120 ms, a 49 KB IN list 1.5 s).
 */
export async function checkMysqlAsync(sql: string, policy: MysqlPolicy, tenant = ''): Promise<MysqlChecked> {
  return (await inWorker(tenant, { id: nextId++, kind: 'mysql', sql, policy })) as MysqlChecked;
}

/** Stops the worker and fails the waiting checks (graceful shutdown); no new worker starts. */
export async function closeCheckWorker(): Promise<void> {
  closing = true;
  const w = worker;
  worker = undefined;
  if (w) await w.terminate();
  const stopped = new Error('the SQL check worker was stopped');
  failInFlight(stopped);
  for (const queue of waiting.values()) for (const p of queue.splice(0)) p.reject(stopped);
  waiting.clear();
  deficit.clear();
  rotation.length = 0;
  closing = false; // a later check (another app in this process) starts a new worker
}
