/**
 * Per-caller rate limits (token buckets): each agent key, and signups per client address. A
 * caller over its limit gets `429 rate_limited` with `Retry-After`. Buckets live in this process
 * (each replica limits on its own).
 */
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';

export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly ratePerMs: number;
  private readonly burst: number;

  constructor(perSecond: number, burst: number) {
    this.ratePerMs = perSecond / 1000;
    this.burst = burst;
  }

  /** Take one token for `key`; returns 0 when allowed, else the seconds to wait. */
  take(key: string, now = Date.now()): number {
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + (now - b.at) * this.ratePerMs);
    b.at = now;
    if (this.buckets.size > 100_000) this.sweep(now);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      this.buckets.set(key, b);
      return 0;
    }
    this.buckets.set(key, b);
    return Math.max(1, Math.ceil((1 - b.tokens) / this.ratePerMs / 1000));
  }

  /** Forget buckets that have refilled completely. */
  private sweep(now: number): void {
    for (const [k, b] of this.buckets) if (b.tokens + (now - b.at) * this.ratePerMs >= this.burst) this.buckets.delete(k);
  }
}

export interface RateLimits {
  /** requests per second per agent key (0 disables) */
  readonly perKeyPerSecond: number;
  /** signups per minute per client address (0 disables) */
  readonly signupsPerMinute: number;
}

export function registerRateLimits(app: FastifyInstance, limits: RateLimits): void {
  const keys = limits.perKeyPerSecond > 0 ? new TokenBuckets(limits.perKeyPerSecond, limits.perKeyPerSecond * 2) : undefined;
  const signups = limits.signupsPerMinute > 0 ? new TokenBuckets(limits.signupsPerMinute / 60, limits.signupsPerMinute) : undefined;
  app.addHook('onRequest', async (req) => {
    let wait = 0;
    let what = '';
    if (req.principal && keys) {
      wait = keys.take(req.principal.keyId);
      what = `more than ${limits.perKeyPerSecond} requests per second with this agent key`;
    } else if (signups && req.method === 'POST' && req.routeOptions.url === '/v1/agent/account') {
      wait = signups.take(req.ip);
      what = `more than ${limits.signupsPerMinute} signups per minute from this address`;
    }
    if (wait > 0) {
      throw new ApiError('rate_limited', `${what}; retry after ${wait} s`, { retry_after_seconds: wait }, { 'Retry-After': String(wait) });
    }
  });
}
