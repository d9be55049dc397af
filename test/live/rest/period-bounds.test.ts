/**
 * `period:9999` is in the scope grammar; its end, 10000-01-01, is a date JavaScript's Date.parse
 * does not read in the four-digit form (NaN). The API targets turn periods into provider filters:
 * the windows stay finite numbers, a Salesforce query gets a CreatedDate it can read (the answer
 * was a 500), and Stripe a `created[lt]` that is a number.
 */
import t from 'tap';
import { periodInterval } from '../../../control-plane/catalogue/index.js';
import { windowsOf } from '../../../control-plane/live/rest/fetch.js';
import { connector, engines, json, provider, query } from './helpers.js';

t.teardown(() => engines.close());

t.test('windows of the last period of the grammar are finite', async (t) => {
  const last = periodInterval('9999');
  const dec = periodInterval('9999-12');
  if (!last || !dec) throw new Error('period:9999 is in the grammar');
  t.same(windowsOf([last]), [{ start: Date.UTC(9999, 0, 1), end: Date.UTC(9999, 0, 1) + 365 * 86_400_000 }]);
  t.same(windowsOf([dec]), [{ start: Date.UTC(9999, 11, 1), end: Date.UTC(9999, 11, 1) + 31 * 86_400_000 }]);
  const first = periodInterval('0001');
  if (!first) throw new Error('period:0001 is in the grammar');
  t.ok(windowsOf([first])?.every((w) => Number.isFinite(w.start) && Number.isFinite(w.end)), 'year 1 too');
});

const SF_TOKEN = '00D5g000000AbCdEAF!AQ4AQFakeTokenForTests.abcdefghijklmnop';

t.test('salesforce and stripe: period:9999 becomes filters the provider can read', async (t) => {
  const soql: string[] = [];
  const sf = await provider((req, res) => {
    soql.push(req.url.searchParams.get('q') ?? '');
    json(res, 200, { totalSize: 0, done: true, records: [] });
  });
  t.teardown(() => sf.close());
  const c = connector('salesforce', { salesforceApiBase: sf.base });
  const r = await query(c, ['read:accounts', 'period:9999'], 'SELECT count(*)::int AS n FROM accounts', { secret: SF_TOKEN, options: { instance_url: 'https://acme.my.salesforce.com' } });
  t.same(r.rows, [{ n: 0 }]);
  t.match(soql[0] ?? '', / WHERE CreatedDate >= 9999-01-01T00:00:00Z AND CreatedDate < 9999-12-31T23:59:59Z /, 'a SOQL datetime has four digits of year');

  const seen: URLSearchParams[] = [];
  const stripe = await provider((req, res) => {
    seen.push(req.url.searchParams);
    json(res, 200, { object: 'list', data: [], has_more: false });
  });
  t.teardown(() => stripe.close());
  const s = connector('stripe', { stripeApiBase: stripe.base });
  const sr = await query(s, ['read:charges', 'period:9999'], 'SELECT count(*)::int AS n FROM charges', { secret: 'rk_test_51HxABCDEFGHIJKLMNOPQRSTUV' });
  t.same(sr.rows, [{ n: 0 }]);
  t.equal(seen[0]?.get('created[lt]'), String(Date.UTC(10000, 0, 1) / 1000), 'created[lt] is the end in unix seconds');
});
