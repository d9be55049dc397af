/**
 * demo-banking: a sample of retail customers of a community bank: customers, deposit and card
 * accounts, every posted transaction with its running balance, monthly statements that
 * reconcile with the transactions, and fraud alerts raised on card activity.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { DAY, HOUR, MINUTE, Rng, SPAN_END_MS, SPAN_START_MS, col, iso, isoDate, pad, round2, textId } from '../rng.js';

const TARGET_ID = 'demo-banking';
const N_CUSTOMERS = 65;

interface Merchant {
  readonly name: string;
  readonly category: string;
  readonly mcc: string;
  readonly amount: readonly [number, number];
}

const CARD_MERCHANTS: readonly Merchant[] = [
  { name: 'FreshMart Grocery', category: 'groceries', mcc: '5411', amount: [18, 180] },
  { name: 'Green Valley Market', category: 'groceries', mcc: '5411', amount: [12, 140] },
  { name: 'Corner Bistro', category: 'dining', mcc: '5812', amount: [14, 95] },
  { name: 'Bean There Coffee', category: 'dining', mcc: '5814', amount: [4, 16] },
  { name: 'Noodle House', category: 'dining', mcc: '5812', amount: [12, 60] },
  { name: 'QuickFuel Station', category: 'fuel', mcc: '5541', amount: [25, 85] },
  { name: 'Metro Transit', category: 'transport', mcc: '4111', amount: [2.75, 40] },
  { name: 'RideNow', category: 'transport', mcc: '4121', amount: [9, 48] },
  { name: 'Megastore Online', category: 'shopping', mcc: '5942', amount: [9, 250] },
  { name: 'Hammer & Nail Hardware', category: 'shopping', mcc: '5200', amount: [15, 320] },
  { name: 'Northside Pharmacy', category: 'health', mcc: '5912', amount: [5, 90] },
  { name: 'StreamFlix', category: 'subscriptions', mcc: '4899', amount: [15.49, 15.49] },
  { name: 'CloudTunes', category: 'subscriptions', mcc: '5815', amount: [10.99, 10.99] },
  { name: 'FitLife Gym', category: 'subscriptions', mcc: '7997', amount: [39, 39] },
  { name: 'SkyHigh Airlines', category: 'travel', mcc: '3000', amount: [120, 780] },
  { name: 'Harborview Hotel', category: 'travel', mcc: '7011', amount: [140, 620] },
];

const SHOPPING_MERCHANTS = CARD_MERCHANTS.filter((x) => x.category !== 'subscriptions');

const EMPLOYERS = ['Acme Manufacturing', 'Riverside Health', 'Summit Logistics', 'City of Springfield', 'Brightline Software', 'Keystone Retail', 'State University', 'Granite Construction'] as const;
const UTILITIES = [['Metro Power & Light', 'utilities', [60, 210]], ['City Water', 'utilities', [30, 90]], ['FiberNet Internet', 'utilities', [55, 95]], ['Wireless One', 'utilities', [45, 140]]] as const;

const TABLES: readonly TableDef[] = [
  {
    name: 'customers',
    description: 'Retail banking customers (a sample of 65). No event time of their own, so period scopes do not restrict it.',
    primaryKey: 'customer_id',
    columns: [
      col('customer_id', 'text', 'Customer id, e.g. cus-00042.'),
      col('full_name', 'text', 'Full name.'),
      col('date_of_birth', 'date', 'Date of birth.'),
      col('email', 'text', 'E-mail address (example domains).'),
      col('city', 'text', 'City of residence.'),
      col('state', 'text', 'US state (2-letter code).'),
      col('segment', 'text', 'Customer segment: mass_market | mass_affluent | private.'),
      col('kyc_status', 'text', 'Know-your-customer status: verified | refresh_due.'),
      col('risk_rating', 'text', 'AML risk rating: low | medium | high.'),
      col('customer_since', 'date', 'Date the relationship began (may precede the data span).'),
    ],
  },
  {
    name: 'accounts',
    description: 'Deposit and credit card accounts. No event time of their own (opened_on may precede the data span).',
    primaryKey: 'account_id',
    columns: [
      col('account_id', 'text', 'Account id, e.g. acc-000123.'),
      col('customer_id', 'text', 'Account holder (customers.customer_id).'),
      col('account_type', 'text', 'checking | savings | credit_card.'),
      col('product_name', 'text', 'Product the account was opened under.'),
      col('account_number_masked', 'text', 'Last four digits of the account or card number.'),
      col('currency', 'text', 'ISO 4217 currency (USD).'),
      col('opened_on', 'date', 'Date the account was opened.'),
      col('status', 'text', 'open | closed | frozen.'),
      col('closed_on', 'date', 'Date the account was closed.', true),
      col('interest_rate_pct', 'numeric', 'Annual percentage yield (deposits) or purchase APR (cards), percent.'),
      col('credit_limit', 'numeric', 'Credit limit for cards, USD; null for deposit accounts.', true),
      col('current_balance', 'numeric', 'Balance after the last posted transaction, USD (negative on a card = amount owed).'),
    ],
  },
  {
    name: 'transactions',
    description: 'Posted transactions with the running balance. amount is signed: credits positive, debits negative.',
    primaryKey: 'transaction_id',
    timeColumn: 'posted_at',
    columns: [
      col('transaction_id', 'bigint', 'Transaction id, increasing with posted_at.'),
      col('account_id', 'text', 'The account (accounts.account_id).'),
      col('posted_at', 'timestamptz', 'When the transaction posted.'),
      col('amount', 'numeric', 'Signed amount, USD: credits positive, debits negative.'),
      col('direction', 'text', 'credit | debit.'),
      col('channel', 'text', 'card | ach | atm | transfer | check | fee | interest | p2p.'),
      col('category', 'text', 'Spending / income category, e.g. payroll, rent, groceries, dining.'),
      col('description', 'text', 'Statement description.'),
      col('merchant_name', 'text', 'Card merchant, when a card purchase.', true),
      col('mcc', 'text', 'ISO 18245 merchant category code for card purchases.', true),
      col('balance_after', 'numeric', 'Account balance after this transaction, USD.'),
      col('transfer_ref', 'text', 'Shared reference linking the two legs of an internal transfer.', true),
    ],
  },
  {
    name: 'statements',
    description: 'Monthly statements: opening + credits - debits = closing, matching the transactions of the month.',
    primaryKey: 'statement_id',
    timeColumn: 'statement_date',
    columns: [
      col('statement_id', 'text', 'Statement id, e.g. stm-0001234.'),
      col('account_id', 'text', 'The account (accounts.account_id).'),
      col('statement_date', 'date', 'Last day of the statement month.'),
      col('period_start', 'date', 'First day covered.'),
      col('opening_balance', 'numeric', 'Balance at the start of the period, USD.'),
      col('total_credits', 'numeric', 'Sum of credits in the period, USD.'),
      col('total_debits', 'numeric', 'Sum of debits in the period (positive number), USD.'),
      col('closing_balance', 'numeric', 'Balance at the end of the period, USD.'),
      col('transaction_count', 'integer', 'Transactions posted in the period.'),
    ],
  },
  {
    name: 'fraud_alerts',
    description: 'Alerts raised by the fraud rules on card transactions and their investigation outcome.',
    primaryKey: 'alert_id',
    timeColumn: 'created_at',
    columns: [
      col('alert_id', 'text', 'Alert id, e.g. fra-00123.'),
      col('transaction_id', 'bigint', 'The flagged transaction (transactions.transaction_id).'),
      col('account_id', 'text', 'The account (accounts.account_id).'),
      col('created_at', 'timestamptz', 'When the alert was raised.'),
      col('rule', 'text', 'Rule that fired: large_amount | unusual_merchant | velocity | geo_mismatch | card_not_present.'),
      col('risk_score', 'integer', 'Model score 0-100.'),
      col('status', 'text', 'open | false_positive | confirmed_fraud.'),
      col('resolved_at', 'timestamptz', 'When the investigation closed.', true),
    ],
  },
];

interface Tx { at: number; seq: number; amount: number; channel: string; category: string; desc: string; merchant: string | null; mcc: string | null; ref: string | null }

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);
  const END = SPAN_END_MS - MINUTE;
  let seq = 0;

  interface Account { id: string; customer: string; type: 'checking' | 'savings' | 'credit_card'; open: number; close: number | null; rate: number; limit: number | null; start: number; txs: Tx[]; product: string; status: string }
  const customerRows: Cell[][] = [];
  const accounts: Account[] = [];
  let accN = 0;
  let transferN = 0;

  const push = (a: Account, t: number, amount: number, channel: string, category: string, desc: string, merchant: string | null = null, mcc: string | null = null, ref: string | null = null): void => {
    if (t < SPAN_START_MS || t >= END || t < a.open || (a.close !== null && t >= a.close)) return;
    a.txs.push({ at: t, seq: seq++, amount: round2(amount), channel, category, desc, merchant, mcc, ref });
  };
  const day = (monthStart: number, d: number): number => monthStart + (d - 1) * DAY;

  for (let i = 1; i <= N_CUSTOMERS; i++) {
    const cid = textId('cus', i, 5);
    const name = rng.fullName();
    const [first = 'x', last = 'y'] = name.split(' ');
    const age = rng.int(19, 84);
    const place = rng.usPlace();
    const segment = rng.weighted<string>([['mass_market', 70], ['mass_affluent', 25], ['private', 5]]);
    const since = rng.chance(0.65) ? Date.UTC(2008, 0, 1) + rng.int(0, 5400) * DAY : rng.trendingTimeMs(SPAN_START_MS, SPAN_END_MS - 120 * DAY, 0.3);
    customerRows.push([
      cid, name, isoDate(Date.UTC(2024, 0, 1) - (age * 365.25 + rng.int(0, 364)) * DAY), rng.email(first, last),
      place.city, place.state, segment, rng.chance(0.93) ? 'verified' : 'refresh_due', rng.weighted<string>([['low', 80], ['medium', 17], ['high', 3]]),
      isoDate(since),
    ]);
    const income = segment === 'private' ? rng.float(12000, 30000) : segment === 'mass_affluent' ? rng.float(6000, 12000) : rng.float(2600, 6000); // monthly net pay
    const makeAccount = (type: Account['type'], open: number, product: string, rate: number, limit: number | null): Account => {
      accN++;
      const a: Account = { id: textId('acc', accN), customer: cid, type, open, close: null, rate, limit, start: 0, txs: [], product, status: 'open' };
      accounts.push(a);
      return a;
    };
    const checking = makeAccount('checking', since, segment === 'mass_market' ? 'Everyday Checking' : 'Premier Checking', 0.01, null);
    checking.start = since < SPAN_START_MS ? round2(rng.float(300, income * 1.2)) : 0;
    const savings = rng.chance(0.6) ? makeAccount('savings', since < SPAN_START_MS && rng.chance(0.7) ? since + rng.int(0, 700) * DAY : rng.trendingTimeMs(Math.max(since, SPAN_START_MS), SPAN_END_MS - 60 * DAY, 0), 'High-Yield Savings', rng.pick([0.5, 1.25, 3.75, 4.1]), null) : null;
    if (savings) savings.start = savings.open < SPAN_START_MS ? round2(rng.float(500, income * 4)) : 0;
    const card = rng.chance(0.45) ? makeAccount('credit_card', since < SPAN_START_MS && rng.chance(0.6) ? since + rng.int(0, 900) * DAY : rng.trendingTimeMs(Math.max(since, SPAN_START_MS), SPAN_END_MS - 60 * DAY, 0), rng.pick(['Cash Back Visa', 'Travel Rewards Mastercard']), rng.pick([19.99, 22.49, 24.99, 27.24]), rng.pick([2000, 3500, 5000, 8000, 12000, 20000])) : null;
    if (card) card.start = card.open < SPAN_START_MS ? -round2(rng.float(0, (card.limit ?? 2000) * 0.3)) : 0;
    // A few relationships end.
    if (rng.chance(0.07)) {
      const closeAt = rng.trendingTimeMs(Math.max(SPAN_START_MS, since) + 180 * DAY, SPAN_END_MS - DAY, 0);
      if (closeAt > Math.max(SPAN_START_MS, since) + 180 * DAY) for (const a of [checking, savings, card]) if (a && a.open < closeAt) a.close = closeAt;
    }

    // Month-by-month activity.
    const employer = rng.pick(EMPLOYERS);
    const biweekly = rng.chance(0.6);
    const rent = round2(income * rng.float(0.22, 0.38));
    const rentIsMortgage = rng.chance(0.35);
    const utilities = rng.sample(UTILITIES, rng.int(1, 2));
    const cardPerMonth = rng.float(1, 3.5);
    const subs = rng.sample(CARD_MERCHANTS.filter((m) => m.category === 'subscriptions'), rng.int(0, 2));
    let payday = SPAN_START_MS + rng.int(0, 13) * DAY;
    for (let y = 2023; y <= 2025; y++) {
      for (let m = 0; m < 12; m++) {
        const ms = Date.UTC(y, m, 1);
        const me = Date.UTC(y, m + 1, 1);
        // Payroll.
        if (biweekly) {
          while (payday < me) {
            if (payday >= ms) push(checking, payday + 6 * HOUR, round2(income / 2.17 * rng.float(0.98, 1.02)), 'ach', 'payroll', `PAYROLL ${employer.toUpperCase()} DIR DEP`);
            payday += 14 * DAY;
          }
        } else push(checking, day(ms, 1) + 6 * HOUR, round2(income * rng.float(0.99, 1.01)), 'ach', 'payroll', `PAYROLL ${employer.toUpperCase()} DIR DEP`);
        push(checking, day(ms, rng.int(1, 4)) + 9 * HOUR, -rent, rentIsMortgage ? 'ach' : rng.chance(0.2) ? 'check' : 'ach', rentIsMortgage ? 'mortgage' : 'rent', rentIsMortgage ? 'HARBOR MORTGAGE AUTOPAY' : 'RENT PAYMENT');
        for (const [u, cat, [lo, hi]] of utilities) push(checking, day(ms, rng.int(8, 20)) + 10 * HOUR, -rng.money(lo, hi), 'ach', cat, `${u.toUpperCase()} BILLPAY`);
        // Card purchases: on the credit card when there is one, else the debit card.
        const spendAcct = card && card.open <= ms && rng.chance(0.75) ? card : checking;
        const n = rng.poisson(cardPerMonth);
        for (let k = 0; k < n; k++) {
          const mer = rng.pick(SHOPPING_MERCHANTS);
          const t = rng.businessTimeMs(ms, me, 0, 0.8);
          push(spendAcct, t, -rng.money(mer.amount[0], mer.amount[1]), 'card', mer.category, `POS ${mer.name.toUpperCase()}`, mer.name, mer.mcc);
        }
        for (const s of subs) push(spendAcct, day(ms, 5) + 3 * HOUR, -s.amount[0], 'card', s.category, `RECURRING ${s.name.toUpperCase()}`, s.name, s.mcc);
        if (rng.chance(0.35)) push(checking, rng.businessTimeMs(ms, me, 0, 0.8), -rng.pick([40, 60, 80, 100, 200]), 'atm', 'cash', 'ATM WITHDRAWAL');
        if (rng.chance(0.8)) push(checking, day(ms, rng.int(10, 24)) + 15 * HOUR, -round2(income * rng.float(0.12, 0.35)), 'ach', 'external_transfer', 'ONLINE TRANSFER TO EXTERNAL ACCOUNT');
        if (rng.chance(0.3)) push(checking, rng.businessTimeMs(ms, me, 0, 0.8), rng.chance(0.5) ? rng.money(10, 150) : -rng.money(10, 150), 'p2p', 'p2p', 'P2P TRANSFER');
        // Savings sweep and interest.
        if (savings && rng.chance(0.7)) {
          const t = day(ms, rng.int(2, 6)) + 12 * HOUR;
          const amt = round2(income * rng.float(0.05, 0.15));
          const ref = `TRF${pad(++transferN, 7)}`;
          if (t >= savings.open && (savings.close === null || t < savings.close)) {
            push(checking, t, -amt, 'transfer', 'savings_transfer', `TRANSFER TO SAVINGS ${savings.id.slice(-4)}`, null, null, ref);
            push(savings, t, amt, 'transfer', 'savings_transfer', `TRANSFER FROM CHECKING ${checking.id.slice(-4)}`, null, null, ref);
          }
        }
      }
    }
    // Sort each account, then add balance-dependent items (interest, card payments, fees) month by month.
    for (const a of [checking, savings, card]) if (a) a.txs.sort((p, q) => p.at - q.at || p.seq - q.seq);
    if (card) {
      // Card payment on the 25th: the balance is paid in full (70%) or the minimum; interest on the rest.
      const extra: Tx[] = [];
      const pushExtra = (t: number, amount: number, channel: string, category: string, desc: string, ref: string | null): boolean => {
        const before = card.txs.length;
        push(card, t, amount, channel, category, desc, null, null, ref);
        const last = card.txs.length > before ? card.txs.pop() : undefined;
        if (last) extra.push(last);
        return last !== undefined;
      };
      let bal = card.start;
      let idx = 0;
      for (let y = 2023; y <= 2025; y++) {
        for (let m = 0; m < 12; m++) {
          const payAt = Date.UTC(y, m, 25, 14);
          while (idx < card.txs.length && (card.txs[idx]?.at ?? Infinity) < payAt) bal += card.txs[idx++]?.amount ?? 0;
          if (bal >= -0.005 || payAt < card.open || (card.close !== null && payAt >= card.close) || payAt >= END) continue;
          const owed = round2(-bal);
          const full = rng.chance(0.7);
          const pay = full ? owed : round2(Math.min(owed, Math.max(35, owed * 0.03)));
          const ref = `TRF${pad(++transferN, 7)}`;
          push(checking, payAt, -pay, 'transfer', 'card_payment', `CARD PAYMENT ${card.product.toUpperCase()}`, null, null, ref);
          if (pushExtra(payAt, pay, 'transfer', 'card_payment', 'PAYMENT THANK YOU', ref)) bal += pay;
          if (!full) {
            const interest = round2((owed - pay) * (card.rate / 100 / 12));
            if (interest > 0 && pushExtra(Date.UTC(y, m + 1, 1, 2), -interest, 'interest', 'interest_charge', 'PURCHASE INTEREST CHARGE', null)) bal -= interest;
          }
        }
      }
      card.txs.push(...extra);
      card.txs.sort((p, q) => p.at - q.at || p.seq - q.seq);
    }
    if (savings) {
      let bal = savings.start;
      let idx = 0;
      const extra: Tx[] = [];
      for (let y = 2023; y <= 2025; y++) {
        for (let m = 0; m < 12; m++) {
          const at0 = Date.UTC(y, m + 1, 0, 23); // last day of the month
          while (idx < savings.txs.length && (savings.txs[idx]?.at ?? Infinity) < at0) bal += savings.txs[idx++]?.amount ?? 0;
          const interest = round2(bal * (savings.rate / 100 / 12));
          if (interest >= 0.01 && at0 >= savings.open && (savings.close === null || at0 < savings.close) && at0 < END) {
            extra.push({ at: at0, seq: seq++, amount: interest, channel: 'interest', category: 'interest', desc: 'INTEREST PAID', merchant: null, mcc: null, ref: null });
            bal += interest;
          }
        }
      }
      savings.txs.push(...extra);
      savings.txs.sort((p, q) => p.at - q.at || p.seq - q.seq);
    }
    checking.txs.sort((p, q) => p.at - q.at || p.seq - q.seq);
    // Overdraft fees on checking.
    {
      let bal = checking.start;
      const withFees: Tx[] = [];
      for (const tx of checking.txs) {
        withFees.push(tx);
        bal += tx.amount;
        if (bal < 0 && tx.amount < 0 && tx.channel !== 'fee') {
          const fee: Tx = { at: tx.at + MINUTE, seq: seq++, amount: -35, channel: 'fee', category: 'fees', desc: 'OVERDRAFT FEE', merchant: null, mcc: null, ref: null };
          if (fee.at < END) {
            withFees.push(fee);
            bal -= 35;
          }
        }
      }
      checking.txs = withFees;
    }
    // Closing: the remaining balance is paid out (or settled) just before the closing date.
    for (const a of [checking, savings, card]) {
      if (!a || a.close === null) continue;
      a.status = 'closed';
      const bal = round2(a.txs.reduce((sum, tx) => sum + tx.amount, a.start));
      const t = a.close - MINUTE;
      if (Math.abs(bal) >= 0.01 && t >= SPAN_START_MS && t >= a.open) {
        a.txs.push({ at: t, seq: seq++, amount: -bal, channel: a.type === 'credit_card' ? 'transfer' : 'check', category: 'account_closure', desc: bal > 0 ? 'CLOSING BALANCE DISBURSED' : 'CLOSING BALANCE SETTLED', merchant: null, mcc: null, ref: null });
      }
    }
    // Accounts that stay open are occasionally frozen pending review.
    if (checking.close === null && rng.chance(0.02)) checking.status = 'frozen';
  }

  // Accounts rows, transactions, statements.
  const txRows: Cell[][] = [];
  const all: { tx: Tx; acct: Account; bal: number }[] = [];
  const accountRows: Cell[][] = [];
  const statementRows: Cell[][] = [];
  interface StmtDraft { acct: Account; month: number; open: number; credits: number; debits: number; close: number; count: number }
  const stmts: StmtDraft[] = [];
  for (const a of accounts) {
    let bal = a.start;
    let idx = 0;
    for (const tx of a.txs) {
      bal = round2(bal + tx.amount);
      all.push({ tx, acct: a, bal });
    }
    // Statements.
    let b = a.start;
    for (let y = 2023; y <= 2025; y++) {
      for (let m = 0; m < 12; m++) {
        const ms = Date.UTC(y, m, 1);
        const me = Date.UTC(y, m + 1, 1);
        if (me <= a.open || (a.close !== null && ms >= a.close)) {
          while (idx < a.txs.length && (a.txs[idx]?.at ?? Infinity) < me) idx++;
          continue;
        }
        let credits = 0;
        let debits = 0;
        let count = 0;
        const open = b;
        while (idx < a.txs.length && (a.txs[idx]?.at ?? Infinity) < me) {
          const amt = a.txs[idx]?.amount ?? 0;
          if (amt >= 0) credits += amt;
          else debits -= amt;
          count++;
          idx++;
        }
        b = round2(open + credits - debits);
        stmts.push({ acct: a, month: ms, open: round2(open), credits: round2(credits), debits: round2(debits), close: b, count });
      }
    }
    const last4 = rng.digits(4);
    accountRows.push([
      a.id, a.customer, a.type, a.product, `****${last4}`, 'USD', isoDate(a.open), a.status, a.close === null ? null : isoDate(a.close),
      a.rate, a.limit, round2(bal),
    ]);
  }
  all.sort((p, q) => p.tx.at - q.tx.at || p.tx.seq - q.tx.seq);
  const txIds = new Map<Tx, number>();
  all.forEach(({ tx, acct, bal }, i) => {
    const id = 10_000_001 + i;
    txIds.set(tx, id);
    txRows.push([id, acct.id, iso(tx.at), tx.amount, tx.amount >= 0 ? 'credit' : 'debit', tx.channel, tx.category, tx.desc, tx.merchant, tx.mcc, bal, tx.ref]);
  });
  stmts.sort((p, q) => p.month - q.month || (p.acct.id < q.acct.id ? -1 : p.acct.id > q.acct.id ? 1 : 0));
  stmts.forEach((s, i) => {
    const lastDay = Date.UTC(new Date(s.month).getUTCFullYear(), new Date(s.month).getUTCMonth() + 1, 0);
    const periodStart = Math.max(s.month, Math.floor(s.acct.open / DAY) * DAY);
    statementRows.push([textId('stm', i + 1, 7), s.acct.id, isoDate(lastDay), isoDate(periodStart), s.open, s.credits, s.debits, s.close, s.count]);
  });

  // Fraud alerts on card transactions.
  const alertRows: Cell[][] = [];
  let alertN = 0;
  for (const { tx, acct } of all) {
    if (tx.channel !== 'card') continue;
    const big = -tx.amount > 300;
    if (!rng.chance(big ? 0.12 : tx.category === 'travel' ? 0.08 : 0.012)) continue;
    const createdAt = tx.at + rng.int(1, 20) * 1000;
    if (createdAt >= END) continue;
    alertN++;
    const confirmed = rng.chance(0.12);
    const status = createdAt > END - 3 * DAY && rng.chance(0.6) ? 'open' : confirmed ? 'confirmed_fraud' : 'false_positive';
    const resolvedAt = status === 'open' ? null : createdAt + rng.int(10, 72 * 60) * MINUTE;
    alertRows.push([
      textId('fra', alertN, 5), txIds.get(tx) ?? 0, acct.id, iso(createdAt),
      big ? 'large_amount' : tx.category === 'travel' ? rng.pick(['geo_mismatch', 'card_not_present']) : rng.pick(['unusual_merchant', 'velocity', 'card_not_present']),
      Math.min(99, Math.round(rng.normal(confirmed ? 82 : 64, 10, 40, 99))), status,
      resolvedAt === null || resolvedAt >= END ? null : iso(resolvedAt),
    ]);
  }

  return new Map<string, Cell[][]>([
    ['customers', customerRows],
    ['accounts', accountRows],
    ['transactions', txRows],
    ['statements', statementRows],
    ['fraud_alerts', alertRows],
  ]);
}

export const banking: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'finance',
  name: 'Retail banking',
  description:
    'A synthetic sample of 65 retail customers of a community bank, 2023-2025: checking, savings and credit card accounts, every posted transaction with running balances (payroll, rent, bills, card spend, transfers, interest, fees), monthly statements that reconcile, and card fraud alerts.',
  schema: 'demo_banking',
  tables: TABLES,
  generate,
};

