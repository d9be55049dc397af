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

  /** The seconds `key` must wait for a token (0 when one is there), without taking it. */
  wait(key: string, now = Date.now()): number {
    const b = this.buckets.get(key);
    if (!b) return 0;
    const tokens = Math.min(this.burst, b.tokens + (now - b.at) * this.ratePerMs);
    return tokens >= 1 ? 0 : Math.max(1, Math.ceil((1 - tokens) / this.ratePerMs / 1000));
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
      wait = signups.take(clientKey(req.ip));
      what = `more than ${limits.signupsPerMinute} signups per minute from this address`;
    }
    if (wait > 0) {
      throw new ApiError('rate_limited', `${what}; retry after ${wait} s`, { retry_after_seconds: wait }, { 'Retry-After': String(wait) });
    }
  });
}

/**
 * Refused statements (`invalid_sql`, `scope_violation`) cost the service a parse and a check but
 * nothing else, so each agent key has a budget of them: `perMinute` a minute with a burst of
 * half that. Over it, the key's queries are answered `429 rate_limited` before any parsing until
 * the budget refills. 0 disables.
 */
export class RefusalBudget {
  private readonly buckets: TokenBuckets | undefined;

  constructor(readonly perMinute: number) {
    this.buckets = perMinute > 0 ? new TokenBuckets(perMinute / 60, Math.max(1, Math.floor(perMinute / 2))) : undefined;
  }

  /** Throws 429 when `keyId` has used up its refusals. */
  check(keyId: string): void {
    const wait = this.buckets?.wait(keyId) ?? 0;
    if (wait > 0) {
      throw new ApiError(
        'rate_limited',
        `too many refused statements with this agent key (the budget is ${this.perMinute} a minute); fix the statement (see the earlier errors' messages) and retry after ${wait} s`,
        { retry_after_seconds: wait, reason: 'refused_statements' },
        { 'Retry-After': String(wait) },
      );
    }
  }

  /** Counts one refused statement against `keyId`. */
  charge(keyId: string): void {
    this.buckets?.take(keyId);
  }
}

/**
 * Whom per-address limits count a client as: its IPv4 address (an IPv4-mapped IPv6 address is
 * the IPv4 one), or its IPv6 /64 (one subscriber's network: an attacker holding a /64 has 2^64
 * addresses, so counting each alone would be no limit).
 */
export function clientKey(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1] as string;
  if (!ip.includes(':')) return ip;
  const [head = '', tail = ''] = ip.split('%')[0]?.split('::') ?? [];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...left, ...Array.from({ length: Math.max(0, 8 - left.length - right.length) }, () => '0'), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((g) => (parseInt(g || '0', 16) || 0).toString(16))
    .join(':')}::/64`;
}
