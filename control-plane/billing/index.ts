/**
 * Metering and billing (docs/billing.md). Money is kept in exact integer
 * nanocents (1 cent = 10^9 nc): a query costs 0.5 cents = 5·10^8 nc and each byte of egress
 * 8 nc (8 cents per 10^9 bytes). A query is admitted by reserving its price atomically from the
 * trial or from the wallet (one UPDATE with its condition in the WHERE clause), so concurrent
 * queries can never spend the same allowance twice; it is settled or refunded afterwards.
 */
import { randomId } from '../ids.js';
import { ApiError } from '../errors.js';
import type { Sql, Store } from '../store/index.js';

export const NC_PER_CENT = 1_000_000_000;
export const QUERY_PRICE_NC = 500_000_000;
export const EGRESS_NC_PER_BYTE = 8;
export const GB = 1_000_000_000;

export const TRIAL = {
  queries: 100,
  egressBytes: 5_000_000,
  days: 7,
  creditNc: 100 * NC_PER_CENT,
} as const;

export const TOPUP_MIN_CENTS = 100;
export const TOPUP_MAX_CENTS = 1_000_000;

/** The most a wallet may hold: $50,000 (keeps every balance exact in a JavaScript number). */
export const WALLET_MAX_CENTS = 5_000_000;

/** Cents from nanocents; lifetime totals past 2^53 nc arrive as bigint or text and stay exact to the nanocent. */
export function centsFromNc(nc: number | bigint | string): number {
  if (typeof nc === 'number') return nc / NC_PER_CENT;
  const b = BigInt(nc);
  const per = BigInt(NC_PER_CENT);
  return Number(b / per) + Number(b % per) / NC_PER_CENT;
}

export function queryCostNc(bytes: number): number {
  return QUERY_PRICE_NC + bytes * EGRESS_NC_PER_BYTE;
}

export type Payer = 'trial' | 'wallet';

/** What was reserved for one query; settle or refund it exactly once. */
export interface Reservation {
  readonly id: string;
  readonly orgId: string;
  readonly payer: Payer;
  readonly heldNc: number;
  /** trial only: bytes of the trial's egress allowance held for this query (its answer is capped to them) */
  readonly egressHeld: number;
  /** the most bytes of rows this query may return: the response cap, or less on the trial */
  readonly maxBytes: number;
  /**
   * the organization has funded its wallet (now or before): a paying customer, whatever pays this
   * query. Free organizations share the demo engines' free slice (demo/gate.ts).
   */
  readonly paying: boolean;
}

/** The most a trial query may hold beside other running trial queries of its organization. */
export const TRIAL_EGRESS_SHARE = Math.floor(TRIAL.egressBytes / 16);

/** In-process wake-ups for trial queries waiting for other queries' egress holds to be released. */
const trialWaiters = new Map<string, Set<() => void>>();

/** @internal organizations with trial queries waiting in this process (tests: none is kept once they stop waiting) */
export function trialWaitingOrgs(): number {
  return trialWaiters.size;
}

/**
 * Organizations whose trial reservations are asking the store now: how many ask, and their trial
 * holds released in this process meanwhile. A reservation that the store answered 'held' asks
 * again at once if one of its organization's holds was released while it asked, instead of
 * waiting for a wake-up that came before it waited (up to a second). Per organization: a count of
 * every organization's releases sent a waiting reservation back to the store in a loop under other
 * organizations' trial traffic. An entry goes when its last reservation has its answer.
 */
const trialAsking = new Map<string, { askers: number; releases: number }>();

function trialReleased(orgId: string): void {
  const asking = trialAsking.get(orgId);
  if (asking) asking.releases++;
  const waiting = trialWaiters.get(orgId);
  if (!waiting) return;
  trialWaiters.delete(orgId);
  for (const wake of waiting) wake();
}

/** Resolves when a trial hold of `orgId` is released here, or after `ms` (a release on another replica). */
function trialRelease(orgId: string, ms: number): Promise<void> {
  return new Promise((resolve) => {
    let waiting = trialWaiters.get(orgId);
    if (!waiting) trialWaiters.set(orgId, (waiting = new Set()));
    const set = waiting;
    const wake = (): void => {
      clearTimeout(timer);
      set.delete(wake);
      // the last waiter gone by its timer (released on another replica): the organization's entry goes too
      if (set.size === 0 && trialWaiters.get(orgId) === set) trialWaiters.delete(orgId);
      resolve();
    };
    const timer = setTimeout(wake, ms);
    set.add(wake);
  });
}

export function billingConfig(maxResultBytes: number): Record<string, unknown> {
  return {
    currency: 'USD',
    price_per_query_cents: QUERY_PRICE_NC / NC_PER_CENT,
    price_per_gb_egress_cents: (EGRESS_NC_PER_BYTE * GB) / NC_PER_CENT,
    gb_bytes: GB,
    trial: {
      queries: TRIAL.queries,
      egress_bytes: TRIAL.egressBytes,
      duration_days: TRIAL.days,
      credit_cents: TRIAL.creditNc / NC_PER_CENT,
      card_required: false,
    },
    wallet: {
      topup_min_cents: TOPUP_MIN_CENTS,
      topup_max_cents: TOPUP_MAX_CENTS,
      balance_max_cents: WALLET_MAX_CENTS,
      auto_reload: 'optional: when the balance falls below threshold_cents, amount_cents is added',
      hold_per_query_cents: queryCostNc(maxResultBytes) / NC_PER_CENT,
    },
    billing_order: 'the trial pays while it has queries, egress, days and credit left; then the wallet',
  };
}

async function ledger(sql: Sql, orgId: string, kind: string, amountNc: number, balanceAfterNc: number, note: string | null): Promise<void> {
  await sql.query('INSERT INTO ledger (org_id, kind, amount_nc, balance_after_nc, created_at, note) VALUES ($1, $2, $3, $4, $5, $6)', [
    orgId,
    kind,
    amountNc,
    balanceAfterNc,
    new Date().toISOString(),
    note,
  ]);
}

/** Credit the wallet; returns the new balance, or undefined when it would pass WALLET_MAX_CENTS. */
export async function credit(sql: Sql, orgId: string, amountNc: number, kind: 'topup' | 'auto_reload'): Promise<number | undefined> {
  const rows = await sql.query<{ wallet_nc: number }>('UPDATE orgs SET wallet_nc = wallet_nc + $2 WHERE id = $1 AND wallet_nc + wallet_held_nc + $2 <= $3 RETURNING wallet_nc', [
    orgId,
    amountNc,
    WALLET_MAX_CENTS * NC_PER_CENT,
  ]);
  const balance = rows[0]?.wallet_nc;
  if (balance === undefined) return undefined;
  await ledger(sql, orgId, kind, amountNc, balance, null);
  return balance;
}

/**
 * Reserve the price of one query: from the trial when it has allowance left, else a hold on the
 * wallet large enough for the largest response. Throws 402 when neither can pay. The reservation
 * is recorded (table `reservations`) in the same statement, so a crash between reserve and
 * settle is undone by `sweepReservations` instead of leaking held money. One statement
 * (`svc_reserve`, control-plane/store/functions.ts) under the organization's row lock.
 *
 * The trial pays while it has queries, days, credit and egress left. Its egress is held up front
 * like money: a trial query holds what it may return (alone, the response cap; beside other
 * running trial queries, at most TRIAL_EGRESS_SHARE) and its answer is capped to that, with used
 * + held never past the allowance plus one response cap, so trial-billed egress passes the
 * allowance by at most one response cap at any concurrency (queries reserved before it was used
 * up may all end past it). When nothing is left to hold, this query
 * waits for a running one to settle (up to `waitMs`), then tries the wallet.
 */
/** What `reserve` found revoked (read fresh, before anything is held): nothing was reserved. */
export class ReserveRefused extends Error {
  readonly code = 'BILLING_ERR_REVOKED';
  constructor(readonly what: 'connection' | 'key') {
    super(`the ${what} was revoked`);
    this.name = 'ReserveRefused';
  }
}

export interface ReserveOptions {
  /** how long to wait for the trial's egress holds of running queries to be released */
  readonly waitMs?: number;
  /** refuse (`ReserveRefused`) when this connection is revoked or not the organization's */
  readonly connectionId?: string;
  /** refuse (`ReserveRefused`) when this agent key is revoked */
  readonly keyId?: string | undefined;
}

/** svc_reserve's answer */
interface ReserveAnswer {
  readonly o_outcome: string;
  readonly o_grant: number | bigint | null;
  readonly o_paying: boolean | null;
  readonly o_wallet: number | bigint | null;
}

export async function reserve(store: Store, orgId: string, maxResultBytes: number, opts: ReserveOptions = {}): Promise<Reservation> {
  const id = newReservationId();
  const hold = queryCostNc(maxResultBytes);
  const waitUntil = Date.now() + (opts.waitMs ?? 0);
  for (;;) {
    const mayWait = Date.now() < waitUntil;
    let asking = trialAsking.get(orgId);
    if (!asking) trialAsking.set(orgId, (asking = { askers: 0, releases: 0 }));
    asking.askers++;
    const releasesBefore = asking.releases;
    let r: ReserveAnswer | undefined;
    let releasedMeanwhile: boolean;
    try {
      [r] = await store.query<ReserveAnswer>(
        // the store's clock, not this replica's: the hold's time is what a sweep on any replica
        // measures its age by (sweepReservations), and replicas' clocks may differ
        'SELECT o_outcome, o_grant, o_paying, o_wallet FROM svc_reserve($1, $2, now(), $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)',
        [
          id,
          orgId,
          maxResultBytes,
          mayWait,
          TRIAL.queries,
          TRIAL.egressBytes,
          TRIAL.creditNc,
          QUERY_PRICE_NC,
          TRIAL_EGRESS_SHARE,
          hold,
          WALLET_MAX_CENTS * NC_PER_CENT,
          opts.connectionId ?? null,
          opts.keyId ?? null,
        ],
        { prepared: true },
      );
    } finally {
      releasedMeanwhile = asking.releases !== releasesBefore;
      if (--asking.askers === 0) trialAsking.delete(orgId);
    }
    switch (r?.o_outcome) {
      case 'trial': {
        const grant = Number(r.o_grant);
        return { id, orgId, payer: 'trial', heldNc: QUERY_PRICE_NC, egressHeld: grant, maxBytes: grant, paying: r.o_paying === true };
      }
      case 'wallet':
        return { id, orgId, payer: 'wallet', heldNc: hold, egressHeld: 0, maxBytes: maxResultBytes, paying: true };
      case 'connection_revoked':
        throw new ReserveRefused('connection');
      case 'key_revoked':
        throw new ReserveRefused('key');
      case 'held':
        // (a hold released while the store answered: its wake-up came before this waited)
        if (!releasedMeanwhile) await trialRelease(orgId, Math.min(1000, Math.max(1, waitUntil - Date.now())));
        continue;
      case 'trial_held':
        throw new ApiError(
          'rate_limited',
          `this organization's running trial queries hold what is left of its trial egress allowance (${TRIAL.egressBytes} bytes), and none finished before this statement's deadline; the statement was not run and nothing was charged: retry when they finish, or top up to run queries side by side from the wallet`,
          { reason: 'trial_egress_held', retry_after_seconds: 1 },
          { 'Retry-After': '1' },
        );
      case 'payment_required': {
        const balance = centsFromNc(r.o_wallet ?? 0);
        throw new ApiError(
          'payment_required',
          `The trial allowance is used up and the wallet (${balance} cents) cannot cover a query (up to ${centsFromNc(hold)} cents is held while it runs). Top up with POST /v1/agent/topup {"amount_cents": ${TOPUP_MIN_CENTS}} or more, optionally with auto_reload.`,
          { wallet_balance_cents: balance, required_cents: centsFromNc(hold), topup: 'POST /v1/agent/topup' },
        );
      }
      default:
        throw new ApiError('not_found', 'organization not found');
    }
  }
}

function newReservationId(): string {
  return randomId('rsv');
}

/** How a query's reservation ends: charged for its egress, given back, or left alone (already swept). */
export type SettleMode = 'settle' | 'refund' | 'none';

export interface SettleQuery {
  readonly mode: SettleMode;
  readonly reservation: Reservation;
  /** egress charged (mode 'settle') */
  readonly bytes: number;
  readonly connectionId: string;
  /** check under the connection's row lock that it may still be answered (see `SettleOutcome`) */
  readonly check: { readonly keyId: string | undefined; readonly relayId: string | undefined } | undefined;
  /** count the query and its egress on the connection */
  readonly count: boolean;
  /** the audit event: its id and canonical JSON cut around prev_hash and seq (audit.PendingEvent) */
  readonly event: { readonly id: string; readonly parts: readonly [string, string, string, string] };
}

/**
 * 'ok' (settled, `seq/prev/hash` of the event appended); 'swept' (the reservation was given back
 * already: nothing was written, settle again with mode 'none' and no charge); or why the
 * connection can no longer be answered ('revoked', 'expired', 'key_revoked', 'relay_deleted':
 * nothing was written).
 */
export type SettleOutcome =
  | { readonly outcome: 'ok'; readonly row: { readonly o_seq: number; readonly o_prev: string; readonly o_hash: string; readonly o_at: string } }
  | { readonly outcome: 'swept' | 'revoked' | 'expired' | 'key_revoked' | 'relay_deleted' };

/**
 * End one query in one statement (`svc_settle`): its reservation settled for `bytes` (list cost
 * `queryCostNc(bytes)`), refunded or left, the connection counted, and its audit event appended,
 * under the connection's row lock and then the organization's.
 */
export async function settleQuery(sql: Sql, q: SettleQuery): Promise<SettleOutcome> {
  const r = q.reservation;
  // counted on the connection whatever the mode; charged only when settled
  const bytes = q.bytes;
  const [row] = await sql.query<{ o_outcome: string; o_seq: number; o_prev: string; o_hash: string; o_at: string }>(
    'SELECT o_outcome, o_seq, o_prev, o_hash, o_at FROM svc_settle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)',
    [
      q.mode,
      r.id,
      r.orgId,
      r.payer,
      r.heldNc,
      r.egressHeld,
      bytes,
      queryCostNc(q.mode === 'settle' ? bytes : 0),
      q.mode === 'settle' ? bytes * EGRESS_NC_PER_BYTE : 0,
      q.connectionId,
      q.check?.keyId ?? null,
      q.check?.relayId ?? null,
      q.check !== undefined,
      q.count,
      new Date().toISOString(),
      WALLET_MAX_CENTS * NC_PER_CENT,
      q.event.id,
      ...q.event.parts,
    ],
    { prepared: true },
  );
  if (!row) throw new Error('svc_settle answered no row');
  if (row.o_outcome === 'ok') {
    // a trial hold settled or given back: trial queries of this organization waiting here may go on
    if (q.mode !== 'none' && r.payer === 'trial') trialReleased(r.orgId);
    return { outcome: 'ok', row };
  }
  if (row.o_outcome === 'swept' || row.o_outcome === 'revoked' || row.o_outcome === 'expired' || row.o_outcome === 'key_revoked' || row.o_outcome === 'relay_deleted') return { outcome: row.o_outcome };
  throw new Error(`svc_settle answered ${row.o_outcome}`);
}

/**
 * Append an audit event that moves no money (a schema listing) only while its connection may
 * still be answered: `svc_settle` with nothing to settle, checking under the connection's row
 * lock that it is not revoked or expired, its key not revoked and its relay not deleted.
 */
export function appendIfAnswerable(sql: Sql, q: { readonly orgId: string; readonly connectionId: string; readonly check: NonNullable<SettleQuery['check']>; readonly event: SettleQuery['event'] }): Promise<SettleOutcome> {
  const nothing: Reservation = { id: '', orgId: q.orgId, payer: 'wallet', heldNc: 0, egressHeld: 0, maxBytes: 0, paying: false };
  return settleQuery(sql, { mode: 'none', reservation: nothing, bytes: 0, connectionId: q.connectionId, check: q.check, count: false, event: q.event });
}

async function giveBack(sql: Sql, orgId: string, payer: Payer, heldNc: number, egressHeld: number): Promise<void> {
  if (payer === 'trial') {
    await sql.query('UPDATE orgs SET trial_queries_used = trial_queries_used - 1, trial_spent_nc = trial_spent_nc - $2, trial_egress_held = trial_egress_held - $3 WHERE id = $1', [
      orgId,
      heldNc,
      egressHeld,
    ]);
    trialReleased(orgId);
  } else {
    await sql.query('UPDATE orgs SET wallet_held_nc = wallet_held_nc - $2, wallet_nc = wallet_nc + $2 WHERE id = $1', [orgId, heldNc]);
  }
}

/**
 * Give back every reservation older than `olderThanMs`: what a crash or a kill between reserve
 * and settle left held. Run at start and periodically; returns how many were swept.
 */
export async function sweepReservations(store: Store, olderThanMs: number): Promise<number> {
  return store.tx(async (sql) => {
    // by the store's clock, which stamped the holds (reserve): a replica whose clock is ahead would
    // otherwise take holds of queries still running elsewhere for stale, and answer them free
    const stale = await sql.query<{ org_id: string; payer: Payer; held_nc: number; egress_held: number }>(
      "DELETE FROM reservations WHERE created_at < now() - $1 * interval '1 millisecond' RETURNING org_id, payer, held_nc, egress_held",
      [olderThanMs],
    );
    for (const r of stale) await giveBack(sql, r.org_id, r.payer, Number(r.held_nc), Number(r.egress_held));
    return stale.length;
  });
}

export interface AutoReload {
  readonly threshold_cents: number;
  readonly amount_cents: number;
}

/** What POST /v1/agent/topup answers (and, under an idempotency key, answers again). */
export interface TopupAnswer {
  readonly credited_cents: number;
  readonly wallet_balance_cents: number;
  readonly auto_reload: AutoReload | null;
}

/** How long a top-up's idempotency key is remembered: a request sent again later is a new top-up. */
export const TOPUP_IDEMPOTENCY_HOURS = 24;

/**
 * An idempotency key: 1-255 printable ASCII characters, no space at either end. HTTP strips a
 * header value's outer spaces and the hosted MCP server's in-process calls do not, so a padded key
 * would be one key there and another through svc or the API (a retry credited again).
 */
export const IDEMPOTENCY_KEY_PATTERN = '^[\\x21-\\x7E](?:[\\x20-\\x7E]*[\\x21-\\x7E])?$';

/**
 * Forget every top-up idempotency key older than {@link TOPUP_IDEMPOTENCY_HOURS}, by the store's
 * clock (which stamped them): topup forgets an organization's own when it sends another keyed
 * top-up; this, run periodically, those of organizations that do not. Returns how many went.
 */
export async function sweepTopupKeys(store: Store): Promise<number> {
  const [gone] = await store.query<{ n: number }>('WITH gone AS (DELETE FROM topup_requests WHERE created_at < now() - make_interval(hours => $1) RETURNING 1) SELECT count(*)::int AS n FROM gone', [
    TOPUP_IDEMPOTENCY_HOURS,
  ]);
  return gone?.n ?? 0;
}

/**
 * Credits the wallet and/or sets auto-reload, in one transaction. With `idempotency` (the
 * request's Idempotency-Key and a digest of its body), a top-up the organization already made with
 * that key in the last {@link TOPUP_IDEMPOTENCY_HOURS} hours is not made again: its answer is
 * given back (`replayed`), or `409 conflict` when that key came with another body. Two requests
 * with one key at once: the second waits on the first's row (its primary key), then replays it.
 */
export async function topup(
  store: Store,
  orgId: string,
  amountCents: number,
  autoReload: AutoReload | null | undefined,
  idempotency?: { readonly key: string; readonly requestHash: string },
): Promise<{ readonly answer: TopupAnswer; readonly replayed: boolean }> {
  return store.tx(async (sql) => {
    if (idempotency) {
      await sql.query(`DELETE FROM topup_requests WHERE org_id = $1 AND created_at < now() - make_interval(hours => $2)`, [orgId, TOPUP_IDEMPOTENCY_HOURS]);
      const claimed = await sql.query(
        "INSERT INTO topup_requests (org_id, idempotency_key, request_hash, response) VALUES ($1, $2, $3, '') ON CONFLICT (org_id, idempotency_key) DO NOTHING RETURNING 1",
        [orgId, idempotency.key, idempotency.requestHash],
      );
      if (claimed.length === 0) {
        const [seen] = await sql.query<{ request_hash: string; response: string }>('SELECT request_hash, response FROM topup_requests WHERE org_id = $1 AND idempotency_key = $2', [orgId, idempotency.key]);
        if (!seen || seen.request_hash !== idempotency.requestHash) {
          throw new ApiError('conflict', `Idempotency-Key ${JSON.stringify(idempotency.key)} was used for another top-up request in the last ${TOPUP_IDEMPOTENCY_HOURS} hours; use a new key for a new top-up`, {
            field: 'Idempotency-Key',
            reason: 'idempotency_key_reused',
          });
        }
        return { answer: JSON.parse(seen.response) as TopupAnswer, replayed: true };
      }
    }
    if (autoReload === null) {
      await sql.query('UPDATE orgs SET auto_reload_threshold_nc = NULL, auto_reload_amount_nc = NULL WHERE id = $1', [orgId]);
    } else if (autoReload !== undefined) {
      await sql.query('UPDATE orgs SET auto_reload_threshold_nc = $2, auto_reload_amount_nc = $3 WHERE id = $1', [
        orgId,
        autoReload.threshold_cents * NC_PER_CENT,
        autoReload.amount_cents * NC_PER_CENT,
      ]);
    }
    if (amountCents !== 0) {
      const credited = await credit(sql, orgId, amountCents * NC_PER_CENT, 'topup');
      if (credited === undefined) {
        throw new ApiError('invalid_request', `a wallet holds at most ${WALLET_MAX_CENTS} cents; top up less (see GET /v1/agent/account/usage for the balance)`, {
          field: 'amount_cents',
          wallet_max_cents: WALLET_MAX_CENTS,
        });
      }
    }
    const [o] = await sql.query<{ wallet_nc: number; auto_reload_threshold_nc: number | null; auto_reload_amount_nc: number | null }>(
      'SELECT wallet_nc, auto_reload_threshold_nc, auto_reload_amount_nc FROM orgs WHERE id = $1',
      [orgId],
    );
    const answer: TopupAnswer = {
      credited_cents: amountCents,
      wallet_balance_cents: centsFromNc(o?.wallet_nc ?? 0),
      auto_reload:
        o?.auto_reload_threshold_nc == null || o.auto_reload_amount_nc == null ? null : { threshold_cents: centsFromNc(o.auto_reload_threshold_nc), amount_cents: centsFromNc(o.auto_reload_amount_nc) },
    };
    if (idempotency) await sql.query('UPDATE topup_requests SET response = $3 WHERE org_id = $1 AND idempotency_key = $2', [orgId, idempotency.key, JSON.stringify(answer)]);
    return { answer, replayed: false };
  });
}

export interface UsageRow {
  queries_total: number;
  egress_total: number | bigint | string;
  list_spend_nc: number | bigint | string;
  wallet_spend_nc: number | bigint | string;
  wallet_nc: number;
  wallet_held_nc: number;
  trial_queries_used: number;
  trial_egress_used: number;
  trial_egress_held: number | bigint | string;
  trial_spent_nc: number;
  trial_expires_at: Date;
  auto_reload_threshold_nc: number | null;
  auto_reload_amount_nc: number | null;
}

export async function usage(store: Store, orgId: string): Promise<Record<string, unknown>> {
  const [u] = await store.query<UsageRow>('SELECT * FROM orgs WHERE id = $1', [orgId]);
  if (!u) throw new ApiError('not_found', 'organization not found');
  const expires = new Date(u.trial_expires_at);
  const queriesLeft = Math.max(0, TRIAL.queries - u.trial_queries_used);
  const egressLeft = Math.max(0, TRIAL.egressBytes - u.trial_egress_used);
  const creditLeft = Math.max(0, TRIAL.creditNc - u.trial_spent_nc);
  const active = queriesLeft > 0 && egressLeft > 0 && creditLeft >= QUERY_PRICE_NC && expires.getTime() > Date.now();
  return {
    queries: u.queries_total,
    egress_bytes: typeof u.egress_total === 'number' ? u.egress_total : Number(u.egress_total),
    spend_cents: centsFromNc(u.list_spend_nc),
    wallet_spend_cents: centsFromNc(u.wallet_spend_nc),
    wallet_balance_cents: centsFromNc(u.wallet_nc),
    wallet_held_cents: centsFromNc(u.wallet_held_nc),
    trial: {
      active,
      queries_left: queriesLeft,
      egress_bytes_left: egressLeft,
      // held by trial queries running now (each holds what it may return, settled to what it did)
      egress_bytes_held: Number(u.trial_egress_held),
      credit_left_cents: centsFromNc(creditLeft),
      expires_at: expires.toISOString(),
    },
    auto_reload:
      u.auto_reload_threshold_nc === null || u.auto_reload_amount_nc === null
        ? null
        : { threshold_cents: centsFromNc(u.auto_reload_threshold_nc), amount_cents: centsFromNc(u.auto_reload_amount_nc) },
  };
}
