/**
 * Pooled connections to customers' databases (the `postgres` and `mysql` targets), per
 * organization: a query takes an idle connection (or opens one, up to {@link LiveConnections.max}
 * per organization), runs its read-only transaction, and gives the connection back after
 * `ROLLBACK` (nothing of the statement's transaction survives it: `SET LOCAL`, the cursor). A
 * connection that failed, was closed by the wire guard, or whose statement was cancelled or
 * killed is ended, never given back.
 *
 * A pool belongs to one version of the organization's credential: its key is a hash of the
 * registration, the connection URL, the options and the checked address. A query with another
 * key (the credential was replaced, or its host now resolves elsewhere) ends the old pool first;
 * replacing or deleting the credential ends it at once ({@link LiveConnections.forget}). A key
 * whose pool was ended that way is retired: a statement still holding it (it read the credential
 * just before the change, or waited for a connection when the pool ended) gets `503` and opens
 * nothing with the old credential. A statement whose signal aborts (revoked, expired) while it
 * waits for a connection stops waiting and runs nothing (answered by the abort's reason: 503 at
 * the shutdown). An idle connection is ended after
 * {@link IDLE_MS}. Pools are per process: a credential replaced through another replica is seen
 * here at this organization's next query (the key differs) or after the idle time.
 */
import { createHash } from 'node:crypto';
import { ApiError } from '../errors.js';
import { abortAnswer } from '../query/errors.js';

/** an idle connection is ended after this long unused */
export const IDLE_MS = 30_000;

/** How a pool ends a driver's connection and learns that one is gone. */
export interface PoolDriver<C> {
  /** the connector kind, as errors name it */
  readonly kind: 'postgres' | 'mysql';
  /** ends the connection, quietly (it may be gone already) */
  end(client: C): void;
  /** calls `gone` once the connection errors or ends (e.g. the server closed it while idle) */
  watch(client: C, gone: () => void): void;
}

interface Idle<C> {
  readonly client: C;
  readonly timer: NodeJS.Timeout;
}

interface Pool<C> {
  readonly key: string;
  readonly idle: Idle<C>[];
  /** connections open or opening, idle or in use */
  open: number;
  readonly waiters: ((client: C | undefined) => void)[];
  closed: boolean;
}

/** The pool key of one credential version: never the secret itself. */
export function poolKey(parts: readonly unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url');
}

/** how many retired pool keys are remembered per organization */
const RETIRED_PER_ORG = 16;

export class LiveConnections<C extends object> {
  private readonly pools = new Map<string, Pool<C>>();
  private readonly dead = new WeakSet<C>();
  /** keys of pools ended because the credential changed, per organization (newest last) */
  private readonly retired = new Map<string, string[]>();

  constructor(
    private readonly driver: PoolDriver<C>,
    /** connections per organization at most */
    readonly max = 4,
    private readonly idleMs = IDLE_MS,
  ) {}

  /**
   * A connection for `orgId` under credential version `key`: an idle one, a new one from `open`,
   * or the next one given back; waiting ends at `deadline` with `503` (nothing ran), or when
   * `signal` aborts (its reason is thrown when it is an ApiError, else 503; nothing ran).
   */
  async acquire(orgId: string, key: string, open: () => Promise<C>, deadline: number, signal?: AbortSignal): Promise<C> {
    if (signal?.aborted) throw this.stopped(signal);
    if (this.retired.get(orgId)?.includes(key)) throw this.credentialChanged();
    let pool = this.pools.get(orgId);
    if (pool && pool.key !== key) {
      // another version of the credential, or its host resolved elsewhere (several addresses):
      // the old pool ends; its key is retired only when the credential is replaced or deleted (forget)
      this.closePool(pool);
      pool = undefined;
    }
    if (!pool) {
      pool = { key, idle: [], open: 0, waiters: [], closed: false };
      this.pools.set(orgId, pool);
    }
    for (let idle = pool.idle.pop(); idle; idle = pool.idle.pop()) {
      clearTimeout(idle.timer);
      if (!this.dead.has(idle.client)) return idle.client;
      pool.open--;
    }
    if (pool.open < this.max) {
      pool.open++;
      let client: C;
      try {
        client = this.watch(await open());
      } catch (err) {
        pool.open--;
        this.wake(pool);
        throw err;
      }
      if (signal?.aborted) {
        // revoked or expired while the connection was being opened: it waits in the pool, nothing runs
        this.release(orgId, key, client, true);
        throw this.stopped(signal);
      }
      if (pool.closed && this.retired.get(orgId)?.includes(key)) {
        // the credential was replaced or deleted while this connection was opening: it is of the old one
        pool.open--;
        this.end(client);
        throw this.credentialChanged();
      }
      return client; // (a pool ended for another address: this connection serves its statement, then ends)
    }
    const waiting = pool;
    const client = await new Promise<C | undefined>((resolve) => {
      const stop = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', stop);
        const i = waiting.waiters.indexOf(give);
        if (i >= 0) waiting.waiters.splice(i, 1);
        resolve(undefined);
      };
      const timer = setTimeout(stop, Math.max(0, deadline - Date.now()));
      signal?.addEventListener('abort', stop, { once: true });
      const give = (c: C | undefined): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', stop);
        resolve(c);
      };
      waiting.waiters.push(give);
    });
    if (signal?.aborted) {
      if (client) this.release(orgId, key, client, true);
      throw this.stopped(signal);
    }
    if (client) return client;
    // a place came free, or the pool ended: asked again (a retired key is refused there)
    if (waiting.closed || waiting.open < this.max) return this.acquire(orgId, key, open, deadline, signal);
    throw new ApiError('service_unavailable', `this organization's ${this.max} connections to its ${this.driver.kind} database were all busy until the statement's deadline; nothing ran: retry, or send fewer statements at once`, {
      connector_kind: this.driver.kind,
      retry_after_seconds: 1,
    }, { 'Retry-After': '1' });
  }

  /** How many of `orgId`'s statements wait for a connection now (all of its connections are busy). */
  waiting(orgId: string): number {
    return this.pools.get(orgId)?.waiters.length ?? 0;
  }

  /** Gives `client` back (`reusable`: its transaction ended cleanly), or ends it. */
  release(orgId: string, key: string, client: C, reusable: boolean): void {
    const pool = this.pools.get(orgId);
    if (!pool || pool.key !== key || pool.closed) {
      this.end(client);
      return;
    }
    if (!reusable || this.dead.has(client)) {
      pool.open--;
      this.end(client);
      this.wake(pool);
      return;
    }
    const next = pool.waiters.shift();
    if (next) {
      next(client);
      return;
    }
    const timer = setTimeout(() => {
      const i = pool.idle.findIndex((x) => x.client === client);
      if (i >= 0) {
        pool.idle.splice(i, 1);
        pool.open--;
        this.end(client);
        if (pool.open === 0 && pool.waiters.length === 0 && this.pools.get(orgId) === pool) this.pools.delete(orgId);
      }
    }, this.idleMs);
    timer.unref();
    pool.idle.push({ client, timer });
  }

  /** Ends the organization's connections (its credential was replaced or deleted); their key is retired. */
  forget(orgId: string): void {
    const pool = this.pools.get(orgId);
    if (pool) this.retire(orgId, pool);
    this.pools.delete(orgId);
  }

  /** Ends a pool of a credential version that is no more, and remembers its key. */
  private retire(orgId: string, pool: Pool<C>): void {
    this.closePool(pool);
    const keys = this.retired.get(orgId) ?? [];
    if (!keys.includes(pool.key)) keys.push(pool.key);
    if (keys.length > RETIRED_PER_ORG) keys.shift();
    this.retired.set(orgId, keys);
  }

  /** A statement whose signal aborted before it ran: the abort's answer (revoked, expired, the shutdown), else 503; nothing ran. */
  private stopped(signal: AbortSignal): ApiError {
    return abortAnswer(signal, () =>
      new ApiError('service_unavailable', `the statement was stopped while it waited for a connection to its ${this.driver.kind} database; nothing ran: retry`, {
        connector_kind: this.driver.kind,
        retry_after_seconds: 1,
      }, { 'Retry-After': '1' }),
    );
  }

  private credentialChanged(): ApiError {
    return new ApiError('service_unavailable', `the organization's ${this.driver.kind} credential was replaced or deleted while this statement waited to run; nothing ran: retry (it runs with the current credential)`, {
      connector_kind: this.driver.kind,
      reason: 'credential_changed',
      retry_after_seconds: 1,
    }, { 'Retry-After': '1' });
  }

  /** Ends every connection (shutdown); those in use are ended when given back. */
  close(): void {
    for (const pool of this.pools.values()) this.closePool(pool);
    this.pools.clear();
  }

  private end(client: C): void {
    this.driver.end(client);
  }

  private closePool(pool: Pool<C>): void {
    pool.closed = true;
    for (const idle of pool.idle.splice(0)) {
      clearTimeout(idle.timer);
      this.end(idle.client);
    }
    for (const w of pool.waiters.splice(0)) w(undefined);
  }

  /** a place came free: the longest waiter opens a connection of its own */
  private wake(pool: Pool<C>): void {
    pool.waiters.shift()?.(undefined);
  }

  private watch(client: C): C {
    this.driver.watch(client, () => void this.dead.add(client));
    return client;
  }
}
