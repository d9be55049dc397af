/**
 * The outbox's claim protocol, shared by every worker of every replica (PostgreSQL or PGlite):
 *
 * - claimDue: fair across organizations. An organization has at most `perOrg` deliveries in
 *   flight (a live lease) across all replicas, and the free slots go round-robin: each
 *   organization's oldest due delivery first, then each one's second, and so on. Claimers of one
 *   organization are serialized by a transaction-scoped advisory lock (a claimer that does not
 *   get it skips that organization this cycle), so the in-flight count it reads is exact; rows
 *   are taken with FOR UPDATE SKIP LOCKED and leased (lease_until, also the claim's token).
 * - holdClaim: the sandbox `slow` chaos profile's hold becomes a scheduled delay: the row is
 *   released (no slot, no lease) and due again when the hold ends, with held_since kept so the
 *   attempt's start and duration include the hold.
 * - recordAttempt / releaseClaims: fenced by the claim's lease. A worker whose lease was taken
 *   over (it outlived it) changes nothing: it cannot overwrite another claim's outcome, pull a
 *   scheduled retry forward, or emit a false delivery.failed.
 */
import { ApiError } from '../errors.js';
import type { Sql, Store } from '../store/index.js';
import { deliveryFailedResource, SCENARIOS } from './events.js';
import { enqueue, type Environment } from './outbox.js';

/** retry delays are multiplied by a uniform factor in [1 - JITTER, 1 + JITTER] */
export const JITTER = 0.1;
/** advisory-lock namespace of per-organization claiming (the migrator uses 7361001) */
const CLAIM_LOCK = 7361002;
/** advisory-lock namespace of the per-organization mock-event count */
const MOCK_LOCK = 7361003;

export function jittered(ms: number, random: () => number = Math.random): number {
  return Math.round(ms * (1 - JITTER + 2 * JITTER * random()));
}

export interface Claim {
  readonly id: string;
  readonly org_id: string;
  readonly connection_id: string | null;
  readonly event: string;
  readonly body: string;
  readonly attempts: number;
  readonly run_attempts: number;
  /** set while the slow chaos profile holds this attempt: when the hold began (the attempt's start) */
  readonly held_since: Date | null;
  /** the lease this claim holds (ISO); every later write is fenced by it */
  readonly lease: string;
}

export interface ClaimOptions {
  /** free slots of this worker */
  readonly limit: number;
  /** deliveries in flight at once per organization, across replicas */
  readonly perOrg: number;
  readonly leaseMs: number;
  readonly now?: Date;
}

export async function claimDue(store: Store, o: ClaimOptions): Promise<Claim[]> {
  if (o.limit <= 0) return [];
  const now = (o.now ?? new Date()).toISOString();
  const lease = new Date(Date.parse(now) + o.leaseMs).toISOString();
  return store.tx(async (sql) => {
    // organizations with something due and room below their cap, oldest due first (a hint: rechecked under the lock)
    const orgs = await sql.query<{ org_id: string }>(
      `WITH due AS (
         SELECT org_id, min(next_attempt_at) AS oldest FROM webhook_deliveries
         WHERE status = 'pending' AND next_attempt_at <= $1 GROUP BY org_id
       ), busy AS (
         SELECT d.org_id, count(*)::int AS n FROM webhook_deliveries d JOIN due USING (org_id)
         WHERE d.lease_until > $1 AND d.status = 'pending' GROUP BY d.org_id
       )
       SELECT due.org_id FROM due LEFT JOIN busy USING (org_id)
       WHERE COALESCE(busy.n, 0) < $2 ORDER BY due.oldest, due.org_id LIMIT $3`,
      [now, o.perOrg, o.limit],
    );
    if (orgs.length === 0) return [];
    const locked = await sql.query<{ org_id: string }>(
      `SELECT org_id FROM unnest($1::text[]) WITH ORDINALITY AS o(org_id, ord)
       WHERE pg_try_advisory_xact_lock(${CLAIM_LOCK}, hashtext(org_id)) ORDER BY ord`,
      [orgs.map((r) => r.org_id)],
    );
    if (locked.length === 0) return [];
    // under the locks: the exact in-flight count, then round-robin over each organization's oldest due rows
    const picked = await sql.query<{ id: string }>(
      `WITH orgs AS (
         SELECT org_id, ord FROM unnest($1::text[]) WITH ORDINALITY AS o(org_id, ord)
       ), busy AS (
         SELECT org_id, count(*)::int AS n FROM webhook_deliveries
         WHERE org_id = ANY($1::text[]) AND lease_until > $2 AND status = 'pending' GROUP BY org_id
       )
       SELECT c.id FROM orgs LEFT JOIN busy USING (org_id)
       CROSS JOIN LATERAL (
         SELECT r.id, row_number() OVER (ORDER BY r.next_attempt_at, r.id) AS rn FROM (
           SELECT id, next_attempt_at FROM webhook_deliveries
           WHERE org_id = orgs.org_id AND status = 'pending' AND next_attempt_at <= $2
           ORDER BY next_attempt_at, id LIMIT GREATEST($3::int - COALESCE(busy.n, 0), 0)
         ) r
       ) c
       ORDER BY c.rn, orgs.ord LIMIT $4`,
      [locked.map((r) => r.org_id), now, o.perOrg, o.limit],
    );
    if (picked.length === 0) return [];
    const rows = await sql.query<{ id: string }>(
      `SELECT id FROM webhook_deliveries WHERE id = ANY($1::text[]) AND status = 'pending' AND next_attempt_at <= $2 FOR UPDATE SKIP LOCKED`,
      [picked.map((r) => r.id), now],
    );
    if (rows.length === 0) return [];
    const claimed = await sql.query<Omit<Claim, 'lease'>>(
      `UPDATE webhook_deliveries SET lease_until = $2, next_attempt_at = $2 WHERE id = ANY($1::text[])
       RETURNING id, org_id, connection_id, event, body, attempts, run_attempts, held_since`,
      [rows.map((r) => r.id), lease],
    );
    return claimed.map((c) => ({ ...c, held_since: c.held_since === null ? null : new Date(c.held_since), lease }));
  });
}

/**
 * The slow chaos hold as a schedule: the claim is given up (the slot and the organization's
 * in-flight count are free at once) and the delivery is due again in `holdMs`. False when the
 * lease was no longer this claim's.
 */
export async function holdClaim(store: Sql, c: Claim, holdMs: number, now = new Date()): Promise<boolean> {
  const rows = await store.query(
    `UPDATE webhook_deliveries SET held_since = $3, next_attempt_at = $4, lease_until = NULL
     WHERE id = $1 AND lease_until = $2 AND status = 'pending' RETURNING id`,
    [c.id, c.lease, now.toISOString(), new Date(now.getTime() + holdMs).toISOString()],
  );
  return rows.length > 0;
}

/**
 * Give back every lease in the store, due at once: at the start of a process that is the store's
 * only user (Store.soleProcess), each was left by a process that ended mid-attempt (a kill, a
 * crash), which would otherwise hold its delivery until the lease ran out. The attempt is made
 * again, with the same delivery id and body. Returns how many.
 */
export async function releaseLeftLeases(store: Sql, now = new Date()): Promise<number> {
  const rows = await store.query(
    `UPDATE webhook_deliveries SET lease_until = NULL, next_attempt_at = LEAST(next_attempt_at, $1)
     WHERE lease_until IS NOT NULL AND status = 'pending' RETURNING id`,
    [now.toISOString()],
  );
  return rows.length;
}

/** Give claims back without an attempt (graceful stop): due at once, only where the lease is still theirs. */
export async function releaseClaims(store: Sql, claims: readonly Claim[], now = new Date()): Promise<number> {
  if (claims.length === 0) return 0;
  const rows = await store.query(
    `UPDATE webhook_deliveries d SET lease_until = NULL, next_attempt_at = $3
     FROM unnest($1::text[], $2::timestamptz[]) AS l(id, lease)
     WHERE d.id = l.id AND d.lease_until IS NOT NULL AND d.lease_until = l.lease AND d.status = 'pending' RETURNING d.id`,
    [claims.map((c) => c.id), claims.map((c) => c.lease), now.toISOString()],
  );
  return rows.length;
}

export interface Outcome {
  ok: boolean;
  statusCode: number | null;
  errorClass: string | null;
  errorMessage: string | null;
  excerpt: string | null;
  retryAfterMs: number | null;
  url: string | null;
  chaos: string | null;
}

export interface AttemptResult {
  readonly started: Date;
  readonly durationMs: number;
  readonly outcome: Outcome;
}

export type Recorded = 'delivered' | 'retry' | 'failed' | 'stale';

class StaleClaim extends Error {}

/**
 * Record an attempt and decide what follows (delivered; a retry after the jittered delay or the
 * Retry-After, whichever is longer; or failed plus delivery.failed), in one transaction fenced by
 * the claim's lease: a claim that lost its lease records nothing ('stale').
 */
export async function recordAttempt(
  store: Store,
  c: Claim,
  r: AttemptResult,
  o: { retryDelaysMs: readonly number[]; now?: Date; jitter?: (ms: number) => number },
): Promise<Recorded> {
  const attemptNo = c.attempts + 1;
  const runNo = c.run_attempts + 1;
  const kind = c.attempts === 0 ? 'initial' : c.run_attempts === 0 ? 'replay' : 'retry';
  const now = o.now ?? new Date();
  const out = r.outcome;
  const delay = o.retryDelaysMs[runNo - 1];
  const result: Exclude<Recorded, 'stale'> = out.ok ? 'delivered' : delay === undefined ? 'failed' : 'retry';
  const next = result === 'retry' ? new Date(now.getTime() + Math.max((o.jitter ?? jittered)(delay ?? 0), out.retryAfterMs ?? 0)).toISOString() : null;
  try {
    return await store.tx(async (sql) => {
      const updated = await sql.query(
        `UPDATE webhook_deliveries SET status = $5, attempts = $2, run_attempts = $3, last_attempt_at = $4,
           completed_at = CASE WHEN $5 = 'pending' THEN NULL ELSE $4::timestamptz END,
           next_attempt_at = $6, lease_until = NULL, held_since = NULL
         WHERE id = $1 AND lease_until = $7 AND status = 'pending' RETURNING id`,
        [c.id, attemptNo, runNo, now.toISOString(), result === 'retry' ? 'pending' : result, next, c.lease],
      );
      if (updated.length === 0) throw new StaleClaim();
      await sql.query(
        `INSERT INTO webhook_attempts (delivery_id, attempt, kind, started_at, duration_ms, url, status_code, error_class, error_message, response_excerpt, chaos, retry_after_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
        [c.id, attemptNo, kind, r.started.toISOString(), r.durationMs, out.url, out.statusCode, out.errorClass, out.errorMessage, out.excerpt, out.chaos, out.retryAfterMs],
      );
      if (result === 'failed') await failedEvent(sql, c, attemptNo, out);
      return result;
    });
  } catch (err) {
    if (err instanceof StaleClaim) return 'stale';
    throw err;
  }
}

/** delivery.failed, in the transaction that fails the delivery (never about a delivery.* event: no loops). */
async function failedEvent(sql: Sql, c: Claim, attempts: number, o: Outcome): Promise<void> {
  if (c.event.startsWith('delivery.')) return;
  let environment: Environment = 'sandbox';
  try {
    environment = (JSON.parse(c.body) as { environment?: Environment }).environment ?? 'sandbox';
  } catch {
    // the stored body is ours and always JSON
  }
  const lastError = `${o.errorClass ?? 'error'}: ${o.errorMessage ?? ''}`;
  await enqueue(sql, {
    orgId: c.org_id,
    connectionId: c.connection_id,
    event: 'delivery.failed',
    environment,
    resource: deliveryFailedResource({ deliveryId: c.id, event: c.event, attempts, lastError }),
    data: { delivery_id: c.id, failed_event: c.event, attempts, last_error_class: o.errorClass, last_status_code: o.statusCode },
  });
}

const MOCK_EVENTS = [...new Set(SCENARIOS.map((s) => s.event))];

/**
 * A replay's admission (outbox.ts replayDelivery): a mock event that is not pending becomes
 * pending again, so it counts against the sandbox bound as a new trigger does; a real event, or
 * one already pending, is not bounded here.
 */
export function mockReplayAdmission(orgId: string, max: number): (sql: Sql, delivery: { readonly event: string; readonly status: string }) => Promise<void> {
  return async (sql, d) => {
    if (d.status !== 'pending' && MOCK_EVENTS.includes(d.event)) await assertMockRoom(sql, orgId, max);
  };
}

/**
 * The sandbox bound: an organization may have at most `max` mock-event deliveries pending. Past
 * it, 429 rate_limited with Retry-After (when its soonest pending one is due, 1 to 60 s).
 */
export async function assertMockRoom(sql: Sql, orgId: string, max: number, now = new Date()): Promise<void> {
  // triggers of one organization count one at a time (until the caller's transaction ends), so the limit is exact
  await sql.query(`SELECT pg_advisory_xact_lock(${MOCK_LOCK}, hashtext($1))`, [orgId]);
  const [row] = await sql.query<{ n: number; soonest: Date | null }>(
    `SELECT count(*)::int AS n, min(next_attempt_at) AS soonest FROM (
       SELECT next_attempt_at FROM webhook_deliveries WHERE org_id = $1 AND status = 'pending' AND event = ANY($2::text[]) ORDER BY next_attempt_at LIMIT $3
     ) p`,
    [orgId, MOCK_EVENTS, max],
  );
  if (!row || row.n < max) return;
  const wait = Math.min(60, Math.max(1, Math.ceil(((row.soonest ? new Date(row.soonest).getTime() : now.getTime()) - now.getTime()) / 1000)));
  throw new ApiError(
    'rate_limited',
    `this organization has ${max} mock-event deliveries pending (the sandbox limit); wait for them to be delivered or fail, then retry after ${wait} s`,
    { reason: 'mock_events_pending', pending_limit: max, retry_after_seconds: wait },
    { 'Retry-After': String(wait) },
  );
}
