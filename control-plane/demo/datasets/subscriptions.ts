/**
 * demo-subscriptions: a B2B SaaS company's subscription billing: plans, customer accounts,
 * subscriptions (trials, conversions, churn, reactivations), invoices and lifecycle events.
 * Simulated month by month, so MRR, invoices and events agree with each other.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { DAY, HOUR, MINUTE, Rng, SPAN_END_MS, SPAN_START_MS, at, col, iso, pad, round2 } from '../rng.js';

const TARGET_ID = 'demo-subscriptions';
const N_ACCOUNTS = 1250;

interface Plan {
  readonly id: string;
  readonly name: string;
  readonly tier: 'starter' | 'team' | 'business' | 'enterprise' | 'legacy';
  readonly interval: 'month' | 'year';
  /** price per seat per interval, USD */
  readonly price: number;
  readonly active: boolean;
}

const PLANS: readonly Plan[] = [
  { id: 'starter-monthly', name: 'Starter (monthly)', tier: 'starter', interval: 'month', price: 12, active: true },
  { id: 'starter-annual', name: 'Starter (annual)', tier: 'starter', interval: 'year', price: 120, active: true },
  { id: 'team-monthly', name: 'Team (monthly)', tier: 'team', interval: 'month', price: 25, active: true },
  { id: 'team-annual', name: 'Team (annual)', tier: 'team', interval: 'year', price: 250, active: true },
  { id: 'business-monthly', name: 'Business (monthly)', tier: 'business', interval: 'month', price: 45, active: true },
  { id: 'business-annual', name: 'Business (annual)', tier: 'business', interval: 'year', price: 450, active: true },
  { id: 'enterprise-annual', name: 'Enterprise (annual contract)', tier: 'enterprise', interval: 'year', price: 700, active: true },
  { id: 'pro-monthly-2022', name: 'Pro (monthly, retired 2022 pricing)', tier: 'legacy', interval: 'month', price: 20, active: false },
];

const TIER_ORDER = ['starter', 'team', 'business', 'enterprise'] as const;

const INDUSTRIES = ['Software', 'Financial Services', 'Healthcare', 'Retail', 'Manufacturing', 'Education', 'Media', 'Professional Services', 'Logistics', 'Nonprofit'] as const;

const CANCEL_REASONS: readonly (readonly [string, number])[] = [
  ['too_expensive', 28], ['missing_features', 18], ['switched_to_competitor', 16], ['unused', 20],
  ['company_closed', 5], ['customer_service', 3], ['other', 10],
];

const TABLES: readonly TableDef[] = [
  {
    name: 'plans',
    description: 'Price plans (per-seat pricing, monthly or annual).',
    primaryKey: 'plan_id',
    columns: [
      col('plan_id', 'text', 'Plan id, e.g. team-monthly.'),
      col('name', 'text', 'Display name.'),
      col('tier', 'text', 'Product tier: starter | team | business | enterprise | legacy.'),
      col('billing_interval', 'text', 'month | year.'),
      col('price_per_seat', 'numeric', 'Price per seat per billing interval, USD.'),
      col('currency', 'text', 'ISO 4217 currency (USD).'),
      col('active', 'boolean', 'Whether new subscriptions can choose the plan.'),
    ],
  },
  {
    name: 'accounts',
    description: 'Customer accounts (companies) that sign up for the product.',
    primaryKey: 'account_id',
    timeColumn: 'created_at',
    columns: [
      col('account_id', 'text', 'Account id, e.g. acct_00123.'),
      col('company_name', 'text', 'Company name.'),
      col('industry', 'text', 'Industry.'),
      col('country', 'text', 'Billing country (ISO 3166-1 alpha-2).'),
      col('employee_band', 'text', 'Company size band: 1-10 | 11-50 | 51-200 | 201-1000 | 1000+.'),
      col('created_at', 'timestamptz', 'When the account signed up.'),
      col('acquisition_channel', 'text', 'self_serve | sales | partner.'),
      col('billing_email', 'text', 'Billing contact e-mail.'),
    ],
  },
  {
    name: 'subscriptions',
    description: 'Subscriptions of accounts to plans, with their current state (as of 2025-12-31).',
    primaryKey: 'subscription_id',
    timeColumn: 'started_at',
    columns: [
      col('subscription_id', 'text', 'Subscription id, e.g. sub_000123.'),
      col('account_id', 'text', 'The account (accounts.account_id).'),
      col('plan_id', 'text', 'Current plan (plans.plan_id).'),
      col('status', 'text', 'trialing | active | past_due | canceled.'),
      col('started_at', 'timestamptz', 'When the subscription (or its trial) started.'),
      col('trial_days', 'integer', 'Length of the free trial in days (the trial ends trial_days after started_at); null when there was no trial.', true),
      col('canceled_at', 'timestamptz', 'When the subscription ended; null while live.', true),
      col('cancel_reason', 'text', 'Why it ended: trial_expired, payment_failed, too_expensive, ...', true),
      col('seats', 'integer', 'Current number of paid seats.'),
      col('mrr', 'numeric', 'Current monthly recurring revenue, USD (0 while trialing or after cancellation).'),
    ],
  },
  {
    name: 'invoices',
    description: 'Invoices issued per billing period (and for mid-period upgrades, prorated).',
    primaryKey: 'invoice_id',
    timeColumn: 'issued_at',
    columns: [
      col('invoice_id', 'text', 'Invoice id, e.g. in_0001234.'),
      col('invoice_number', 'text', 'Human-readable invoice number.'),
      col('account_id', 'text', 'The account billed (accounts.account_id).'),
      col('subscription_id', 'text', 'The subscription (subscriptions.subscription_id).'),
      col('plan_id', 'text', 'Plan billed (plans.plan_id).'),
      col('billing_reason', 'text', 'subscription_create | subscription_cycle | subscription_update.'),
      col('issued_at', 'timestamptz', 'When the invoice was finalized.'),
      col('seats', 'integer', 'Seats billed.'),
      col('amount_due', 'numeric', 'Amount due, USD.'),
      col('amount_paid', 'numeric', 'Amount collected, USD.'),
      col('status', 'text', 'open | paid | void | uncollectible.'),
      col('paid_at', 'timestamptz', 'When payment succeeded.', true),
      col('attempt_count', 'integer', 'Payment attempts made.'),
    ],
  },
  {
    name: 'subscription_events',
    description: 'Subscription lifecycle events with their effect on MRR.',
    primaryKey: 'event_id',
    timeColumn: 'occurred_at',
    columns: [
      col('event_id', 'text', 'Event id, e.g. evt_0001234.'),
      col('subscription_id', 'text', 'The subscription (subscriptions.subscription_id).'),
      col('account_id', 'text', 'The account (accounts.account_id).'),
      col('occurred_at', 'timestamptz', 'When the event happened.'),
      col('event_type', 'text', 'trial_started | trial_converted | trial_expired | subscription_started | seats_changed | plan_upgraded | plan_downgraded | payment_failed | payment_recovered | canceled | reactivated.'),
      col('from_plan_id', 'text', 'Plan before a plan change.', true),
      col('to_plan_id', 'text', 'Plan after the event.', true),
      col('seats_delta', 'integer', 'Change in seats.'),
      col('mrr_delta', 'numeric', 'Change in MRR caused by the event, USD.'),
    ],
  },
];

function mrrOf(plan: Plan, seats: number): number {
  return round2(plan.interval === 'year' ? (plan.price * seats) / 12 : plan.price * seats);
}

function planFor(tier: string, interval: 'month' | 'year'): Plan {
  const p = PLANS.find((x) => x.tier === tier && x.interval === interval && x.active) ?? PLANS.find((x) => x.tier === tier && x.active);
  if (!p) throw new Error(`no plan for ${tier}`);
  return p;
}

function addMonths(ms: number, n: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + n, Math.min(d.getUTCDate(), 28), d.getUTCHours(), d.getUTCMinutes());
}

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);
  const END = SPAN_END_MS - MINUTE;

  const planRows: Cell[][] = PLANS.map((p) => [p.id, p.name, p.tier, p.interval, p.price, 'USD', p.active]);

  interface Ev { at: number; seq: number; sub: string; acct: string; type: string; from: string | null; to: string | null; seats: number; mrr: number }
  interface Inv { at: number; seq: number; acct: string; sub: string; plan: string; reason: string; seats: number; due: number; status: string; paidAt: number | null; attempts: number }
  const events: Ev[] = [];
  const invoices: Inv[] = [];
  const subRows: Cell[][] = [];
  const accountRows: Cell[][] = [];
  let seq = 0;
  let subN = 0;

  const created = Array.from({ length: N_ACCOUNTS }, () => rng.businessTimeMs(SPAN_START_MS, SPAN_END_MS - 2 * DAY, 0.7, 0.15)).sort((a, b) => a - b);
  created.forEach((createdAt, ai) => {
    const acct = `acct_${pad(ai + 1, 5)}`;
    const company = rng.companyName();
    const band = rng.weighted<string>([['1-10', 35], ['11-50', 32], ['51-200', 20], ['201-1000', 10], ['1000+', 3]]);
    const channel = band === '1000+' || band === '201-1000' ? rng.weighted<string>([['sales', 70], ['self_serve', 20], ['partner', 10]]) : rng.weighted<string>([['self_serve', 80], ['sales', 12], ['partner', 8]]);
    accountRows.push([
      acct, company, rng.pick(INDUSTRIES), rng.pick(['US', 'US', 'US', 'US', 'GB', 'CA', 'DE', 'AU', 'FR', 'NL', 'SE', 'IN', 'BR']), band,
      iso(createdAt), channel, `billing@${company.toLowerCase().replace(/\b(inc|llc|corp|ltd|group|co)\.?$/g, '').replace(/[^a-z0-9]+/g, '')}.example`,
    ]);
    const maxSeats = band === '1-10' ? 10 : band === '11-50' ? 40 : band === '51-200' ? 120 : band === '201-1000' ? 400 : 1500;

    // One or more subscription lifetimes (a churned account may come back).
    let start = createdAt + rng.int(0, 90) * MINUTE;
    let first = true;
    while (start < END) {
      subN++;
      const sub = `sub_${pad(subN, 6)}`;
      let tier: string =
        channel === 'sales' ? rng.weighted<string>([['business', 50], ['enterprise', 35], ['team', 15]])
        : rng.weighted<string>([['starter', 45], ['team', 40], ['business', 15]]);
      const interval: 'month' | 'year' = tier === 'enterprise' ? 'year' : rng.chance(channel === 'sales' ? 0.7 : 0.25) ? 'year' : 'month';
      let plan = planFor(tier, interval);
      let seats = Math.max(1, Math.min(maxSeats, Math.round(rng.logNormal(Math.max(2, maxSeats / 4), 0.6, 1, maxSeats))));
      if (tier === 'enterprise') seats = Math.max(seats, 50);
      const trial = first && channel === 'self_serve' && rng.chance(0.75);
      const trialEnd = trial ? start + 14 * DAY : null;
      let status = 'active';
      let canceledAt: number | null = null;
      let cancelReason: string | null = null;
      let mrr = 0;
      const ev = (t: number, type: string, from: string | null, to: string | null, seatsDelta: number, mrrDelta: number): void => {
        if (t < END) events.push({ at: t, seq: seq++, sub, acct, type, from, to, seats: seatsDelta, mrr: round2(mrrDelta) });
      };
      const invoice = (t: number, reason: string, due: number, p: Plan, s: number): boolean => {
        if (t >= END) return true;
        const failed = rng.chance(0.035);
        let st = 'paid';
        let paidAt: number | null = t + rng.int(1, 600) * 1000 * 6;
        let attempts = 1;
        let ok = true;
        if (failed) {
          ev(t + 10 * MINUTE, 'payment_failed', null, p.id, 0, 0);
          attempts = rng.int(2, 4);
          if (rng.chance(0.7)) {
            paidAt = t + rng.int(1, 9) * DAY + rng.int(0, 600) * MINUTE;
            if (paidAt >= END) {
              st = 'open';
              paidAt = null;
            } else ev(paidAt, 'payment_recovered', null, p.id, 0, 0);
          } else {
            st = 'uncollectible';
            paidAt = null;
            ok = false;
          }
        }
        if (paidAt !== null && paidAt >= END) {
          st = 'open';
          paidAt = null;
        }
        if (rng.chance(0.004)) {
          st = 'void';
          paidAt = null;
        }
        invoices.push({ at: t, seq: seq++, acct, sub, plan: p.id, reason, seats: s, due: round2(due), status: st, paidAt, attempts });
        return ok;
      };

      let t = start;
      if (trial && trialEnd !== null) {
        ev(start, 'trial_started', null, plan.id, seats, 0);
        if (trialEnd >= END) status = 'trialing';
        else if (rng.chance(0.42)) {
          status = 'canceled';
          canceledAt = trialEnd;
          cancelReason = 'trial_expired';
          ev(trialEnd, 'trial_expired', null, plan.id, -seats, 0);
        } else {
          t = trialEnd;
          mrr = mrrOf(plan, seats);
          ev(t, 'trial_converted', null, plan.id, 0, mrr);
        }
      } else {
        mrr = mrrOf(plan, seats);
        ev(start, first ? 'subscription_started' : 'reactivated', null, plan.id, seats, mrr);
      }

      if (status === 'active') {
        // Billing periods.
        let reason = 'subscription_create';
        let periodStart = t;
        while (periodStart < END && status === 'active') {
          const months = plan.interval === 'year' ? 12 : 1;
          const ok = invoice(periodStart, reason, plan.price * seats, plan, seats);
          reason = 'subscription_cycle';
          const periodEnd = addMonths(periodStart, months);
          if (!ok) {
            const when = periodStart + rng.int(12, 20) * DAY;
            if (when < END) {
              status = 'canceled';
              canceledAt = when;
              cancelReason = 'payment_failed';
              ev(when, 'canceled', plan.id, null, -seats, -mrr);
              mrr = 0;
            } else status = 'past_due';
            break;
          }
          // Mid-period changes.
          const monthsInPeriod = months;
          for (let m = 0; m < monthsInPeriod && status === 'active'; m++) {
            const mt = addMonths(periodStart, m) + rng.int(1, 26) * DAY + rng.int(8, 18) * HOUR;
            if (mt >= END || mt >= periodEnd) break;
            const r = rng.next();
            const tierIdx = TIER_ORDER.indexOf(plan.tier as (typeof TIER_ORDER)[number]);
            if (r < 0.018 && tierIdx >= 0 && tierIdx < 3) {
              const next = planFor(at(TIER_ORDER, tierIdx + 1), plan.interval);
              const newMrr = mrrOf(next, seats);
              ev(mt, 'plan_upgraded', plan.id, next.id, 0, newMrr - mrr);
              const remaining = Math.max(0, (periodEnd - mt) / (periodEnd - periodStart));
              invoice(mt + MINUTE, 'subscription_update', (next.price - plan.price) * seats * remaining, next, seats);
              plan = next;
              tier = next.tier;
              mrr = newMrr;
            } else if (r < 0.024 && tierIdx > 0 && tierIdx < 3 && plan.interval === 'month') {
              const next = planFor(at(TIER_ORDER, tierIdx - 1), plan.interval);
              const newMrr = mrrOf(next, seats);
              ev(mt, 'plan_downgraded', plan.id, next.id, 0, newMrr - mrr);
              plan = next;
              tier = next.tier;
              mrr = newMrr;
            } else if (r < 0.07) {
              const delta = rng.chance(0.7) ? Math.max(1, Math.round(seats * rng.float(0.05, 0.3))) : -Math.max(1, Math.round(seats * rng.float(0.05, 0.2)));
              const newSeats = Math.max(1, Math.min(maxSeats * 2, seats + delta));
              if (newSeats !== seats) {
                const newMrr = mrrOf(plan, newSeats);
                ev(mt, 'seats_changed', plan.id, plan.id, newSeats - seats, newMrr - mrr);
                if (newSeats > seats) {
                  const remaining = Math.max(0, (periodEnd - mt) / (periodEnd - periodStart));
                  invoice(mt + MINUTE, 'subscription_update', plan.price * (newSeats - seats) * remaining, plan, newSeats - seats);
                }
                seats = newSeats;
                mrr = newMrr;
              }
            }
          }
          // Renewal or churn at the period boundary.
          const churnP = plan.interval === 'year' ? 0.12 : tier === 'starter' ? 0.035 : 0.022;
          if (periodEnd < END && rng.chance(churnP)) {
            status = 'canceled';
            canceledAt = periodEnd;
            cancelReason = rng.weighted(CANCEL_REASONS);
            ev(periodEnd, 'canceled', plan.id, null, -seats, -mrr);
            mrr = 0;
            break;
          }
          periodStart = periodEnd;
        }
      }
      subRows.push([
        sub, acct, plan.id, status, iso(start), trialEnd === null ? null : 14,
        canceledAt === null ? null : iso(canceledAt), cancelReason, seats, status === 'canceled' || status === 'trialing' ? 0 : mrr,
      ]);
      if (status !== 'canceled' || canceledAt === null || cancelReason === 'trial_expired' || cancelReason === 'company_closed') break;
      if (!rng.chance(0.12)) break;
      start = canceledAt + rng.int(30, 400) * DAY;
      first = false;
    }
  });

  events.sort((a, b) => a.at - b.at || a.seq - b.seq);
  invoices.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const eventRows: Cell[][] = events.map((e, i) => [`evt_${pad(i + 1, 7)}`, e.sub, e.acct, iso(e.at), e.type, e.from, e.to, e.seats, e.mrr]);
  const invoiceRows: Cell[][] = invoices.map((v, i) => {
    const paid = v.status === 'paid' ? v.due : 0;
    return [
      `in_${pad(i + 1, 7)}`, `INV-${new Date(v.at).getUTCFullYear()}-${pad(i + 1, 6)}`, v.acct, v.sub, v.plan, v.reason, iso(v.at), v.seats,
      v.due, paid, v.status, v.paidAt === null ? null : iso(v.paidAt), v.attempts,
    ];
  });

  return new Map<string, Cell[][]>([
    ['plans', planRows],
    ['accounts', accountRows],
    ['subscriptions', subRows],
    ['invoices', invoiceRows],
    ['subscription_events', eventRows],
  ]);
}

export const subscriptions: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'commerce',
  name: 'SaaS subscriptions',
  description:
    'A synthetic B2B SaaS business, 2023-2025: per-seat plans, accounts, subscriptions with trials, upgrades, seat changes, failed payments and churn, the invoices they produce and an MRR event log.',
  schema: 'demo_subscriptions',
  tables: TABLES,
  generate,
};
