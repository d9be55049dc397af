/**
 * Per-caller rate limits (token buckets): each agent key, and signups per client address. A
 * caller over its limit gets `429 rate_limited` with `Retry-After`. On the embedded store (one
 * process) the buckets live in memory; on a PostgreSQL store they live in the store's
 * `rate_buckets` table, one row per bucket taken from in one statement, so every replica draws
 * from the same budget.
 */
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';
import type { Store } from '../store/index.js';

/**
 * In-memory token buckets. Their times are on `now`, by default performance.now(): a clock that
 * only moves forward (on the wall clock, a step back credited nothing until the clock passed the
 * buckets' times again: a key that spent its burst was refused for the length of the step). A
 * caller passing its own times should pass them from such a clock too; one stepped back credits
 * and takes nothing.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly ratePerMs: number;
  private readonly burst: number;

  constructor(perSecond: number, burst: number) {
    this.ratePerMs = perSecond / 1000;
    this.burst = burst;
  }

  /** Take one token for `key`; returns 0 when allowed, else the seconds to wait. */
  take(key: string, now = performance.now()): number {
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    // a time before the bucket's credits nothing and takes nothing (a negative interval drove the
    // bucket far below zero: the key refused for as long as the step); its time never moves back either
    b.tokens = Math.min(this.burst, b.tokens + Math.max(0, now - b.at) * this.ratePerMs);
    b.at = Math.max(b.at, now);
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
  wait(key: string, now = performance.now()): number {
    const tokens = this.tokens(key, now);
    return tokens >= 1 ? 0 : Math.max(1, Math.ceil((1 - tokens) / this.ratePerMs / 1000));
  }

  /** The tokens in `key`'s bucket now, without taking any. */
  tokens(key: string, now = performance.now()): number {
    const b = this.buckets.get(key);
    return b ? Math.min(this.burst, b.tokens + Math.max(0, now - b.at) * this.ratePerMs) : this.burst;
  }

  /** Forget buckets that have refilled completely. */
  private sweep(now: number): void {
    for (const [k, b] of this.buckets) if (b.tokens + Math.max(0, now - b.at) * this.ratePerMs >= this.burst) this.buckets.delete(k);
  }
}

/** What {@link RateBuckets.admit} answered for one request. */
export interface Admission {
  /** the whole seconds to wait for a token (0: one is there, the request goes on) */
  readonly wait: number;
  /** the request let through has ended (whatever it took): call it once */
  done(): void;
}

const nothingToEnd = (): void => undefined;

/** One kind of bucket (a rate and a burst), keyed by caller. */
export interface RateBuckets {
  /** Takes one token from `key`'s bucket: 0 when allowed, else the whole seconds to wait. */
  take(key: string): Promise<number>;
  /** The seconds `key` must wait for a token (0 when one is there), without taking it. */
  wait(key: string): Promise<number>;
  /** {@link wait} for a request that goes on when it is 0 and may then take: `done()` once it has ended. */
  admit(key: string): Promise<Admission>;
  /** The tokens in `key`'s bucket now and the seconds to wait for one (0 when one is there), without taking any. */
  look(key: string): Promise<{ readonly tokens: number; readonly wait: number }>;
}

class MemoryBuckets implements RateBuckets {
  private readonly buckets: TokenBuckets;
  constructor(perSecond: number, burst: number) {
    this.buckets = new TokenBuckets(perSecond, burst);
  }
  async take(key: string): Promise<number> {
    return this.buckets.take(key);
  }
  async wait(key: string): Promise<number> {
    return this.buckets.wait(key);
  }
  async admit(key: string): Promise<Admission> {
    return { wait: this.buckets.wait(key), done: nothingToEnd };
  }
  async look(key: string): Promise<{ tokens: number; wait: number }> {
    return { tokens: this.buckets.tokens(key), wait: this.buckets.wait(key) };
  }
}

// the bucket refilled for the time since it was last touched (never more than the burst, never
// less than it was if the clock stepped back): $2 burst, $3 tokens per second. `at` never moves
// backwards: a statement queued on the row lock carries the now() of its start, older than the
// `at` a later-started one wrote, and writing it back would credit the same time twice
// (review: 3-4x the budget through with 40 connections on one key). A time more than a minute
// ahead of now() cannot be such a statement's (the store's statements time out after 30 s): the
// server's clock stepped back, the bucket is taken as full and its time set to now(); left as it
// was, it refilled nothing until the clock caught up again (a key kept out for the step's length)
const STEPPED_BACK = "b.at > now() + interval '60 seconds'";
const REFILLED = `CASE WHEN ${STEPPED_BACK} THEN $2::float8 ELSE LEAST($2::float8, b.tokens + GREATEST(0, EXTRACT(EPOCH FROM now() - b.at))::float8 * $3::float8) END`;
const AT_AFTER_TAKE = `CASE WHEN ${STEPPED_BACK} THEN now() ELSE GREATEST(b.at, now()) END`;
const TAKE = `INSERT INTO rate_buckets AS b (key, tokens, at, ok) VALUES ($1, $2::float8 - 1, now(), true)
  ON CONFLICT (key) DO UPDATE SET ok = ${REFILLED} >= 1, tokens = ${REFILLED} - CASE WHEN ${REFILLED} >= 1 THEN 1 ELSE 0 END, at = ${AT_AFTER_TAKE}
  RETURNING ok, tokens`;
/** @internal the take statement ($1 key, $2 burst, $3 tokens a second), for tests that run it inside their own transaction */
export const TAKE_FOR_TEST = TAKE;
const PEEK = `SELECT ${REFILLED} AS tokens FROM rate_buckets b WHERE key = $1`;

/** Buckets in the store's `rate_buckets` table: one budget for every replica on that store. */
export class StoreBuckets implements RateBuckets {
  /**
   * keys the store refused: until when (ms) they are refused without asking it (a flood of refused
   * requests does not each cost a store write), and when (ms) the store said a token would be there.
   * These times and {@link openUntil}'s are on performance.now(), a clock that only moves forward:
   * on the wall clock, a step back of an hour kept a key refused (or its budget open) here for that
   * hour without asking the store.
   */
  private readonly refusedUntil = new Map<string, { until: number; tokenAt: number }>();
  /**
   * keys whose bucket {@link admit} found with a token: until when (ms) it lets a request through
   * again without asking the store (so a key's every query does not cost a store round trip). A
   * take here forgets it; takes through other replicas do not, so for at most `openForMs` after
   * such a read this replica may let through one statement more than the budget before its own
   * next take (and a refusal of it) sends it back to the store. One, not all that arrive in that
   * time: see {@link lent}.
   */
  private readonly openUntil = new Map<string, number>();
  /**
   * keys with a request let through on {@link openUntil} that has not ended (its `done()`): the
   * key's other requests meanwhile ask the store. (Review: every request arriving together was
   * let through on it, so a key that spent its budget through another replica had all of them
   * parsed and checked here, up to its per-key request rate, where the store would refuse them.)
   */
  private readonly lent = new Set<string>();
  /**
   * takes begun here, and those not ended: a look at the store that overlapped a take here (it
   * may have read the bucket before the take wrote it) does not mark a key open (any key's take:
   * a look overlapping one only costs the next request a round trip)
   */
  private takesBegun = 0;
  private takesRunning = 0;

  constructor(
    private readonly store: Store,
    /** prefix of this kind's keys */
    private readonly kind: string,
    private readonly perSecond: number,
    private readonly burst: number,
    /** how long a bucket {@link admit} found with a token is taken as still having one (0: always asked) */
    private readonly openForMs = 0,
  ) {}

  async take(key: string): Promise<number> {
    this.takesBegun++;
    this.takesRunning++;
    try {
      return await this.taken(key);
    } finally {
      this.takesRunning--;
    }
  }

  private async taken(key: string): Promise<number> {
    this.openUntil.delete(key);
    // a key refused a moment ago is refused again without asking the store (never lets more through)
    // (answered with the wait the store gave, not the cache's own short life)
    const refused = this.refusedUntil.get(key);
    if (refused !== undefined) {
      const now = performance.now();
      if (refused.until > now) return Math.max(1, Math.ceil((refused.tokenAt - now) / 1000));
      this.refusedUntil.delete(key);
    }
    const [row] = await this.store.query<{ ok: boolean; tokens: number }>(TAKE, [`${this.kind}:${key}`, this.burst, this.perSecond]);
    if (!row || row.ok) return 0;
    const wait = this.secondsFor(Number(row.tokens));
    if (this.refusedUntil.size >= 10_000) this.refusedUntil.clear();
    // at most until a token could be there, and never long: a refusal here only saves a round trip
    const tokenInMs = ((1 - Number(row.tokens)) / this.perSecond) * 1000;
    const now = performance.now();
    this.refusedUntil.set(key, { until: now + Math.min(1000, tokenInMs), tokenAt: now + tokenInMs });
    return wait;
  }

  async wait(key: string): Promise<number> {
    const admitted = await this.admit(key);
    admitted.done();
    return admitted.wait;
  }

  async admit(key: string): Promise<Admission> {
    const now = performance.now();
    const refused = this.refusedUntil.get(key);
    if (refused !== undefined && refused.until > now) return { wait: Math.max(1, Math.ceil((refused.tokenAt - now) / 1000)), done: nothingToEnd };
    const open = this.openUntil.get(key);
    if (open !== undefined && open <= now) this.openUntil.delete(key);
    else if (open !== undefined && !this.lent.has(key)) {
      this.lent.add(key);
      let ended = false;
      const done = (): void => {
        if (ended) return;
        ended = true;
        this.lent.delete(key);
      };
      return { wait: 0, done };
    }
    const takes = this.takesRunning === 0 ? this.takesBegun : -1;
    const [row] = await this.store.query<{ tokens: number }>(PEEK, [`${this.kind}:${key}`, this.burst, this.perSecond]);
    if (!row || Number(row.tokens) >= 1) {
      if (this.openForMs > 0 && takes === this.takesBegun) {
        if (this.openUntil.size >= 10_000) this.openUntil.clear();
        this.openUntil.set(key, performance.now() + this.openForMs);
      }
      return { wait: 0, done: nothingToEnd };
    }
    return { wait: this.secondsFor(Number(row.tokens)), done: nothingToEnd };
  }

  async look(key: string): Promise<{ tokens: number; wait: number }> {
    const refused = this.refusedUntil.get(key);
    const now = performance.now();
    if (refused !== undefined && refused.until > now) return { tokens: 0, wait: Math.max(1, Math.ceil((refused.tokenAt - now) / 1000)) };
    const [row] = await this.store.query<{ tokens: number }>(PEEK, [`${this.kind}:${key}`, this.burst, this.perSecond]);
    const tokens = row ? Number(row.tokens) : this.burst;
    return { tokens, wait: tokens >= 1 ? 0 : this.secondsFor(tokens) };
  }

  private secondsFor(tokens: number): number {
    return Math.max(1, Math.ceil((1 - tokens) / this.perSecond));
  }
}

/**
 * Buckets of one kind (`kind` prefixes their keys in the store): shared through the store when it
 * is PostgreSQL (several replicas may use it), in this process's memory on the embedded store.
 */
export function rateBuckets(store: Store | undefined, kind: string, perSecond: number, burst: number, openForMs = 0): RateBuckets {
  return store?.kind === 'postgres' ? new StoreBuckets(store, kind, perSecond, burst, openForMs) : new MemoryBuckets(perSecond, burst);
}

/** A bucket untouched this long has refilled whatever its rate: its row can go. */
export const RATE_BUCKET_IDLE_MS = 10 * 60_000;

/** Removes the store's buckets idle for {@link RATE_BUCKET_IDLE_MS} (they are full). */
export async function sweepRateBuckets(store: Store): Promise<void> {
  await store.query(`DELETE FROM rate_buckets WHERE at < now() - make_interval(secs => $1)`, [RATE_BUCKET_IDLE_MS / 1000]);
}

export interface RateLimits {
  /** requests per second per agent key (0 disables) */
  readonly perKeyPerSecond: number;
  /** signups per minute per client address (0 disables) */
  readonly signupsPerMinute: number;
}

/** `store`: the buckets are shared through it when it is PostgreSQL (see {@link rateBuckets}). */
export function registerRateLimits(app: FastifyInstance, limits: RateLimits, store?: Store): void {
  const keys = limits.perKeyPerSecond > 0 ? rateBuckets(store, 'key', limits.perKeyPerSecond, limits.perKeyPerSecond * 2) : undefined;
  const signups = limits.signupsPerMinute > 0 ? rateBuckets(store, 'signup', limits.signupsPerMinute / 60, limits.signupsPerMinute) : undefined;
  if (store?.kind === 'postgres') {
    const sweeper = setInterval(() => {
      sweepRateBuckets(store).catch((err: unknown) => app.log.warn({ err: { message: (err as Error).message } }, 'rate bucket sweep failed'));
    }, 60_000);
    sweeper.unref();
    app.addHook('onClose', async () => clearInterval(sweeper));
  }
  app.addHook('onRequest', async (req) => {
    let wait = 0;
    let what = '';
    if (req.principal && keys) {
      wait = await keys.take(req.principal.keyId);
      what = `more than ${limits.perKeyPerSecond} requests per second with this agent key`;
    } else if (signups && req.method === 'POST' && req.routeOptions.url === '/v1/agent/account') {
      wait = await signups.take(clientKey(req.ip));
      what = `more than ${limits.signupsPerMinute} signups per minute from this address`;
    }
    if (wait > 0) {
      throw new ApiError('rate_limited', `${what}; retry after ${wait} s`, { retry_after_seconds: wait }, { 'Retry-After': String(wait) });
    }
  });
}

/**
 * How long a key's refusal budget, found open on a PostgreSQL store, is taken as open without
 * asking the store again (each query checks it before parsing; see {@link StoreBuckets}).
 */
export const REFUSALS_OPEN_MS = 1000;

/** What {@link RefusalBudget.check} let through: one statement, until it has ended. */
export interface RefusalTicket {
  /** The statement was refused (not charged): it counts against the key's budget. */
  refused(): Promise<void>;
  /** The statement has ended (after {@link refused}, if it was). Once. */
  ended(): void;
}

const FREE_TICKET: RefusalTicket = { refused: async () => undefined, ended: () => undefined };

/** one key's statements let through here that have not ended, and who waits for one of them to end */
interface Running {
  running: number;
  readonly waiting: (() => void)[];
}

/**
 * Refused statements (`invalid_sql`, `scope_violation`) cost the service a parse and a check but
 * nothing else, so each agent key has a budget of them: `perMinute` a minute with a burst of
 * half that. Over it, the key's queries are answered `429 rate_limited` before any parsing until
 * the budget refills. 0 disables.
 *
 * Whether a statement will be refused is known only once it has been checked, so the budget is
 * looked at before and charged after. A key's statement that runs alone here is let through on
 * one look (or none, see {@link StoreBuckets}); one arriving while others of the key run here is
 * let through only while the budget's tokens are more than those running, and otherwise waits
 * for one of them to end, then looks again. (Review: statements sent together were each let
 * through on a look made before any of them was refused and charged: 30 at once with a burst of
 * 10 were all parsed.) Nothing is held in the budget for a running statement, so statements of
 * the key that are not refused never make it refuse others, here or on other replicas.
 */
export class RefusalBudget {
  private readonly buckets: RateBuckets | undefined;
  private readonly keys = new Map<string, Running>();

  /** `store`: shared through it when it is PostgreSQL (see {@link rateBuckets}). */
  constructor(
    readonly perMinute: number,
    store?: Store,
  ) {
    this.buckets = perMinute > 0 ? rateBuckets(store, 'refused', perMinute / 60, Math.max(1, Math.floor(perMinute / 2)), REFUSALS_OPEN_MS) : undefined;
  }

  /**
   * Throws 429 when `keyId` has used up its refusals; else lets its statement through: call the
   * ticket's `refused()` if it was refused, and `ended()` once it has ended.
   */
  async check(keyId: string): Promise<RefusalTicket> {
    const buckets = this.buckets;
    if (!buckets) return FREE_TICKET;
    for (;;) {
      let k = this.keys.get(keyId);
      if (!k) this.keys.set(keyId, (k = { running: 0, waiting: [] }));
      if (k.running === 0) {
        k.running++;
        let admitted: Admission;
        try {
          admitted = await buckets.admit(keyId);
        } catch (err) {
          this.leave(keyId, k);
          throw err;
        }
        if (admitted.wait === 0) return this.ticket(buckets, keyId, k, admitted.done);
        this.leave(keyId, k);
        throw this.over(admitted.wait);
      }
      const { tokens, wait } = await buckets.look(keyId);
      if (wait > 0) throw this.over(wait);
      const now = this.keys.get(keyId);
      if (now === undefined || now.running === 0) continue; // those running here ended meanwhile: look again, alone
      if (tokens - now.running >= 1) {
        now.running++;
        return this.ticket(buckets, keyId, now, nothingToEnd);
      }
      // as many of the key's statements run here as the budget has tokens: wait for one to end
      await new Promise<void>((r) => now.waiting.push(r));
    }
  }

  /** Counts one refused statement against `keyId`. */
  async charge(keyId: string): Promise<void> {
    await this.buckets?.take(keyId);
  }

  private ticket(buckets: RateBuckets, keyId: string, k: Running, done: () => void): RefusalTicket {
    let refused = false;
    let ended = false;
    return {
      refused: async () => {
        if (refused || ended) return;
        refused = true;
        await buckets.take(keyId);
      },
      ended: () => {
        if (ended) return;
        ended = true;
        done();
        this.leave(keyId, k);
      },
    };
  }

  private leave(keyId: string, k: Running): void {
    k.running--;
    for (const wake of k.waiting.splice(0)) wake();
    if (k.running === 0 && this.keys.get(keyId) === k) this.keys.delete(keyId);
  }

  private over(wait: number): ApiError {
    return new ApiError(
      'rate_limited',
      `too many refused statements with this agent key (the budget is ${this.perMinute} a minute); fix the statement (see the earlier errors' messages) and retry after ${wait} s`,
      { retry_after_seconds: wait, reason: 'refused_statements' },
      { 'Retry-After': String(wait) },
    );
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
