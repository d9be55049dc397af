/**
 * Large statements are checked off the event loop. A statement longer than
 * {@link OFFLOAD_MIN_CHARS} is parsed, checked and rewritten in one worker thread (started on the
 * first such statement, unref'd, replaced if it dies); shorter ones, nearly all, stay on the main
 * thread, where they cost well under a millisecond. One flooding agent then only waits behind its
 * own statements in the worker's queue while other requests are served.
 */
import { Worker } from 'node:worker_threads';
import { ApiError, type ApiErrorCode } from '../../errors.js';
import { SqlPolicyError, type SqlPolicyErrorCode, type SqlPolicyErrorDetail } from './errors.js';
import type { CheckedQuery, SqlPolicy } from './index.js';
import { checkAndRewrite } from './index.js';
import { checkMysql, type MysqlChecked, type MysqlPolicy } from '../../live/mysql/policy.js';

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
  resolve(q: CheckedQuery | MysqlChecked): void;
  reject(err: unknown): void;
}

let worker: Worker | undefined;
let nextId = 1;
const pending = new Map<number, Pending>();

function workerUrl(): URL {
  return new URL(`./check-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url);
}

function failAll(err: Error): void {
  for (const p of pending.values()) p.reject(err);
  pending.clear();
}

function start(): Worker {
  const w = new Worker(workerUrl());
  w.unref();
  w.on('message', (msg: CheckReply | { ready: true }) => {
    if (!('id' in msg)) return;
    const p = pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id);
    if ('ok' in msg) p.resolve(msg.ok);
    else if ('api' in msg) p.reject(new ApiError(msg.api.code, msg.api.message, msg.api.details));
    else if ('refused' in msg) p.reject(new SqlPolicyError(msg.refused.code, msg.refused.message, msg.refused.detail, msg.refused.position));
    else if (msg.failed === 'too_complex') p.reject(new SqlPolicyError('invalid_sql', 'the statement is too complex to check; split it into smaller queries or simplify it', { reason: 'too_complex' }));
    else p.reject(new Error('the SQL check failed unexpectedly'));
  });
  const gone = (why: string): void => {
    if (worker === w) worker = undefined;
    failAll(new Error(`the SQL check worker stopped (${why})`));
  };
  w.on('error', (err) => gone(err.message));
  w.on('exit', (code) => gone(`exit ${code}`));
  return w;
}

function inWorker(req: CheckRequest): Promise<CheckedQuery | MysqlChecked> {
  worker ??= start();
  const w = worker;
  return new Promise<CheckedQuery | MysqlChecked>((resolve, reject) => {
    pending.set(req.id, { resolve, reject });
    w.ref(); // keep the process up while a check is pending
    w.postMessage(req);
  }).finally(() => {
    if (pending.size === 0) w.unref();
  });
}

/** {@link checkAndRewrite}, in the worker thread when `sql` is large. */
export async function checkAndRewriteAsync(sql: string, policy: SqlPolicy): Promise<CheckedQuery> {
  if (sql.length < OFFLOAD_MIN_CHARS) return checkAndRewrite(sql, policy);
  return (await inWorker({ id: nextId++, kind: 'postgres', sql, policy })) as CheckedQuery;
}

/**
 * {@link checkMysql}, in the worker thread when `sql` is large: the MySQL-dialect parser is a
 * PEG parser in JavaScript, about 30 µs a character (a 49 KB IN list takes 1.5 s).
 */
export async function checkMysqlAsync(sql: string, policy: MysqlPolicy): Promise<MysqlChecked> {
  if (sql.length < OFFLOAD_MIN_CHARS) return checkMysql(sql, policy);
  return (await inWorker({ id: nextId++, kind: 'mysql', sql, policy })) as MysqlChecked;
}

/** Stops the worker (graceful shutdown; a later large statement starts a new one). */
export async function closeCheckWorker(): Promise<void> {
  const w = worker;
  worker = undefined;
  if (w) await w.terminate();
}
