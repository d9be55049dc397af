/**
 * End to end through the real control plane: register a credential, open a connection on each
 * API target, POST a query; the provider stand-ins run on port 0 and the server reaches them
 * through the SVC_*_API_BASE variables. Every response body and audit export of the run is
 * searched for the secrets.
 */
import t from 'tap';
import { api, openConnection, signupAgent, startServer } from '../../helpers/server.js';
import { json, provider } from './helpers.js';

const STRIPE_KEY = 'rk_test_E2Eabcdefghijklmnop0123';
const GH_TOKEN = 'ghp_E2Eabcdefghijklmnopqrstuvwxyz01234';
const HS_TOKEN = 'pat-eu1-0a1b2c3d-aaaa-bbbb-cccc-ddddeeeeffff';
const SF_TOKEN = '00D5g000000E2EeEAF!AQ4AQe2eTokenForTheEndToEndTest';
const T0 = Date.parse('2024-01-01T00:00:00Z');

t.test('stripe, github, hubspot and salesforce answer queries through the API', async (t) => {
  const stripe = await provider((req, res) => {
    if (req.headers['authorization'] !== `Bearer ${STRIPE_KEY}`) return json(res, 401, { error: { type: 'invalid_request_error', message: `Invalid API Key provided: ${String(req.headers['authorization'])}` } });
    const gte = Number(req.url.searchParams.get('created[gte]') ?? 0);
    const data = Array.from({ length: 12 }, (_, i) => ({ id: `cus_${i}`, email: `c${i}@example.com`, created: T0 / 1000 + i * 30 * 86400 })).filter((c) => c.created >= gte).reverse();
    json(res, 200, { object: 'list', has_more: false, data });
  });
  const github = await provider((req, res) => json(res, 200, req.path === '/user/repos' ? [{ id: 1, full_name: 'acme/app', name: 'app', owner: { login: 'acme' }, private: true, created_at: '2024-05-01T00:00:00Z' }] : []));
  const hubspot = await provider((_req, res) => json(res, 200, { results: [{ id: '1', properties: { email: 'a@example.com', firstname: 'A' }, createdAt: '2024-02-02T00:00:00Z', updatedAt: '2024-02-02T00:00:00Z', archived: false }] }));
  const salesforce = await provider((_req, res) => json(res, 200, { totalSize: 1, done: true, records: [{ attributes: { type: 'Account' }, Id: '001A', Name: 'Acme', CreatedDate: '2024-03-03T00:00:00.000+0000' }] }));
  const srv = await startServer({
    env: { SVC_STRIPE_API_BASE: stripe.base, SVC_GITHUB_API_BASE: github.base, SVC_HUBSPOT_API_BASE: hubspot.base, SVC_SALESFORCE_API_BASE: salesforce.base },
  });
  t.teardown(async () => {
    await srv.close();
    await Promise.all([stripe, github, hubspot, salesforce].map((p) => p.close()));
  });
  // warm the server's query-engine pool (an engine costs an initdb); it ends with the server
  await srv.svc.restEngines.warm();
  const a = await signupAgent(srv.url);
  const texts: string[] = [];
  const call = async <T = Record<string, unknown>>(method: string, path: string, body?: unknown) => {
    const r = await api<T>(srv.url, method, path, { key: a.key, ...(body !== undefined ? { body } : {}) });
    texts.push(r.text);
    return r;
  };

  const sk = await call('POST', '/v1/connections/credentials', { connector_kind: 'stripe', secret: 'sk_live_FULLSECRETKEYabcdef012345' });
  t.equal(sk.status, 400);
  t.notOk(sk.text.includes('FULLSECRETKEY'), 'the refused key is not echoed');

  const creds: [string, string, Record<string, unknown>?][] = [
    ['stripe', STRIPE_KEY],
    ['github', GH_TOKEN],
    ['hubspot', HS_TOKEN],
    ['salesforce', SF_TOKEN, { instance_url: 'https://acme.my.salesforce.com' }],
  ];
  for (const [kind, secret, options] of creds) {
    const r = await call('POST', '/v1/connections/credentials', { connector_kind: kind, secret, ...(options ? { options } : {}) });
    t.equal(r.status, 201, `${kind} credential registered: ${r.text}`);
  }

  // customers every 30 days from 2024-01-01: cus_4 (Apr 30), cus_5 (May 30), cus_6 (Jun 29) are in 2024-Q2
  const cases: [string, string[], string, unknown[]][] = [
    ['stripe', ['read:customers', 'period:2024-Q2'], 'SELECT id, email FROM customers ORDER BY created', [{ id: 'cus_4', email: 'c4@example.com' }, { id: 'cus_5', email: 'c5@example.com' }, { id: 'cus_6', email: 'c6@example.com' }]],
    ['github', ['read:repositories'], 'SELECT full_name, private FROM repositories', [{ full_name: 'acme/app', private: true }]],
    ['hubspot', ['read:contacts'], 'SELECT email, firstname FROM contacts', [{ email: 'a@example.com', firstname: 'A' }]],
    ['salesforce', ['read:accounts'], 'SELECT id, name, created FROM accounts', [{ id: '001A', name: 'Acme', created: '2024-03-03T00:00:00.000Z' }]],
  ];
  for (const [target, scopes, sql, rows] of cases) {
    const conn = await openConnection(srv.url, a.key, target, scopes);
    const r = await call<{ rows: unknown[]; scope_applied: { tables_read: string[] } }>('POST', `/v1/connections/${conn}/query`, { sql });
    t.equal(r.status, 200, `${target}: ${r.text}`);
    t.same(r.body.rows, rows, target);
    const audit = await call('GET', `/v1/connections/${conn}/audit?format=jsonl`);
    t.equal(audit.status, 200);
  }
  t.ok(stripe.seen.every((s) => s.url.searchParams.get('created[gte]') === String(Date.parse('2024-04-01T00:00:00Z') / 1000)), 'period sent to Stripe');

  // the credential is rejected by the provider: a clear 400, no secret anywhere
  const wrong = 'rk_test_WRONGwrongWRONG012345';
  await call('POST', '/v1/connections/credentials', { connector_kind: 'stripe', secret: wrong });
  const conn = await openConnection(srv.url, a.key, 'stripe', ['read:customers']);
  const refused = await call<{ error: { code: string; details: { reason: string } } }>('POST', `/v1/connections/${conn}/query`, { sql: 'SELECT * FROM customers' });
  t.equal(refused.status, 400);
  t.equal(refused.body.error.details.reason, 'credential_rejected');
  await call('GET', `/v1/connections/${conn}/audit?format=jsonl`);
  const all = texts.join('\n');
  for (const secret of [STRIPE_KEY, GH_TOKEN, HS_TOKEN, SF_TOKEN, wrong]) t.notOk(all.includes(secret), 'no secret in any response or audit event');
});
