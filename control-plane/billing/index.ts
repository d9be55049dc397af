/**
 * Metering and billing (CONTRACT.md "Accounts, keys, billing"). Money is kept in exact integer
 * nanocents (1 cent = 10^9 nc): a query costs 0.5 cents = 5·10^8 nc and each byte of egress
 * 8 nc (8 cents per 10^9 bytes). A query is admitted by reserving its price atomically from the
 * trial or from the wallet (one UPDATE with its condition in the WHERE clause), so concurrent
 * queries can never spend the same allowance twice; it is settled or refunded afterwards.
 */
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

export function centsFromNc(nc: number): number {
  return nc / NC_PER_CENT;
}

export function queryCostNc(bytes: number): number {
  return QUERY_PRICE_NC + bytes * EGRESS_NC_PER_BYTE;
}

export type Payer = 'trial' | 'wallet';

/** What was reserved for one query; settle or refund it exactly once. */
export interface Reservation {
  readonly orgId: string;
  readonly payer: Payer;
  readonly heldNc: number;
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

/** Credit the wallet; returns the new balance. */
export async function credit(sql: Sql, orgId: string, amountNc: number, kind: 'topup' | 'auto_reload'): Promise<number> {
  const rows = await sql.query<{ wallet_nc: number }>('UPDATE orgs SET wallet_nc = wallet_nc + $2 WHERE id = $1 RETURNING wallet_nc', [orgId, amountNc]);
  const balance = rows[0]?.wallet_nc;
  if (balance === undefined) throw new ApiError('not_found', 'organization not found');
  await ledger(sql, orgId, kind, amountNc, balance, null);
  return balance;
}

/** Auto-reload when the balance is under the threshold (in the caller's transaction). */
async function maybeAutoReload(sql: Sql, orgId: string): Promise<boolean> {
  const rows = await sql.query<OrgMoney>('SELECT wallet_nc, auto_reload_threshold_nc, auto_reload_amount_nc FROM orgs WHERE id = $1 FOR UPDATE', [orgId]);
  const o = rows[0];
  if (!o || o.auto_reload_threshold_nc === null || o.auto_reload_amount_nc === null) return false;
  if (o.wallet_nc >= o.auto_reload_threshold_nc) return false;
  await credit(sql, orgId, o.auto_reload_amount_nc, 'auto_reload');
  return true;
}

/**
 * Reserve the price of one query: from the trial when it has allowance left, else a hold on the
 * wallet large enough for the largest response. Throws 402 when neither can pay.
 */
export async function reserve(store: Store, orgId: string, maxResultBytes: number): Promise<Reservation> {
  const trial = await store.query(
    `UPDATE orgs SET trial_queries_used = trial_queries_used + 1, trial_spent_nc = trial_spent_nc + $2
      WHERE id = $1 AND trial_queries_used < $3 AND trial_egress_used < $4 AND trial_expires_at > $5 AND trial_spent_nc + $2 <= $6
      RETURNING id`,
    [orgId, QUERY_PRICE_NC, TRIAL.queries, TRIAL.egressBytes, new Date().toISOString(), TRIAL.creditNc],
  );
  if (trial.length === 1) return { orgId, payer: 'trial', heldNc: QUERY_PRICE_NC };

  const hold = queryCostNc(maxResultBytes);
  for (let attempt = 0; attempt < 2; attempt++) {
    const held = await store.query(
      'UPDATE orgs SET wallet_nc = wallet_nc - $2, wallet_held_nc = wallet_held_nc + $2 WHERE id = $1 AND wallet_nc >= $2 RETURNING id',
      [orgId, hold],
    );
    if (held.length === 1) return { orgId, payer: 'wallet', heldNc: hold };
    if (attempt === 0 && !(await store.tx((sql) => maybeAutoReload(sql, orgId)))) break;
  }
  const [o] = await store.query<{ wallet_nc: number }>('SELECT wallet_nc FROM orgs WHERE id = $1', [orgId]);
  throw new ApiError(
    'payment_required',
    `The trial allowance is used up and the wallet (${centsFromNc(o?.wallet_nc ?? 0)} cents) cannot cover a query (up to ${centsFromNc(hold)} cents is held while it runs). Top up with POST /v1/agent/topup {"amount_cents": ${TOPUP_MIN_CENTS}} or more, optionally with auto_reload.`,
    { wallet_balance_cents: centsFromNc(o?.wallet_nc ?? 0), required_cents: centsFromNc(hold), topup: 'POST /v1/agent/topup' },
  );
}

/** Charge the query for `bytes` of egress (in the caller's transaction); returns its list cost in nc. */
export async function settle(sql: Sql, r: Reservation, bytes: number): Promise<number> {
  const cost = queryCostNc(bytes);
  if (r.payer === 'trial') {
    await sql.query(
      `UPDATE orgs SET trial_egress_used = trial_egress_used + $2, trial_spent_nc = trial_spent_nc + $3,
         queries_total = queries_total + 1, egress_total = egress_total + $2, list_spend_nc = list_spend_nc + $4 WHERE id = $1`,
      [r.orgId, bytes, bytes * EGRESS_NC_PER_BYTE, cost],
    );
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

/** Give back a reservation for a query that did not run to completion. */
export async function refund(sql: Sql, r: Reservation): Promise<void> {
  if (r.payer === 'trial') {
    await sql.query('UPDATE orgs SET trial_queries_used = trial_queries_used - 1, trial_spent_nc = trial_spent_nc - $2 WHERE id = $1', [r.orgId, r.heldNc]);
  } else {
    await sql.query('UPDATE orgs SET wallet_held_nc = wallet_held_nc - $2, wallet_nc = wallet_nc + $2 WHERE id = $1', [r.orgId, r.heldNc]);
  }
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
    return amountCents > 0 ? credit(sql, orgId, amountCents * NC_PER_CENT, 'topup') : (await sql.query<{ wallet_nc: number }>('SELECT wallet_nc FROM orgs WHERE id = $1', [orgId]))[0]?.wallet_nc ?? 0;
  });
}

export interface UsageRow {
  queries_total: number;
  egress_total: number;
  list_spend_nc: number;
  wallet_spend_nc: number;
  wallet_nc: number;
  wallet_held_nc: number;
  trial_queries_used: number;
  trial_egress_used: number;
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
    egress_bytes: u.egress_total,
    spend_cents: centsFromNc(u.list_spend_nc),
    wallet_spend_cents: centsFromNc(u.wallet_spend_nc),
    wallet_balance_cents: centsFromNc(u.wallet_nc),
    wallet_held_cents: centsFromNc(u.wallet_held_nc),
    trial: {
      active,
      queries_left: queriesLeft,
      egress_bytes_left: egressLeft,
      credit_left_cents: centsFromNc(creditLeft),
      expires_at: expires.toISOString(),
    },
    auto_reload:
      u.auto_reload_threshold_nc === null || u.auto_reload_amount_nc === null
        ? null
        : { threshold_cents: centsFromNc(u.auto_reload_threshold_nc), amount_cents: centsFromNc(u.auto_reload_amount_nc) },
  };
}
