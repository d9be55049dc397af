/**
 * Retries of the relay's one-shot HTTP calls to the control plane (enrollment, certificate
 * renewal), with p-retry. An attempt says how it failed: `transient(err)` (no answer, a timeout,
 * 408, 429 or a 5xx other than 501/505) is tried again after an exponential backoff with random
 * spread, waiting at least the answer's Retry-After; anything else, a permanent refusal (another
 * 4xx: a used token, a revoked relay, a superseded certificate) or an unexpected error, ends the
 * call at once with that error. The tunnel's own reconnect loop (agent.ts) is separate.
 */
import pRetry, { AbortError } from 'p-retry';
import { RelayError } from './errors.js';

export interface HttpRetryOptions {
  /** attempts after the first (default 4) */
  readonly retries?: number;
  /** wait before the first retry, doubled for each next one, times a random 1-2 (default 500 ms) */
  readonly minTimeoutMs?: number;
  /** longest backoff between attempts (default 8 s) */
  readonly maxTimeoutMs?: number;
  /** longest Retry-After waited for (default 60 s); an answer asking for longer ends the retries */
  readonly maxRetryAfterMs?: number;
}

export const DEFAULT_HTTP_RETRY: Required<HttpRetryOptions> = { retries: 4, minTimeoutMs: 500, maxTimeoutMs: 8000, maxRetryAfterMs: 60_000 };

/** the failure of an attempt that is worth another one */
class TransientFailure extends Error {
  readonly error: Error;
  readonly retryAfterMs: number | undefined;
  constructor(error: Error, retryAfterMs: number | undefined) {
    super(error.message, { cause: error });
    this.name = 'TransientFailure';
    this.error = error;
    this.retryAfterMs = retryAfterMs;
  }
}

/** ends an attempt so that it is tried again (after at least `retryAfterMs`, when given) */
export function transient(error: Error, retryAfterMs?: number): TransientFailure {
  return new TransientFailure(error, retryAfterMs);
}

/** HTTP statuses worth another attempt: 408, 429 and 5xx except 501 Not Implemented and 505 */
export function transientStatus(status: number): boolean {
  return status === 408 || status === 429 || (status >= 500 && status <= 599 && status !== 501 && status !== 505);
}

/** socket and DNS failures that may pass (on the error or any of its causes) */
const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/** a refused, reset or timed-out connection, or a DNS failure (not a certificate or protocol error) */
export function transientNetworkError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, name } = e as { code?: unknown; name?: unknown };
    if (typeof code === 'string' && TRANSIENT_CODES.has(code)) return true;
    if (name === 'TimeoutError') return true;
  }
  return false;
}

/** Retry-After (delay-seconds or an HTTP date) in milliseconds; undefined when absent or unreadable */
export function retryAfterMs(value: string | string[] | null | undefined, now = Date.now()): number | undefined {
  const v = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export interface RetryingOptions {
  readonly retry?: HttpRetryOptions;
  /** stops the waits and further attempts */
  readonly signal?: AbortSignal;
  /** names the call in log lines, e.g. "registration" */
  readonly what: string;
  /** hears about each failed attempt that will be tried again */
  readonly log?: (line: string) => void;
}

/**
 * Runs `attempt` until it succeeds, it throws anything but `transient(…)`, or the retries are
 * spent; rejects with the last attempt's error (the `transient` one unwrapped; a RelayError's
 * message then says how many attempts were made), or with `signal`'s reason once it aborts.
 */
export async function retrying<T>(attempt: (attemptNumber: number) => Promise<T>, o: RetryingOptions): Promise<T> {
  const r = { ...DEFAULT_HTTP_RETRY, ...(o.retry ?? {}) };
  let attempts = 0;
  try {
    return await pRetry(
      async (n) => {
        attempts = n;
        try {
          return await attempt(n);
        } catch (err) {
          if (err instanceof TransientFailure) throw err;
          throw new AbortError(err instanceof Error ? err : new Error(String(err)));
        }
      },
      {
        retries: r.retries,
        factor: 2,
        minTimeout: r.minTimeoutMs,
        maxTimeout: r.maxTimeoutMs,
        randomize: true,
        ...(o.signal ? { signal: o.signal } : {}),
        onFailedAttempt: async ({ error, attemptNumber, retriesLeft, retriesConsumed }) => {
          if (retriesLeft <= 0 || !(error instanceof TransientFailure)) return;
          const after = error.retryAfterMs;
          if (after !== undefined && after > r.maxRetryAfterMs) {
            error.error.message += ` (the control plane asks to retry after ${Math.ceil(after / 1000)} s)`;
            throw error;
          }
          o.log?.(`${o.what} attempt ${attemptNumber} of ${r.retries + 1} failed: ${error.error.message}; trying again${after !== undefined ? ` after at least ${Math.ceil(after / 1000)} s (Retry-After)` : ''}`);
          // p-retry's own backoff follows; wait out what of Retry-After it will not cover
          const backoffAtLeast = Math.min(r.minTimeoutMs * 2 ** retriesConsumed, r.maxTimeoutMs);
          if (after !== undefined && after > backoffAtLeast) await sleep(after - backoffAtLeast, o.signal);
        },
      },
    );
  } catch (err) {
    const e = err instanceof TransientFailure ? err.error : err;
    // our own errors say how many attempts were made (not, e.g., the abort signal's reason)
    if (attempts > 1 && e instanceof RelayError) e.message += ` (after ${attempts} attempts)`;
    throw e;
  }
}
