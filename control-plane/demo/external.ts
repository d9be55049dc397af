/**
 * The external-PostgreSQL demo engine (SVC_DEMO_DATABASE_URL): the demo datasets in a PostgreSQL
 * of the operator's, loaded on the first start, read through a `pg` pool of guarded clients.
 * Each statement takes its tenant's places on the shared database (transaction-scoped advisory
 * locks, so replicas share it fairly), then runs as one pg-read round trip: the settings
 * (`SET LOCAL ROLE` to the reader role, whose forced row-level security is the second layer, and
 * the scope's settings), statement_timeout enforced by the server, the caps, ROLLBACK.
 */
import pg from 'pg';
import { classifyPgError, GuardedPgClient, type ReadFailure } from '../../pg-read/index.js';
import type { ReadQueryResult } from '../results/index.js';
import { oversizeError, readCollected, type CollectedOutcome } from '../live/postgres-read.js';
import { admitted, DemoQueryError, perTenant, placeKeys, preamble, tenantDigest, tenantKey, type DemoEngine, type DemoEngineOptions, type DemoQuery } from './query.js';
import { FairGate, type GateAdmissions } from './gate.js';
import { demoFingerprint, loadScript } from './load.js';
import type { DatasetDef } from './types.js';
import { pause } from '../time.js';

const INT8_OID = 20;
const pgTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (v: string) => v : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/**
 * Advisory-lock keys on the shared demo database, in the two-int4 form (never the bigint form our
 * other locks use): a tenant's places are placeKeys(tenant, TENANT_SPACE) (second keys in
 * [TENANT_SPACE, TENANT_SPACE + PLACE_SPACE_SIZE)), the free class's are (TRIAL_CLASS,
 * TRIAL_SPACE + slot), outside that range.
 */
export const TENANT_SPACE = 0x53000000;
const TRIAL_CLASS = 0x53565452;
const TRIAL_SPACE = 0x53561000;
/** how long a statement waits before asking the shared database for a place again */
const SLOT_RETRY_MS = 50;

/**
 * The places one statement needs across every replica sharing the demo database, taken as
 * transaction-scoped advisory locks on the connection that runs it (released by its ROLLBACK, or
 * by the server when the connection or the replica dies): one of its tenant's places and, for
 * trial work, one of the free class's. A free tenant (one client address) may hold at most half
 * of the free class's places, so one address flooding through one replica leaves places for free
 * callers on the others. Each replica's own gate orders its callers; these make the shares
 * global, so a tenant (or the free class) holds no more of the shared database through several
 * replicas than through one.
 */
function slotQuery(q: DemoQuery, perTenantSlots: number, trialSlots: number): string {
  const tenant = placeKeys(tenantDigest(tenantKey(q)), TENANT_SPACE);
  const tenantSlots = q.trial ? Math.max(1, Math.floor(trialSlots / 2)) : perTenantSlots;
  const take = (key1: number, key2: number, n: number): string =>
    `(SELECT s FROM generate_series(0, ${Math.min(64, Math.max(1, n)) - 1}) s WHERE pg_try_advisory_xact_lock(${key1}, ${key2} + s) LIMIT 1)`;
  return `SELECT ${take(tenant.key1, tenant.key2, tenantSlots)} AS tenant_slot, ${q.trial ? take(TRIAL_CLASS, TRIAL_SPACE, trialSlots) : '0'} AS trial_slot`;
}

export class PostgresDemoEngine implements DemoEngine {
  readonly kind = 'postgres' as const;
  private readonly pool: pg.Pool;
  readonly gate: FairGate;
  /** statements that reached the engine since start (started()) */
  private startedCount = 0;

  private constructor(pool: pg.Pool, poolSize: number) {
    this.pool = pool;
    // the gate admits one statement fewer than the pool holds: a spare connection (cancelling a
    // statement needs none, it is a CancelRequest)
    const capacity = Math.max(1, poolSize - 1);
    this.gate = new FairGate(capacity, perTenant(capacity), perTenant(capacity));
  }

  /**
   * A pooled connection inside a read-only transaction that holds this statement's shared places
   * (slotQuery), waiting for them until the deadline; `DEMO_ERR_BUSY` when none came free.
   */
  private async placed(q: DemoQuery, deadline: number): Promise<pg.PoolClient> {
    for (;;) {
      if (q.signal?.aborted) throw new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the statement was stopped before it ran');
      let c: pg.PoolClient;
      try {
        c = await this.pool.connect();
      } catch {
        throw new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the demo database is unreachable');
      }
      let places: { tenant_slot: number | null; trial_slot: number | null } | undefined;
      try {
        // the transaction and its places in one simple-protocol round trip (the settings go with the statement)
        const results = (await c.query(
          ['BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY', slotQuery(q, this.gate.perTenant, this.gate.trialCapacity)].join(';\n'),
        )) as unknown as pg.QueryResult<{ tenant_slot: number | null; trial_slot: number | null }>[];
        places = results[1]?.rows[0];
      } catch (err) {
        await c.query('ROLLBACK').catch(() => undefined);
        c.release(true);
        if (err instanceof pg.DatabaseError) throw new DemoQueryError('DEMO_ERR_UNAVAILABLE', `the demo database refused the statement's transaction: ${err.message}`);
        throw new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the demo database is unreachable');
      }
      if (places && places.tenant_slot !== null && places.trial_slot !== null) return c;
      // this tenant's (or the free class's) places are all held through other replicas: wait
      const clean = await c.query('ROLLBACK').then(
        () => true,
        () => false,
      );
      c.release(!clean); // a connection whose rollback failed may still hold its transaction: never reused
      // a place found with too little time left would only run to be cancelled (and charged) at the deadline
      if (deadline - Date.now() <= Math.max(SLOT_RETRY_MS * 2, q.timeoutMs / 4)) {
        const whose = q.trial ? 'free-trial statements (all replicas together)' : "this organization's other statements (through every replica)";
        throw new DemoQueryError('DEMO_ERR_BUSY', `no place on the demo database came free in time for the statement's ${q.timeoutMs} ms deadline: ${whose} hold its share; nothing ran or was charged: retry in a few seconds, or send fewer statements at once`, { retryAfter: 2 });
      }
      await pause(SLOT_RETRY_MS / 2 + Math.random() * SLOT_RETRY_MS, q.signal);
    }
  }

  /** Connect, and load the demo data when the database does not hold this version of it. */
  static async start(url: string, datasets: readonly DatasetDef[], poolSize = 10, info?: DemoEngineOptions['info']): Promise<PostgresDemoEngine> {
    const pool = new pg.Pool({ connectionString: url, max: poolSize, types: pgTypes, application_name: 'svc-demo', connectionTimeoutMillis: 5000, Client: GuardedPgClient });
    // an idle client dropped by the server (restart, idle timeout) must not crash the process
    pool.on('error', () => undefined);
    // so must a checked-out one whose connection drops (or that the wire guard closed): its query fails, not the process
    pool.on('connect', (client) => {
      client.on('error', () => undefined);
    });
    const fingerprint = demoFingerprint(datasets);
    const c = await pool.connect();
    try {
      await c.query('SELECT pg_advisory_lock(7361002)');
      const present = await c.query<{ fingerprint: string }>(
        `SELECT fingerprint FROM svc_meta.demo_version WHERE to_regclass('svc_meta.demo_version') IS NOT NULL`,
      ).catch(() => ({ rows: [] as { fingerprint: string }[] }));
      if (present.rows[0]?.fingerprint !== fingerprint) {
        const started = Date.now();
        info?.('generating the demo datasets into SVC_DEMO_DATABASE_URL (first start, or a new version of them); demo queries wait', { targets: datasets.length });
        await c.query('BEGIN');
        for (const stmt of loadScript(datasets, fingerprint)) await c.query(stmt);
        await c.query('COMMIT');
        info?.('demo datasets loaded into SVC_DEMO_DATABASE_URL; later starts reuse them', { ms: Date.now() - started });
      }
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      await c.query('SELECT pg_advisory_unlock(7361002)').catch(() => undefined);
      c.release();
    }
    return new PostgresDemoEngine(pool, poolSize);
  }

  run(q: DemoQuery): Promise<ReadQueryResult> {
    const onStart = q.onStart;
    const counted: DemoQuery = {
      ...q,
      onStart: () => {
        this.startedCount++;
        onStart?.();
      },
    };
    return admitted(this.gate, counted, (deadline) => this.runOnce(q, deadline));
  }

  private async runOnce(q: DemoQuery, deadline: number): Promise<ReadQueryResult> {
    const c = await this.placed(q, deadline);
    let out: CollectedOutcome;
    try {
      // one round trip (pg-read) in the transaction placed() opened: statement_timeout, the
      // settings (ours, never the agent's text), the statement read through a cursor (EXPLAIN
      // directly) under the caps, ROLLBACK; cancelled at the database (CancelRequest) at the
      // deadline, or at once when the statement is stopped (revoked, expired). A row larger than
      // the bytes left is never decoded (the wire guard closes the connection first)
      out = await readCollected(c, {
        sql: q.sql,
        cursor: q.direct ? undefined : 'svc_cursor',
        begin: null,
        settings: preamble(q),
        timeoutMs: Math.max(1, Math.floor(q.timeoutMs)),
        deadlineMs: Math.max(0, deadline - Date.now()),
        maxRows: q.maxRows,
        maxBytes: q.maxBytes,
        ...(q.signal ? { signal: q.signal } : {}),
      });
    } catch (err) {
      c.release(true);
      throw err;
    }
    c.release(!(await out.settled));
    if (out.ok) return out.result;
    throw demoError(out.failure, q);
  }

  admissions(): GateAdmissions {
    return this.gate.admissions();
  }

  started(): number {
    return this.startedCount;
  }

  stats(): { running: number; waiting: number } {
    return this.gate.stats();
  }

  async close(): Promise<void> {
    this.gate.close();
    await this.pool.end();
  }
}

/** A failed read as the demo engine's error (pg-read's SQLSTATE table, sqlstate.ts). */
function demoError(f: ReadFailure, q: DemoQuery): Error {
  const oversize = oversizeError(f, q.maxBytes);
  if (oversize) return oversize;
  const timeout = (sqlState?: string): DemoQueryError =>
    new DemoQueryError('DEMO_ERR_TIMEOUT', `the statement ran past its ${q.timeoutMs} ms deadline and was cancelled at the database`, { sqlState });
  if (f.kind === 'timeout' || f.kind === 'aborted') return timeout();
  if (f.kind === 'empty') return new DemoQueryError('DEMO_ERR_SQL', 'empty statement');
  const e = classifyPgError(f.kind === 'database' || f.kind === 'consumer' ? f.error : undefined);
  if (e.kind === 'query_canceled') return timeout(e.sqlstate);
  // a database error has a SQLSTATE; a socket error's code (ECONNRESET…) means the source failed
  if (!e.sqlstate) return new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the demo database is unreachable');
  // our own statements (the settings) failed, not the agent's
  if (f.kind === 'database' && f.before) return new DemoQueryError('DEMO_ERR_UNAVAILABLE', `the demo database refused the statement's transaction: ${e.message}`);
  return new DemoQueryError('DEMO_ERR_SQL', e.message, { sqlState: e.sqlstate });
}
