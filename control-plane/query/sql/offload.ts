/**
 * Expensive checks run off the event loop, in one worker thread (started on first use, unref'd,
 * replaced if it dies):
 * - PostgreSQL-dialect statements of {@link OFFLOAD_MIN_CHARS} characters or more (shorter ones,
 *   nearly all, stay on the main thread: libpg_query parses them in well under a millisecond);
 * - every MySQL-dialect statement: its parser is JavaScript, about 30 µs a character, so even a
 *   4 KB statement would hold the event loop for 100 ms or more.
 * The worker takes one check at a time, and the waiting ones are served round-robin by
 * organization: one agent flooding large statements waits behind its own, others go first.
 */
import { Worker } from 'node:worker_threads';
import { ApiError, type ApiErrorCode } from '../../errors.js';
import { SqlPolicyError, type SqlPolicyErrorCode, type SqlPolicyErrorDetail } from './errors.js';
import type { CheckedQuery, SqlPolicy } from './index.js';
import { checkAndRewrite } from './index.js';
import type { MysqlChecked, MysqlPolicy } from '../../live/mysql/policy.js';

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

let worker: Worker | undefined;
let nextId = 1;
/** the check in the worker now (one at a time) */
let inFlight: Pending | undefined;
/** waiting checks per organization, and the organizations in the order they are served */
const waiting = new Map<string, Pending[]>();
const rotation: string[] = [];

function workerUrl(): URL {
  return new URL(`./check-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url);
}

/** the in-flight check failed with the worker; the waiting ones go to a new worker */
function failInFlight(err: Error): void {
  const p = inFlight;
  inFlight = undefined;
  p?.reject(err);
  pump();
}

function pump(): void {
  if (inFlight) return;
  const tenant = rotation.shift();
  if (tenant === undefined) {
    worker?.unref();
    return;
  }
  const queue = waiting.get(tenant) as Pending[];
  const next = queue.shift() as Pending;
  if (queue.length > 0) rotation.push(tenant);
  else waiting.delete(tenant);
  inFlight = next;
  worker ??= start();
  worker.ref(); // keep the process up while a check is pending
  worker.postMessage(next.req);
}

function start(): Worker {
  const w = new Worker(workerUrl());
  w.unref();
  w.on('message', (msg: CheckReply | { ready: true }) => {
    if (!('id' in msg)) return;
    const p = inFlight;
    if (!p || p.req.id !== msg.id) return;
    inFlight = undefined;
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
 * The MySQL check (live/mysql/policy.ts `checkMysql`), always in the worker thread: the MySQL-dialect parser is a PEG parser in
 * JavaScript, about 30 µs a character (a 4 KB statement 120 ms, a 49 KB IN list 1.5 s).
 */
export async function checkMysqlAsync(sql: string, policy: MysqlPolicy, tenant = ''): Promise<MysqlChecked> {
  return (await inWorker(tenant, { id: nextId++, kind: 'mysql', sql, policy })) as MysqlChecked;
}

/** Stops the worker (graceful shutdown; a later large statement starts a new one). */
export async function closeCheckWorker(): Promise<void> {
  const w = worker;
  worker = undefined;
  if (w) await w.terminate();
  failInFlight(new Error('the SQL check worker was stopped'));
}
