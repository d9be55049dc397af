/**
 * Stripe (https://docs.stripe.com/api): list endpoints `GET /v1/<objects>?limit=…`, cursor
 * pagination with `starting_after=<last id>` while `has_more`, `created[gte]`/`created[lt]` (unix
 * seconds) for the creation-time window, errors as `{"error": {"type", "code", "message"}}`.
 */
import type { ApiSpec, ColumnSpec, TableSpec } from '../spec.js';
import { arrayAt, col, endpoint, path, shortCode, timeOf, withQuery } from '../spec.js';

const unix = (name: string, description: string, from: string = name): ColumnSpec => ({
  name,
  type: 'timestamptz',
  description,
  get: (o) => timeOf(path(o, ...from.split('.')), 'unix'),
});

const ID = col('id', 'text', 'Object id');
const CREATED = unix('created', 'When the object was created (UTC); period: scopes restrict this column');
const CURRENCY = col('currency', 'text', 'Three-letter ISO currency code, lower case');
const METADATA = col('metadata', 'jsonb', 'Key-value metadata set by the account');
const LIVEMODE = col('livemode', 'boolean', 'Live mode (true) or test mode (false)');

function list(name: string, resource: string, description: string, columns: ColumnSpec[], extra: Record<string, string> = {}): TableSpec {
  return {
    name,
    description,
    columns,
    first: (base, window, pageSize) =>
      ({
        method: 'GET',
        url: withQuery(endpoint(base, `/v1/${resource}`), {
          limit: pageSize,
          ...extra,
          'created[gte]': window ? Math.ceil(window.start / 1000) : undefined,
          'created[lt]': window ? Math.ceil(window.end / 1000) : undefined,
        }),
      }),
    items: (body) => arrayAt(body, 'data'),
    next: (_base, previous, res, pageSize) => {
      if (path(res.body, 'has_more') !== true) return null;
      const data = arrayAt(res.body, 'data');
      const lastId = path(data[data.length - 1], 'id');
      if (typeof lastId !== 'string') return null;
      return { method: 'GET', url: withQuery(previous.url, { starting_after: lastId, limit: pageSize }) };
    },
    created: (o) => timeOf(o['created'], 'unix'),
  };
}

const amount = (name: string, description: string): ColumnSpec => col(name, 'bigint', `${description}, in the currency's smallest unit (e.g. cents)`);

export const STRIPE: ApiSpec = {
  id: 'stripe',
  provider: 'Stripe',
  defaultBase: 'https://api.stripe.com',
  maxPageSize: 100,
  base: (configured) => new URL(configured ?? 'https://api.stripe.com'),
  headers: (c) => ({ authorization: `Bearer ${c.secret}`, accept: 'application/json', 'stripe-version': '2024-06-20' }),
  errorCode: (body) => shortCode(path(body, 'error', 'code')) ?? shortCode(path(body, 'error', 'type')),
  tables: [
    list('customers', 'customers', 'Customers', [
      ID,
      col('email', 'text', 'Email address'),
      col('name', 'text', 'Full name or business name'),
      col('description', 'text', 'Description'),
      CURRENCY,
      amount('balance', 'Balance applied to the next invoice'),
      col('delinquent', 'boolean', 'Whether the latest invoice is unpaid past due'),
      CREATED,
      LIVEMODE,
      METADATA,
    ]),
    list('charges', 'charges', 'Charges', [
      ID,
      amount('amount', 'Amount'),
      amount('amount_captured', 'Amount captured'),
      amount('amount_refunded', 'Amount refunded'),
      CURRENCY,
      col('status', 'text', 'succeeded, pending or failed'),
      col('paid', 'boolean', 'Whether the charge succeeded'),
      col('refunded', 'boolean', 'Whether fully refunded'),
      col('captured', 'boolean', 'Whether captured'),
      col('customer', 'text', 'Customer id'),
      col('payment_intent', 'text', 'Payment intent id'),
      col('description', 'text', 'Description'),
      col('failure_code', 'text', 'Failure code, when failed'),
      CREATED,
      LIVEMODE,
      METADATA,
    ]),
    list('payment_intents', 'payment_intents', 'Payment intents', [
      ID,
      amount('amount', 'Amount intended to be collected'),
      amount('amount_received', 'Amount received'),
      CURRENCY,
      col('status', 'text', 'Status, e.g. succeeded, requires_payment_method, canceled'),
      col('customer', 'text', 'Customer id'),
      col('description', 'text', 'Description'),
      col('payment_method_types', 'jsonb', 'Payment method types allowed'),
      unix('canceled_at', 'When canceled'),
      CREATED,
      LIVEMODE,
      METADATA,
    ]),
    list('invoices', 'invoices', 'Invoices', [
      ID,
      col('number', 'text', 'Invoice number'),
      col('customer', 'text', 'Customer id'),
      col('subscription', 'text', 'Subscription id'),
      col('status', 'text', 'draft, open, paid, uncollectible or void'),
      CURRENCY,
      amount('amount_due', 'Amount due'),
      amount('amount_paid', 'Amount paid'),
      amount('amount_remaining', 'Amount remaining'),
      amount('subtotal', 'Subtotal'),
      amount('total', 'Total'),
      unix('due_date', 'Due date'),
      unix('period_start', 'Start of the billed period'),
      unix('period_end', 'End of the billed period'),
      CREATED,
      LIVEMODE,
      METADATA,
    ]),
    list(
      'subscriptions',
      'subscriptions',
      'Subscriptions (every status, canceled included)',
      [
        ID,
        col('customer', 'text', 'Customer id'),
        col('status', 'text', 'active, past_due, canceled, trialing, …'),
        CURRENCY,
        col('cancel_at_period_end', 'boolean', 'Whether it cancels at the end of the period'),
        unix('start_date', 'Start date'),
        unix('canceled_at', 'When canceled'),
        unix('ended_at', 'When ended'),
        col('items', 'jsonb', 'Subscription items (prices and quantities)', 'items.data'),
        CREATED,
        LIVEMODE,
        METADATA,
      ],
      { status: 'all' },
    ),
    list('refunds', 'refunds', 'Refunds', [
      ID,
      amount('amount', 'Amount refunded'),
      CURRENCY,
      col('status', 'text', 'pending, succeeded, failed or canceled'),
      col('charge', 'text', 'Charge id'),
      col('payment_intent', 'text', 'Payment intent id'),
      col('reason', 'text', 'duplicate, fraudulent or requested_by_customer'),
      CREATED,
      METADATA,
    ]),
    list('balance_transactions', 'balance_transactions', 'Balance transactions', [
      ID,
      amount('amount', 'Gross amount'),
      amount('fee', 'Fees'),
      amount('net', 'Net amount'),
      CURRENCY,
      col('type', 'text', 'charge, refund, payout, …'),
      col('status', 'text', 'available or pending'),
      col('source', 'text', 'Id of the object that caused it'),
      col('reporting_category', 'text', 'Reporting category'),
      col('description', 'text', 'Description'),
      unix('available_on', 'When the funds are available'),
      CREATED,
    ]),
  ],
};
