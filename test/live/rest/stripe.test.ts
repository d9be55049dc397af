/**
 * The stripe connector against a local server that follows Stripe's documented list API:
 * `GET /v1/<objects>?limit=&starting_after=&created[gte]=&created[lt]=`, newest first,
 * `{object: "list", data, has_more}`, errors `{error: {type, code, message}}`, 401 for a bad key
 * (whose message echoes part of the key, as Stripe's does), 429 with Retry-After.
 */
import t from 'tap';
import { ApiError } from '../../../control-plane/errors.js';
import { SqlPolicyError } from '../../../control-plane/query/sql/index.js';
import { restCredentialKinds } from '../../../control-plane/live/rest/index.js';
import { connector, engines, json, provider, query, series, unix, type Seen } from './helpers.js';

const KEY = 'rk_test_51HxAbCdEfGhIjKlMnOpQrStUv';
const N = 300;
const T0 = unix('2024-01-01T00:00:00Z');
const charges = series(N, T0, 12 * 3600).map((created, i) => ({
  id: `ch_${String(i).padStart(4, '0')}`,
  object: 'charge',
  amount: ((i * 37) % 1000) + 100,
  amount_captured: ((i * 37) % 1000) + 100,
  amount_refunded: i % 10 === 0 ? 50 : 0,
  currency: 'usd',
  status: i % 7 === 0 ? 'failed' : 'succeeded',
  paid: i % 7 !== 0,
  refunded: false,
  captured: true,
  customer: `cus_${i % 20}`,
  payment_intent: `pi_${i}`,
  description: i === 3 ? 'quote \' and "double" and \u0000 nul' : null,
  created,
  livemode: false,
  metadata: { order: String(i) },
}));
const customers = series(20, T0 - 86400 * 30, 3600).map((created, i) => ({ id: `cus_${i}`, object: 'customer', email: `c${i}@example.com`, name: `Customer ${i}`, created, balance: 0, delinquent: false, metadata: {} }));
const DATA: Record<string, { id: string; created: number }[]> = { charges, customers };

interface Mode {
  ignoreCreated?: boolean;
  rateLimitOnce?: boolean;
  hang?: boolean;
}

function stripe(mode: Mode = {}) {
  let limited = false;
  return provider((req: Seen, res) => {
    if (req.headers['authorization'] !== `Bearer ${KEY}`) {
      const given = String(req.headers['authorization'] ?? '').replace(/^Bearer /, '');
      return json(res, 401, { error: { type: 'invalid_request_error', message: `Invalid API Key provided: ${given.slice(0, 8)}****${given.slice(-4)}` } });
    }
    if (mode.hang) return; // never answers
    if (mode.rateLimitOnce && !limited) {
      limited = true;
      return json(res, 429, { error: { type: 'rate_limit_error', code: 'rate_limit', message: 'Too many requests' } }, { 'retry-after': '1' });
    }
    const m = /^\/v1\/([a-z_]+)$/.exec(req.path);
    const all = m ? DATA[m[1] as string] : undefined;
    if (!all) return json(res, 404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (GET: ${req.path})` } });
    const q = req.url.searchParams;
    const limit = Number(q.get('limit') ?? 10);
    if (!(limit >= 1 && limit <= 100)) return json(res, 400, { error: { type: 'invalid_request_error', code: 'parameter_invalid_integer', param: 'limit' } });
    let list = [...all].sort((a, b) => b.created - a.created || (a.id < b.id ? 1 : -1)); // newest first
    const gte = q.get('created[gte]');
    const lt = q.get('created[lt]');
    if (!mode.ignoreCreated) {
      if (gte) list = list.filter((o) => o.created >= Number(gte));
      if (lt) list = list.filter((o) => o.created < Number(lt));
    }
    const after = q.get('starting_after');
    if (after) list = list.slice(list.findIndex((o) => o.id === after) + 1);
    json(res, 200, { object: 'list', url: req.path, has_more: list.length > limit, data: list.slice(0, limit) });
  });
}

const truth = (from: string, to: string) => charges.filter((c) => c.created >= unix(from) && c.created < unix(to));

t.before(async () => {
  await engines.warm(); // an engine costs an initdb; the first query should not pay it under a 10 s deadline
});

t.test('period scope becomes created[gte]/created[lt]; only the table read is fetched; answer is exact', async (t) => {
  const p = await stripe();
  t.teardown(() => p.close());
  const c = connector('stripe', { stripeApiBase: p.base });
  const r = await query(c, ['read:*', 'period:2024-02'], 'SELECT count(*)::int AS n, sum(amount)::int AS total, min(created) AS first FROM charges', { secret: KEY });
  const want = truth('2024-02-01T00:00:00Z', '2024-03-01T00:00:00Z');
  t.same(r.rows, [{ n: want.length, total: want.reduce((s, x) => s + x.amount, 0), first: '2024-02-01T00:00:00.000Z' }]);
  t.equal(r.truncated, false);
  t.ok(p.seen.length >= 1);
  for (const s of p.seen) {
    t.equal(s.path, '/v1/charges', 'no other table is fetched');
    t.equal(s.url.searchParams.get('created[gte]'), String(unix('2024-02-01T00:00:00Z')));
    t.equal(s.url.searchParams.get('created[lt]'), String(unix('2024-03-01T00:00:00Z')));
  }
  t.equal(p.seen.length, 1, '58 objects in one page of up to 100');
});

t.test('two tables joined, two periods: both fetched per window, nothing else; values typed', async (t) => {
  const p = await stripe();
  t.teardown(() => p.close());
  const c = connector('stripe', { stripeApiBase: p.base });
  const r = await query(
    c,
    ['read:charges', 'read:customers', 'period:2023-12', 'period:2024-03'],
    "SELECT ch.id, ch.amount, ch.paid, ch.metadata->>'order' AS ord, cu.email FROM charges ch LEFT JOIN customers cu ON cu.id = ch.customer ORDER BY ch.created LIMIT 2",
    { secret: KEY },
  );
  const march = truth('2024-03-01T00:00:00Z', '2024-04-01T00:00:00Z');
  const first = march[0];
  // customers were all created in 2023-12, inside the first period
  t.same(r.rows[0], { id: first?.id, amount: first?.amount, paid: first?.paid, ord: first?.metadata.order, email: `c${first?.customer.slice(4)}@example.com` });
  t.equal(r.rows.length, 2);
  const paths = new Set(p.seen.map((s) => s.path));
  t.same([...paths].sort(), ['/v1/charges', '/v1/customers']);
  const windows = new Set(p.seen.map((s) => `${s.path} ${s.url.searchParams.get('created[gte]')}-${s.url.searchParams.get('created[lt]')}`));
  t.ok(windows.has(`/v1/charges ${unix('2023-12-01T00:00:00Z')}-${unix('2024-01-01T00:00:00Z')}`));
  t.ok(windows.has(`/v1/charges ${unix('2024-03-01T00:00:00Z')}-${unix('2024-04-01T00:00:00Z')}`));
});

t.test('a provider that ignores the created filter still yields only in-period rows', async (t) => {
  const p = await stripe({ ignoreCreated: true });
  t.teardown(() => p.close());
  const c = connector('stripe', { stripeApiBase: p.base });
  const r = await query(c, ['read:charges', 'period:2024-Q1'], 'SELECT count(*)::int AS n, max(created) AS last FROM charges', { secret: KEY });
  const want = truth('2024-01-01T00:00:00Z', '2024-04-01T00:00:00Z');
  t.same(r.rows, [{ n: want.length, last: new Date((want[want.length - 1]?.created ?? 0) * 1000).toISOString() }]);
});

t.test('pagination with starting_after stops at the row cap', async (t) => {
  const p = await stripe();
  t.teardown(() => p.close());
  const c = connector('stripe', { stripeApiBase: p.base });
  const r = await query(c, ['read:charges'], 'SELECT id, description FROM charges', { secret: KEY, maxRows: 150 });
  t.equal(r.rows.length, 150);
  t.equal(r.truncated, true);
  t.equal(p.seen.length, 2, 'two pages, not three');
  t.equal(p.seen[0]?.url.searchParams.get('limit'), '100');
  t.equal(p.seen[0]?.url.searchParams.get('starting_after'), null);
  t.equal(p.seen[1]?.url.searchParams.get('starting_after'), 'ch_0200', 'cursor is the last id of the previous page');
  t.equal(p.seen[1]?.url.searchParams.get('limit'), '51', 'asks only for what the cap still needs (+1)');
  t.same(new Set(r.rows.map((x) => x['id'])).size, 150);

  const all = await query(c, ['read:charges'], "SELECT count(*)::int AS n, count(*) FILTER (WHERE description LIKE 'quote '' and \"double\"%')::int AS q FROM charges", { secret: KEY });
  t.same(all.rows, [{ n: N, q: 1 }], 'every page read when under the cap; quotes and NUL survive loading');
  t.equal(all.truncated, false);
});

t.test('429 with Retry-After is waited out and retried', async (t) => {
  const p = await stripe({ rateLimitOnce: true });
  t.teardown(() => p.close());
  const c = connector('stripe', { stripeApiBase: p.base });
  const started = Date.now();
  const r = await query(c, ['read:customers'], 'SELECT count(*)::int AS n FROM customers', { secret: KEY });
  t.same(r.rows, [{ n: 20 }]);
  t.equal(p.seen.length, 2);
  t.ok(Date.now() - started >= 900, 'waited for Retry-After');
});

t.test('a rejected key is credential_rejected, naming the kind; the key never appears', async (t) => {
  const p = await stripe();
  t.teardown(() => p.close());
  const c = connector('stripe', { stripeApiBase: p.base });
  const bad = 'rk_live_ZZexpiredKEY0123456789';
  const err = await query(c, ['read:customers'], 'SELECT * FROM customers', { secret: bad }).catch((e: unknown) => e);
  t.ok(err instanceof ApiError);
  const e = err as ApiError;
  t.equal(e.code, 'invalid_request');
  t.equal(e.details?.['reason'], 'credential_rejected');
  t.equal(e.details?.['connector_kind'], 'stripe');
  const text = JSON.stringify({ m: e.message, d: e.details });
  t.notOk(text.includes(bad) || text.includes(bad.slice(-4)) || text.includes(bad.slice(0, 12)), 'no part of the key in the error');
});

t.test('the deadline stops a hanging provider: query_timeout', async (t) => {
  const p = await stripe({ hang: true });
  t.teardown(() => p.close());
  const c = connector('stripe', { stripeApiBase: p.base });
  const err = await query(c, ['read:customers'], 'SELECT * FROM customers', { secret: KEY, timeoutMs: 700 }).catch((e: unknown) => e);
  t.equal((err as ApiError).code, 'query_timeout');
});

t.test('hostile SQL is refused before any request, like on demo targets', async (t) => {
  const p = await stripe();
  t.teardown(() => p.close());
  const c = connector('stripe', { stripeApiBase: p.base });
  const cases: [string, string][] = [
    ['SELECT * FROM charges', 'table_not_in_scope'],
    ["SELECT pg_read_file('/etc/passwd')", 'function_not_allowed'],
    ['SELECT pg_sleep(10)', 'function_not_allowed'],
    ['SELECT * FROM pg_catalog.pg_authid', 'system_catalog'],
    ['SELECT * FROM stripe.refunds', 'table_not_in_scope'],
    ["INSERT INTO customers(id) VALUES ('x')", 'not_a_read'],
    ['SELECT 1; SELECT 2', 'multiple_statements'],
    ['SELECT * FROM customers FOR UPDATE', 'locking_clause'],
    ["COPY customers TO '/tmp/x'", 'not_a_read'],
    ['SELECT * FROM nope', 'unknown_table'],
  ];
  for (const [sql, reason] of cases) {
    const err = await query(c, ['read:customers'], sql, { secret: KEY }).catch((e: unknown) => e);
    t.ok(err instanceof SqlPolicyError, sql);
    t.equal((err as SqlPolicyError).detail.reason, reason, sql);
  }
  t.equal(p.seen.length, 0, 'nothing was fetched');
  const ok = await query(c, ['read:customers'], 'SELECT count(*)::int AS n FROM stripe.customers', { secret: KEY });
  t.same(ok.rows, [{ n: 20 }], 'the schema-qualified name works');
});

t.teardown(() => engines.close());

t.test('stripe credential kind: restricted keys only; messages never echo the key', async (t) => {
  const kind = restCredentialKinds.find((k) => k.kind === 'stripe');
  if (!kind) throw new Error('no stripe kind');
  t.same(kind.validate(KEY, {}), {});
  for (const secret of ['sk_live_51HxSECRETsecret0123456789', 'sk_test_abc123abc123abc', 'pk_live_abcdefabcdef1234', 'rk_prod_abcdefabcdef', 'rk_test_Xshort', 'hello']) {
    const err = (() => {
      try {
        kind.validate(secret, {});
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    t.ok(err instanceof ApiError, secret);
    t.equal((err as ApiError).code, 'invalid_request');
    t.equal((err as ApiError).details?.['field'], 'secret');
    t.notOk((err as ApiError).message.includes(secret), 'secret not echoed');
    t.notOk((err as ApiError).message.includes(secret.slice(-6)), 'no tail of the secret');
  }
  t.throws(() => kind.validate(KEY, { extra: 1 }), { code: 'invalid_request' });
});
