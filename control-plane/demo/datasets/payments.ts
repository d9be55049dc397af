/**
 * demo-payments: a payment processor's view of its merchants: charges (card, ACH, wallets) with
 * declines and risk scores, refunds, disputes (chargebacks) and payouts. Payouts settle exactly
 * the merchant's net balance (charges - fees - refunds - disputes) of their period.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { DAY, HOUR, MINUTE, Rng, SPAN_END_MS, SPAN_START_MS, WeightedIndex, at, col, iso, isoDate, pad, round2 } from '../rng.js';

const TARGET_ID = 'demo-payments';
const N_MERCHANTS = 60;
const N_CHARGES = 11000;

const MCCS: readonly (readonly [string, string, readonly [number, number]])[] = [
  ['5734', 'Computer software stores', [9, 499]],
  ['5812', 'Eating places, restaurants', [12, 140]],
  ['5999', 'Miscellaneous and specialty retail', [15, 300]],
  ['5691', "Men's and women's clothing stores", [25, 350]],
  ['7372', 'Computer programming, data processing', [29, 2400]],
  ['8299', 'Schools and educational services', [49, 1200]],
  ['7011', 'Lodging: hotels, motels, resorts', [110, 1400]],
  ['5977', 'Cosmetic stores', [12, 180]],
  ['4121', 'Taxicabs and limousines', [9, 90]],
  ['7997', 'Membership clubs (sports, recreation)', [25, 180]],
  ['8011', 'Doctors and physicians', [40, 600]],
  ['5399', 'Miscellaneous general merchandise', [10, 400]],
];

const FAILURES: readonly (readonly [string, string, number])[] = [
  ['card_declined', 'Your card was declined.', 40],
  ['insufficient_funds', 'Your card has insufficient funds.', 25],
  ['expired_card', 'Your card has expired.', 8],
  ['incorrect_cvc', "Your card's security code is incorrect.", 9],
  ['processing_error', 'An error occurred while processing your card. Try again in a little bit.', 4],
  ['fraudulent', 'Your card was declined (blocked by the risk engine).', 9],
  ['do_not_honor', 'Your card was declined by the issuer (do not honor).', 5],
];

const TABLES: readonly TableDef[] = [
  {
    name: 'merchants',
    description: 'Merchants (connected accounts) processing payments on the platform. No event time of their own.',
    primaryKey: 'merchant_id',
    columns: [
      col('merchant_id', 'text', 'Merchant id, e.g. mrc_0007.'),
      col('business_name', 'text', 'Legal / doing-business-as name.'),
      col('mcc', 'text', 'ISO 18245 merchant category code.'),
      col('mcc_description', 'text', 'Meaning of the MCC.'),
      col('country', 'text', 'Country of the business (ISO 3166-1 alpha-2).'),
      col('default_currency', 'text', 'Settlement currency (ISO 4217, lower case as processors print it).'),
      col('payout_schedule', 'text', 'weekly | monthly.'),
      col('pricing_pct', 'numeric', 'Card fee percentage, e.g. 2.9.'),
      col('pricing_fixed', 'numeric', 'Card fixed fee per successful charge, in the settlement currency.'),
      col('onboarded_on', 'date', 'Date the merchant was activated (may precede the data span).'),
      col('status', 'text', 'active | restricted | closed.'),
    ],
  },
  {
    name: 'charges',
    description: 'Payment attempts (charges). Amounts are decimal units of the currency.',
    primaryKey: 'charge_id',
    timeColumn: 'created_at',
    columns: [
      col('charge_id', 'text', 'Charge id, e.g. ch_3Nk...'),
      col('merchant_id', 'text', 'The merchant (merchants.merchant_id).'),
      col('created_at', 'timestamptz', 'When the charge was attempted.'),
      col('amount', 'numeric', 'Amount requested.'),
      col('currency', 'text', 'ISO 4217 currency, lower case.'),
      col('status', 'text', 'succeeded | failed | pending.'),
      col('payment_method_type', 'text', 'card | ach_debit | wallet.'),
      col('card_brand', 'text', 'visa | mastercard | amex | discover, for card and wallet payments.', true),
      col('card_last4', 'text', 'Last four digits of the card.', true),
      col('card_country', 'text', 'Issuing country of the card.', true),
      col('failure_code', 'text', 'Decline / failure code for failed charges.', true),
      col('failure_message', 'text', 'Human-readable failure reason.', true),
      col('risk_level', 'text', 'Risk evaluation: normal | elevated | highest.'),
      col('risk_score', 'integer', 'Risk score 0-99.'),
      col('fee', 'numeric', 'Processing fee for succeeded charges (0 otherwise).'),
      col('net', 'numeric', 'amount - fee for succeeded charges (0 otherwise).'),
      col('amount_refunded', 'numeric', 'Total refunded so far.'),
      col('disputed', 'boolean', 'Whether a dispute was opened on the charge.'),
      col('customer_email', 'text', 'Payer e-mail (example domains).', true),
    ],
  },
  {
    name: 'refunds',
    description: 'Refunds of succeeded charges (full or partial).',
    primaryKey: 'refund_id',
    timeColumn: 'created_at',
    columns: [
      col('refund_id', 'text', 'Refund id, e.g. re_3Nk...'),
      col('charge_id', 'text', 'The refunded charge (charges.charge_id).'),
      col('merchant_id', 'text', 'The merchant (merchants.merchant_id).'),
      col('amount', 'numeric', 'Amount refunded.'),
      col('currency', 'text', 'ISO 4217 currency, lower case.'),
      col('reason', 'text', 'requested_by_customer | duplicate | fraudulent.'),
      col('status', 'text', 'succeeded | pending | failed.'),
      col('created_at', 'timestamptz', 'When the refund was created.'),
    ],
  },
  {
    name: 'disputes',
    description: 'Disputes (chargebacks) raised by cardholders, with their outcome.',
    primaryKey: 'dispute_id',
    timeColumn: 'created_at',
    columns: [
      col('dispute_id', 'text', 'Dispute id, e.g. dp_1Ab...'),
      col('charge_id', 'text', 'The disputed charge (charges.charge_id).'),
      col('merchant_id', 'text', 'The merchant (merchants.merchant_id).'),
      col('amount', 'numeric', 'Disputed amount (withdrawn from the merchant balance while open or lost).'),
      col('currency', 'text', 'ISO 4217 currency, lower case.'),
      col('reason', 'text', 'fraudulent | product_not_received | product_unacceptable | duplicate | subscription_canceled | credit_not_processed | general.'),
      col('status', 'text', 'needs_response | under_review | won | lost.'),
      col('created_at', 'timestamptz', 'When the dispute was opened.'),
      col('closed_at', 'timestamptz', 'When the dispute was decided.', true),
      col('dispute_fee', 'numeric', 'Non-refundable dispute fee charged to the merchant.'),
    ],
  },
  {
    name: 'payouts',
    description: 'Payouts of the merchant balance to its bank account (net of fees, refunds and disputes of the period).',
    primaryKey: 'payout_id',
    timeColumn: 'created_at',
    columns: [
      col('payout_id', 'text', 'Payout id, e.g. po_1Ab...'),
      col('merchant_id', 'text', 'The merchant (merchants.merchant_id).'),
      col('created_at', 'timestamptz', 'When the payout was created.'),
      col('arrival_date', 'date', 'Expected (or actual) arrival date at the bank.'),
      col('period_start', 'timestamptz', 'Start of the balance period settled (inclusive).'),
      col('period_end', 'timestamptz', 'End of the balance period settled (exclusive).'),
      col('amount', 'numeric', 'Amount paid out (may be negative: a debit of the merchant bank account).'),
      col('currency', 'text', 'ISO 4217 currency, lower case.'),
      col('charge_count', 'integer', 'Succeeded charges settled in this payout.'),
      col('status', 'text', 'paid | in_transit | failed.'),
    ],
  },
];

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);
  const END = SPAN_END_MS - MINUTE;
  const pid = (prefix: string): string => `${prefix}_${rng.digits(1)}${rng.alnum(5)}${rng.hex(16).toUpperCase().slice(0, 8)}${rng.alnum(6).toLowerCase()}`;

  interface Merchant { id: string; mcc: (typeof MCCS)[number]; currency: string; schedule: 'weekly' | 'monthly'; pct: number; fixed: number; active: number; end: number | null }
  const merchants: Merchant[] = [];
  const merchantRows: Cell[][] = [];
  for (let i = 1; i <= N_MERCHANTS; i++) {
    const mcc = rng.pick(MCCS);
    const country = rng.weighted<string>([['US', 70], ['GB', 10], ['CA', 8], ['DE', 6], ['AU', 6]]);
    const currency = country === 'US' ? 'usd' : country === 'GB' ? 'gbp' : country === 'CA' ? 'cad' : country === 'DE' ? 'eur' : 'aud';
    const onboarded = rng.chance(0.6) ? Date.UTC(2019, 0, 1) + rng.int(0, 1400) * DAY : rng.trendingTimeMs(SPAN_START_MS, SPAN_END_MS - 200 * DAY, 0);
    const closes = rng.chance(0.06) ? rng.trendingTimeMs(Math.max(onboarded, SPAN_START_MS) + 120 * DAY, SPAN_END_MS - 30 * DAY, 0) : null;
    const m: Merchant = {
      id: `mrc_${pad(i, 4)}`, mcc, currency, schedule: rng.chance(0.3) ? 'weekly' : 'monthly',
      pct: country === 'US' ? 2.9 : 1.5, fixed: country === 'US' ? 0.3 : 0.25, active: onboarded, end: closes,
    };
    merchants.push(m);
    merchantRows.push([
      m.id, rng.companyName(), mcc[0], mcc[1], country, currency, m.schedule, m.pct, m.fixed, isoDate(onboarded),
      closes !== null ? 'closed' : rng.chance(0.04) ? 'restricted' : 'active',
    ]);
  }
  const merchantPick = new WeightedIndex(merchants.map(() => rng.logNormal(1, 1, 0.05, 15)));

  // --- charges ----------------------------------------------------------------------------
  interface Charge { id: string; m: Merchant; at: number; amount: number; status: string; fee: number; refunded: number; disputed: boolean; seq: number }
  const charges: Charge[] = [];
  const chargeRows: Cell[][] = [];
  interface Refund { at: number; charge: Charge; amount: number; reason: string; status: string; seq: number }
  interface Dispute { at: number; charge: Charge; reason: string; status: string; closed: number | null; seq: number }
  const refunds: Refund[] = [];
  const disputes: Dispute[] = [];
  let seq = 0;
  const drafts: { at: number; m: Merchant }[] = [];
  while (drafts.length < N_CHARGES) {
    const m = at(merchants, merchantPick.pick(rng));
    const from = Math.max(SPAN_START_MS, m.active);
    const to = m.end ?? END;
    if (to - from < DAY) continue;
    drafts.push({ at: rng.businessTimeMs(from, to, 0.9, 0.7) + rng.int(0, 59) * 1000, m });
  }
  drafts.sort((a, b) => a.at - b.at);
  for (const d of drafts) {
    const m = d.m;
    const [lo, hi] = m.mcc[2];
    const amount = round2(Math.min(hi, Math.max(lo, rng.logNormal(Math.sqrt(lo * hi) * 0.6, 0.7))));
    const method = rng.weighted<string>([['card', 82], ['wallet', 12], ['ach_debit', 6]]);
    const riskScore = Math.round(Math.min(99, Math.max(0, rng.logNormal(18, 0.6))));
    const risk = riskScore >= 75 ? 'highest' : riskScore >= 55 ? 'elevated' : 'normal';
    let status = 'succeeded';
    let failure: (typeof FAILURES)[number] | null = null;
    if (risk === 'highest' && rng.chance(0.7)) failure = at(FAILURES, 5);
    else if (rng.chance(method === 'ach_debit' ? 0.04 : 0.075)) failure = rng.weighted(FAILURES.filter((f) => f[0] !== 'fraudulent').map((f) => [f, f[2]] as const));
    if (failure) status = 'failed';
    if (method === 'ach_debit' && d.at > END - 4 * DAY) status = 'pending';
    if (method === 'ach_debit' && failure) failure = ['insufficient_funds', 'The customer\'s bank account has insufficient funds (R01).', 1];
    const fee = status === 'succeeded' ? round2(method === 'ach_debit' ? Math.min(5, amount * 0.008) : amount * m.pct / 100 + m.fixed) : 0;
    const c: Charge = { id: pid('ch'), m, at: d.at, amount, status, fee, refunded: 0, disputed: false, seq: seq++ };
    charges.push(c);
    if (status === 'succeeded') {
      if (rng.chance(0.06)) {
        const full = rng.chance(0.7);
        const t = d.at + Math.round(rng.logNormal(4, 1, 0.02, 80) * 86_400) * 1000;
        if (t < END) {
          const amt = full ? amount : round2(amount * rng.float(0.1, 0.7));
          c.refunded = amt;
          refunds.push({ at: t, charge: c, amount: amt, reason: rng.weighted<string>([['requested_by_customer', 85], ['duplicate', 10], ['fraudulent', 5]]), status: t > END - 2 * DAY ? 'pending' : rng.chance(0.01) ? 'failed' : 'succeeded', seq: seq++ });
          if (refunds[refunds.length - 1]?.status === 'failed') c.refunded = 0;
        }
      } else if (method !== 'ach_debit' && rng.chance(riskScore > 45 ? 0.08 : 0.012)) {
        const t = d.at + rng.int(7, 75) * DAY + rng.int(0, 23) * HOUR;
        if (t < END) {
          c.disputed = true;
          const reason = riskScore > 45 ? 'fraudulent' : rng.weighted<string>([['product_not_received', 30], ['product_unacceptable', 20], ['subscription_canceled', 15], ['duplicate', 8], ['credit_not_processed', 12], ['general', 15]]);
          const closed = t + rng.int(20, 75) * DAY;
          const status = closed >= END ? (t > END - 14 * DAY ? 'needs_response' : 'under_review') : rng.chance(reason === 'fraudulent' ? 0.3 : 0.45) ? 'won' : 'lost';
          disputes.push({ at: t, charge: c, reason, status, closed: closed >= END ? null : closed, seq: seq++ });
        }
      }
    }
    const card = method !== 'ach_debit';
    const first = rng.firstName();
    const last = rng.lastName();
    chargeRows.push([
      c.id, m.id, iso(d.at), amount, m.currency, status, method,
      card ? rng.weighted<string>([['visa', 52], ['mastercard', 30], ['amex', 13], ['discover', 5]]) : null,
      card ? rng.digits(4) : null, card ? (rng.chance(0.88) ? (m.currency === 'usd' ? 'US' : rng.pick(['GB', 'CA', 'DE', 'AU', 'FR'])) : rng.pick(['US', 'BR', 'MX', 'IN', 'NG', 'GB'])) : null,
      failure ? failure[0] : null, failure ? failure[1] : null, risk, riskScore, fee, status === 'succeeded' ? round2(amount - fee) : 0,
      0, false, rng.chance(0.9) ? rng.email(first, last) : null,
    ]);
  }
  // Patch refunded / disputed flags now that refunds and disputes are known.
  charges.forEach((c, i) => {
    const row = chargeRows[i];
    if (!row) return;
    row[16] = c.refunded;
    row[17] = c.disputed;
  });

  refunds.sort((a, b) => a.at - b.at || a.seq - b.seq);
  disputes.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const refundRows: Cell[][] = refunds.map((r) => [pid('re'), r.charge.id, r.charge.m.id, r.amount, r.charge.m.currency, r.reason, r.status, iso(r.at)]);
  const disputeRows: Cell[][] = disputes.map((d) => [
    pid('dp'), d.charge.id, d.charge.m.id, d.charge.amount, d.charge.m.currency, d.reason, d.status, iso(d.at), d.closed === null ? null : iso(d.closed), 15,
  ]);

  // --- payouts: settle each merchant's balance movements period by period -------------------
  interface Movement { at: number; amount: number; charge: boolean }
  const movements = new Map<string, Movement[]>();
  const addMove = (m: Merchant, t: number, amount: number, charge: boolean): void => {
    const list = movements.get(m.id) ?? [];
    list.push({ at: t, amount, charge });
    movements.set(m.id, list);
  };
  // Funds become available two days after the charge.
  for (const c of charges) if (c.status === 'succeeded') addMove(c.m, c.at + 2 * DAY, round2(c.amount - c.fee), true);
  for (const r of refunds) if (r.status === 'succeeded') addMove(r.charge.m, r.at, -r.amount, false);
  for (const d of disputes) {
    addMove(d.charge.m, d.at, -round2(d.charge.amount + 15), false);
    if (d.status === 'won' && d.closed !== null) addMove(d.charge.m, d.closed, d.charge.amount, false);
  }
  interface Payout { at: number; m: Merchant; from: number; to: number; amount: number; count: number; status: string; seq: number }
  const payouts: Payout[] = [];
  for (const m of merchants) {
    const list = (movements.get(m.id) ?? []).sort((a, b) => a.at - b.at);
    let carry = 0;
    let idx = 0;
    let from = Math.max(SPAN_START_MS, Math.floor(m.active / DAY) * DAY);
    const nextBoundary = (t: number): number => {
      if (m.schedule === 'monthly') {
        const d = new Date(t);
        return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
      }
      // Weekly: Mondays 00:00 UTC.
      const dow = (new Date(t).getUTCDay() + 6) % 7;
      return Math.floor(t / DAY) * DAY + (7 - dow) * DAY;
    };
    while (from < END) {
      const to = nextBoundary(from);
      let sum = carry;
      let count = 0;
      while (idx < list.length && (list[idx]?.at ?? Infinity) < to) {
        const mv = list[idx++];
        if (!mv) break;
        sum += mv.amount;
        if (mv.charge) count++;
      }
      sum = round2(sum);
      const createdAt = to + 8 * HOUR;
      if (createdAt >= END) break;
      if (count > 0 || Math.abs(sum) >= 0.01) {
        if (sum > 0 || sum < -50) {
          const failed = rng.chance(0.008);
          payouts.push({ at: createdAt, m, from, to, amount: sum, count, status: failed ? 'failed' : createdAt > END - 2 * DAY ? 'in_transit' : 'paid', seq: seq++ });
          carry = failed ? sum : 0; // a failed payout returns to the balance
        } else carry = sum; // small negative balances roll forward
      }
      from = to;
    }
  }
  payouts.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const payoutRows: Cell[][] = payouts.map((p) => [
    pid('po'), p.m.id, iso(p.at), isoDate(p.at + (p.m.currency === 'usd' ? 2 : 3) * DAY < END ? p.at + (p.m.currency === 'usd' ? 2 : 3) * DAY : p.at),
    iso(p.from), iso(p.to), p.amount, p.m.currency, p.count, p.status,
  ]);

  return new Map<string, Cell[][]>([
    ['merchants', merchantRows],
    ['charges', chargeRows],
    ['refunds', refundRows],
    ['disputes', disputeRows],
    ['payouts', payoutRows],
  ]);
}

export const payments: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'finance',
  name: 'Payment processing',
  description:
    'A synthetic payment processor, 2023-2025: merchants, charges (cards, wallets, ACH) with declines, risk scores and fees, refunds, chargebacks and the payouts that settle each merchant balance.',
  schema: 'demo_payments',
  tables: TABLES,
  generate,
};
