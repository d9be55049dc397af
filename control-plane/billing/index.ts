/**
 * Metering and billing (CONTRACT.md "Accounts, keys, billing"). Money is kept in exact integer
 * nanocents (1 cent = 10^9 nc): a query costs 0.5 cents = 5·10^8 nc and each byte of egress
 * 8 nc (8 cents per 10^9 bytes). A query is admitted by reserving its price atomically from the
 * trial or from the wallet (one UPDATE with its condition in the WHERE clause), so concurrent
 * queries can never spend the same allowance twice; it is settled or refunded afterwards.
 */
import { randomBytes } from 'node:crypto';
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

function trialReleased(orgId: string): void {
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

interface OrgMoney {
  wallet_nc: number;
  auto_reload_threshold_nc: number | null;
  auto_reload_amount_nc: number | null;
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

/** Auto-reload when the balance is under the threshold (in the caller's transaction). */
async function maybeAutoReload(sql: Sql, orgId: string): Promise<boolean> {
  const rows = await sql.query<OrgMoney>('SELECT wallet_nc, auto_reload_threshold_nc, auto_reload_amount_nc FROM orgs WHERE id = $1 FOR UPDATE', [orgId]);
  const o = rows[0];
  if (!o || o.auto_reload_threshold_nc === null || o.auto_reload_amount_nc === null) return false;
  if (o.wallet_nc >= o.auto_reload_threshold_nc) return false;
  return (await credit(sql, orgId, o.auto_reload_amount_nc, 'auto_reload')) !== undefined;
}

/**
 * Reserve the price of one query: from the trial when it has allowance left, else a hold on the
 * wallet large enough for the largest response. Throws 402 when neither can pay. The reservation
 * is recorded (table `reservations`) in the same transaction, so a crash between reserve and
 * settle is undone by `sweepReservations` instead of leaking held money.
 */
export async function reserve(store: Store, orgId: string, maxResultBytes: number, opts: { waitMs?: number } = {}): Promise<Reservation> {
  const id = newReservationId();
  const record = (sql: Sql, payer: Payer, held: number, egress: number) =>
    sql.query('INSERT INTO reservations (id, org_id, payer, held_nc, created_at, egress_held) VALUES ($1, $2, $3, $4, $5, $6)', [id, orgId, payer, held, new Date().toISOString(), egress]);

  // The trial pays while it has queries, days, credit and egress left. Its egress is held up front
  // like money: a trial query holds what it may return (alone, the response cap; beside other
  // running trial queries, at most TRIAL_EGRESS_SHARE) and its answer is capped to that, with
  // used + held never past the allowance plus one response cap, so trial-billed egress passes
  // the allowance by at most one answer at any concurrency. When nothing is left to hold, this
  // query waits for a running one to settle (up to `waitMs`).
  const waitUntil = Date.now() + (opts.waitMs ?? 0);
  let trialHeld = false;
  for (;;) {
    const trial = await store.tx(async (sql): Promise<{ grant: number; paying: boolean } | 'held' | undefined> => {
      const [o] = await sql.query<{ q: number; used: number | bigint; held: number | bigint; expires: Date | string; spent: number | bigint; paying: boolean }>(
        `SELECT trial_queries_used AS q, trial_egress_used AS used, trial_egress_held AS held, trial_expires_at AS expires, trial_spent_nc AS spent,
                wallet_nc + wallet_held_nc + wallet_spend_nc > 0 AS paying
           FROM orgs WHERE id = $1 FOR UPDATE`,
        [orgId],
      );
      if (!o) return undefined;
      const used = Number(o.used);
      const held = Number(o.held);
      const open = o.q < TRIAL.queries && used < TRIAL.egressBytes && new Date(o.expires).getTime() > Date.now() && Number(o.spent) + QUERY_PRICE_NC <= TRIAL.creditNc;
      if (!open) return undefined;
      // what is held and used together never passes the allowance plus one answer; alone, a
      // query may return a whole answer (the one that crosses the allowance ends the trial);
      // beside running ones, at most a sixteenth of the allowance, so small queries run side by side
      const free = TRIAL.egressBytes + maxResultBytes - used - held;
      if (free <= 0) return 'held';
      const grant = held === 0 ? Math.min(maxResultBytes, free) : Math.min(maxResultBytes, free, TRIAL_EGRESS_SHARE);
      await sql.query(
        'UPDATE orgs SET trial_queries_used = trial_queries_used + 1, trial_spent_nc = trial_spent_nc + $2, trial_egress_held = trial_egress_held + $3 WHERE id = $1',
        [orgId, QUERY_PRICE_NC, grant],
      );
      await record(sql, 'trial', QUERY_PRICE_NC, grant);
      return { grant, paying: o.paying === true };
    });
    if (typeof trial === 'object') return { id, orgId, payer: 'trial', heldNc: QUERY_PRICE_NC, egressHeld: trial.grant, maxBytes: trial.grant, paying: trial.paying };
    trialHeld = trial === 'held';
    if (trial !== 'held' || Date.now() >= waitUntil) break;
    await trialRelease(orgId, Math.min(1000, Math.max(1, waitUntil - Date.now())));
  }

  const hold = queryCostNc(maxResultBytes);
  for (let attempt = 0; attempt < 2; attempt++) {
    const held = await store.tx(async (sql) => {
      const rows = await sql.query(
        'UPDATE orgs SET wallet_nc = wallet_nc - $2, wallet_held_nc = wallet_held_nc + $2 WHERE id = $1 AND wallet_nc >= $2 RETURNING id',
        [orgId, hold],
      );
      if (rows.length === 1) await record(sql, 'wallet', hold, 0);
      return rows.length === 1;
    });
    if (held) return { id, orgId, payer: 'wallet', heldNc: hold, egressHeld: 0, maxBytes: maxResultBytes, paying: true };
    if (attempt === 0 && !(await store.tx((sql) => maybeAutoReload(sql, orgId)))) break;
  }
  if (trialHeld) {
    throw new ApiError(
      'rate_limited',
      `this organization's running trial queries hold what is left of its trial egress allowance (${TRIAL.egressBytes} bytes), and none finished before this statement's deadline; the statement was not run and nothing was charged: retry when they finish, or top up to run queries side by side from the wallet`,
      { reason: 'trial_egress_held', retry_after_seconds: 1 },
      { 'Retry-After': '1' },
    );
  }
  const [o] = await store.query<{ wallet_nc: number }>('SELECT wallet_nc FROM orgs WHERE id = $1', [orgId]);
  throw new ApiError(
    'payment_required',
    `The trial allowance is used up and the wallet (${centsFromNc(o?.wallet_nc ?? 0)} cents) cannot cover a query (up to ${centsFromNc(hold)} cents is held while it runs). Top up with POST /v1/agent/topup {"amount_cents": ${TOPUP_MIN_CENTS}} or more, optionally with auto_reload.`,
    { wallet_balance_cents: centsFromNc(o?.wallet_nc ?? 0), required_cents: centsFromNc(hold), topup: 'POST /v1/agent/topup' },
  );
}

function newReservationId(): string {
  return `rsv_${randomBytes(12).toString('base64url')}`;
}

/** Remove the reservation record; false when it is gone already (swept), so its money moves once. */
async function claim(sql: Sql, r: Reservation): Promise<boolean> {
  return (await sql.query('DELETE FROM reservations WHERE id = $1 RETURNING id', [r.id])).length === 1;
}

/**
 * Charge the query for `bytes` of egress (in the caller's transaction); returns its list cost in
 * nc. A timed-out statement is charged the query price with no egress.
 */
export async function settle(sql: Sql, r: Reservation, bytes: number): Promise<number> {
  const cost = queryCostNc(bytes);
  if (!(await claim(sql, r))) return 0; // already swept back: nothing is charged twice or from nothing
  if (r.payer === 'trial') {
    await sql.query(
      `UPDATE orgs SET trial_egress_used = trial_egress_used + $2, trial_spent_nc = trial_spent_nc + $3, trial_egress_held = trial_egress_held - $5,
         queries_total = queries_total + 1, egress_total = egress_total + $2, list_spend_nc = list_spend_nc + $4 WHERE id = $1`,
      [r.orgId, bytes, bytes * EGRESS_NC_PER_BYTE, cost, r.egressHeld],
    );
    trialReleased(r.orgId);
    return cost;
  }
  const rows = await sql.query<{ wallet_nc: number }>(
    `UPDATE orgs SET wallet_held_nc = wallet_held_nc - $2, wallet_nc = wallet_nc + $2 - $3, wallet_spend_nc = wallet_spend_nc + $3,
       queries_total = queries_total + 1, egress_total = egress_total + $4, list_spend_nc = list_spend_nc + $3 WHERE id = $1 RETURNING wallet_nc`,
    [r.orgId, r.heldNc, cost, bytes],
  );
  await ledger(sql, r.orgId, 'query', -cost, rows[0]?.wallet_nc ?? 0, null);
  await maybeAutoReload(sql, r.orgId);
  return cost;
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

/** Give back a reservation for a query that did not run. */
export async function refund(sql: Sql, r: Reservation): Promise<void> {
  if (await claim(sql, r)) await giveBack(sql, r.orgId, r.payer, r.heldNc, r.egressHeld);
}

/**
 * Give back every reservation older than `olderThanMs`: what a crash or a kill between reserve
 * and settle left held. Run at start and periodically; returns how many were swept.
 */
export async function sweepReservations(store: Store, olderThanMs: number): Promise<number> {
  const cutoff = new Date(Date.now() - olderThanMs).toISOString();
  return store.tx(async (sql) => {
    const stale = await sql.query<{ org_id: string; payer: Payer; held_nc: number; egress_held: number }>(
      'DELETE FROM reservations WHERE created_at < $1 RETURNING org_id, payer, held_nc, egress_held',
      [cutoff],
    );
    for (const r of stale) await giveBack(sql, r.org_id, r.payer, Number(r.held_nc), Number(r.egress_held));
    return stale.length;
  });
}

export interface AutoReload {
  readonly threshold_cents: number;
  readonly amount_cents: number;
}

export async function topup(store: Store, orgId: string, amountCents: number, autoReload: AutoReload | null | undefined): Promise<number> {
  return store.tx(async (sql) => {
    if (autoReload === null) {
      await sql.query('UPDATE orgs SET auto_reload_threshold_nc = NULL, auto_reload_amount_nc = NULL WHERE id = $1', [orgId]);
    } else if (autoReload !== undefined) {
      await sql.query('UPDATE orgs SET auto_reload_threshold_nc = $2, auto_reload_amount_nc = $3 WHERE id = $1', [
        orgId,
        autoReload.threshold_cents * NC_PER_CENT,
        autoReload.amount_cents * NC_PER_CENT,
      ]);
    }
    if (amountCents === 0) return (await sql.query<{ wallet_nc: number }>('SELECT wallet_nc FROM orgs WHERE id = $1', [orgId]))[0]?.wallet_nc ?? 0;
    const balance = await credit(sql, orgId, amountCents * NC_PER_CENT, 'topup');
    if (balance === undefined) {
      throw new ApiError('invalid_request', `a wallet holds at most ${WALLET_MAX_CENTS} cents; top up less (see GET /v1/agent/account/usage for the balance)`, {
        field: 'amount_cents',
        wallet_max_cents: WALLET_MAX_CENTS,
      });
    }
    return balance;
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
