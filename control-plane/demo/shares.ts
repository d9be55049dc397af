/**
 * The embedded demo engines' fairness as one budget across the replicas of a PostgreSQL store.
 *
 * Each replica runs demo statements on workers of its own, and its gate (gate.ts) shares them
 * between organizations. Without more, an organization whose statements a balancer spreads over
 * three replicas would hold three shares, and a sender held back on one replica (its statement
 * cost a worker, engine.ts) would simply be served by another. With these shares:
 * - a statement also takes one of its sender's places on the store (transaction-scoped advisory
 *   locks on a connection of a small pool of its own, held while the statement runs): a sender
 *   holds at most its share (the places one replica gives it) through every replica together,
 *   and waits in the lock's queue for a place another replica holds, up to its deadline. The
 *   store ends a dead replica's locks with its connections.
 * - a sender held back on one replica is held back on all of them (a row in `demo_holds`, read
 *   in the same round trip that takes the place), until that replica's replacement worker is
 *   warm; a hold lapses by itself in at most six times the hold's usual length, so a replica that
 *   dies does not hold anyone back for longer.
 * The free-trial class's cap stays per replica: it keeps a part of each replica's own workers for
 * paying organizations, which is what each replica needs (a free sender's own share is global).
 */
import pg from 'pg';
import { DemoQueryError, placeKeys, tenantDigest } from './query.js';

/**
 * the range of second advisory-lock keys of senders' places, from here PLACE_SPACE_SIZE long
 * (two-int4 form; other users of the store take the bigint form or other first keys)
 */
export const SHARE_SPACE = 0x52c00000;
/** a wait for a place held elsewhere is asked again this often (so a stopped statement stops waiting) */
const WAIT_STEP_MS = 250;
/** the longest any of the shares' own statements may take, as the client sees it */
const QUERY_TIMEOUT_MS = 3000;

export interface TakeOptions {
  readonly timeoutMs: number;
  readonly signal?: AbortSignal | undefined;
  readonly holdRetryMs?: number | undefined;
}

/** Demo fairness kept across replicas; the embedded engine calls it around each statement. */
export interface DemoShares {
  /**
   * Take one of `tenant`'s `places` places across every replica, waiting for one up to
   * `deadline`; resolves with its release (call it once, when the statement is done). Throws
   * DEMO_ERR_COOLDOWN when the tenant is held back (by any replica; its retry time at most
   * `holdRetryMs`, how long a hold usually lasts: the row's own end is only the bound at which a
   * dead replica's hold lapses), DEMO_ERR_BUSY when no place came free in time,
   * DEMO_ERR_UNAVAILABLE when the store cannot be asked or `signal` aborted.
   */
  take(tenant: string, places: number, deadline: number, o: TakeOptions): Promise<() => void>;
  /** Hold `tenant` back on every replica for at most `ms` (or until this replica clears it). */
  hold(tenant: string, ms: number): Promise<void>;
  /** End this replica's hold of `tenant`, or all of this replica's holds. */
  clear(tenant?: string): Promise<void>;
  close(): Promise<void>;
}

interface Digest {
  /** the advisory-lock keys of its places: place s is (key1, key2 + s) */
  readonly key1: number;
  readonly key2: number;
  /** the name `demo_holds` keeps (not the organization or the address itself) */
  readonly name: string;
}

function digest(tenant: string): Digest {
  const h = tenantDigest(tenant);
  return { ...placeKeys(h, SHARE_SPACE), name: h.subarray(0, 16).toString('hex') };
}

/** DEMO_ERR_COOLDOWN for a sender held back (by another replica's hold) for `ms` more */
function heldBack(tenant: string, ms: number): DemoQueryError {
  const wait = Math.max(1, Math.ceil(ms / 1000));
  return new DemoQueryError(
    'DEMO_ERR_COOLDOWN',
    `${tenant.startsWith('trial:') ? 'a free-trial statement from this address' : "this organization's last statement"} cost a demo engine its worker on another replica (it ran past its deadline, or needed more memory than the engine has) and the replacement is still starting; nothing was run or charged: retry in ${wait} s`,
    { retryAfter: wait },
  );
}

/** DEMO_ERR_UNAVAILABLE: the store did not answer the shares' own statements */
function unasked(): DemoQueryError {
  return new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the store, which shares the demo engines between replicas, could not be asked for a place');
}

interface Placement {
  readonly place: number | null;
  readonly held_ms: number | null;
}

export class StoreDemoShares implements DemoShares {
  private readonly pool: pg.Pool;
  readonly replica: string;
  /** a hold was written by this replica (until then there is nothing of its own to clear) */
  private held = false;

  /** `url`: the PostgreSQL store; `poolSize`: one per statement the replica runs at once, and spares */
  constructor(url: string, replica: string, poolSize: number) {
    this.replica = replica;
    // query_timeout: a store that stops answering (a hung server, dropped packets) fails the wait
    // for a place within seconds instead of holding the statement past its deadline
    this.pool = new pg.Pool({ connectionString: url, max: poolSize, application_name: 'svc-demo-shares', connectionTimeoutMillis: 5000, idleTimeoutMillis: 30_000, statement_timeout: 5000, query_timeout: QUERY_TIMEOUT_MS });
    this.pool.on('error', () => undefined); // an idle connection dropped by the server
    // so must one holding a place whose session the server ends: its release finds it broken
    this.pool.on('connect', (client) => {
      client.on('error', () => undefined);
    });
  }

  async take(tenant: string, places: number, deadline: number, o: TakeOptions): Promise<() => void> {
    const d = digest(tenant);
    const n = Math.min(64, Math.max(1, Math.floor(places)));
    const tryAll = `(SELECT s FROM generate_series(0, ${n - 1}) s WHERE pg_try_advisory_xact_lock(${d.key1}, ${d.key2} + s) LIMIT 1)`;
    const held = `(SELECT ceil(extract(epoch FROM max(until) - now()) * 1000)::int FROM demo_holds WHERE tenant = '${d.name}' AND until > now())`;
    for (let turn = 0; ; turn++) {
      if (o.signal?.aborted) throw new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the statement was stopped before it ran');
      // a place found with too little time left would only run to be stopped (and its worker ended) at the deadline
      const left = deadline - Date.now();
      if (left <= Math.max(100, o.timeoutMs / 4)) {
        throw new DemoQueryError(
          'DEMO_ERR_BUSY',
          `no demo engine place came free in time for the statement's ${o.timeoutMs} ms deadline: ${tenant.startsWith('trial:') ? 'other free-trial statements from this address' : "this organization's other statements"} hold its share through this or other replicas; nothing ran or was charged: retry in a few seconds, or send fewer statements at once`,
          { retryAfter: 2 },
        );
      }
      let c: pg.PoolClient;
      try {
        c = await this.pool.connect();
      } catch {
        throw new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the store, which shares the demo engines between replicas, is unreachable');
      }
      const end = (clean: boolean): void => c.release(!clean);
      const rollback = (): Promise<void> => c.query('ROLLBACK').then(() => end(true), () => end(false));
      const release = (): void => void rollback();
      let placement: Placement | undefined;
      try {
        const results = (await c.query(
          // the place is this transaction, idle while the statement runs: a server-wide
          // idle_in_transaction_session_timeout shorter than the statement would drop it
          `BEGIN; SET LOCAL idle_in_transaction_session_timeout = 0; SET LOCAL lock_timeout = ${Math.max(1, Math.floor(Math.min(WAIT_STEP_MS, left - o.timeoutMs / 4)))}; SELECT ${tryAll} AS place, ${held} AS held_ms`,
        )) as unknown as pg.QueryResult<Placement>[];
        placement = results[3]?.rows[0];
      } catch {
        await rollback();
        throw unasked();
      }
      // held back (by any replica): the place is given up at once
      const refuseIfHeld = async (ms: number | null | undefined): Promise<void> => {
        if (ms === null || ms === undefined || ms <= 0) return;
        await rollback();
        throw heldBack(tenant, Math.min(ms, o.holdRetryMs ?? Infinity));
      };
      await refuseIfHeld(placement?.held_ms);
      if (placement && placement.place !== null) return release;
      // every place is held (through this or another replica): wait in the lock's queue for one
      try {
        await c.query(`SELECT pg_advisory_xact_lock(${d.key1}, ${d.key2 + (turn % n)})`);
      } catch (err) {
        await rollback();
        if (!(err instanceof pg.DatabaseError && err.code === '55P03')) throw unasked();
        // lock_not_available: not yet; ask again (for any place) while time is left
        continue;
      }
      // a place given up by a statement that cost its worker comes with that sender's hold, written
      // just before: read in a statement of its own (the one that waited has a snapshot from before)
      let heldMs: number | null | undefined;
      try {
        heldMs = (await c.query<{ held_ms: number | null }>(`SELECT ${held} AS held_ms`)).rows[0]?.held_ms;
      } catch {
        await rollback();
        throw unasked();
      }
      await refuseIfHeld(heldMs);
      return release;
    }
  }

  async hold(tenant: string, ms: number): Promise<void> {
    this.held = true;
    // holds that lapsed go with the next one (they are rare: a statement that cost a worker)
    await this.pool
      .query(
        `WITH lapsed AS (DELETE FROM demo_holds WHERE until < now() AND NOT (tenant = $1 AND replica = $2))
         INSERT INTO demo_holds (tenant, replica, until) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
         ON CONFLICT (tenant, replica) DO UPDATE SET until = EXCLUDED.until`,
        [digest(tenant).name, this.replica, Math.max(1, Math.ceil(ms))],
      )
      .catch(() => undefined); // the store is unreachable: this replica's own hold still stands
  }

  async clear(tenant?: string): Promise<void> {
    if (!this.held) return; // (a replica that never held anyone back opens no connection at its close)
    await this.pool
      .query(
        tenant === undefined ? 'DELETE FROM demo_holds WHERE replica = $1' : 'DELETE FROM demo_holds WHERE replica = $1 AND tenant = $2',
        tenant === undefined ? [this.replica] : [this.replica, digest(tenant).name],
      )
      .catch(() => undefined); // it lapses by itself
  }

  async close(): Promise<void> {
    await this.clear();
    await this.pool.end().catch(() => undefined);
  }
}
