/**
 * docs/api.md, "Errors", `400 invalid_request`: `details.field` says which field, `details.in`
 * where, and "a value that is none of the ones a field takes gets `details.allowed`, the list of
 * them, also named in the message". The body checks done by a handler rather than by the route's
 * schema (a tier the target does not offer, an unknown mock scenario, an unknown credential kind)
 * answer the same way as a schema's enum (`?kind=nope`, `mode: "nope"`), keeping their older
 * detail (`tiers`, `scenarios`, `kinds`) beside it.
 */
import t from 'tap';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

type Refusal = { error?: { code?: string; message?: string; details?: Record<string, unknown> } };

t.test('a value that is none of the ones a field takes: details.field, details.in and details.allowed', async (t) => {
  const a = await signupAgent(srv.url);
  const cases: { what: string; method: string; path: string; body: unknown; field: string; older: string }[] = [
    { what: 'a tier the target does not offer', method: 'POST', path: '/v1/connections', body: { target_id: 'demo-healthcare', scopes: ['read:*'], tier: 'gpu' }, field: 'tier', older: 'tiers' },
    { what: 'an unknown mock scenario', method: 'POST', path: '/v1/webhooks/trigger-mock-event', body: { scenario_id: 'nope' }, field: 'scenario_id', older: 'scenarios' },
    { what: 'an unknown credential kind', method: 'POST', path: '/v1/connections/credentials', body: { connector_kind: 'nope', secret: 'x' }, field: 'connector_kind', older: 'kinds' },
  ];
  for (const c of cases) {
    const r = await api<Refusal>(srv.url, c.method, c.path, { key: a.key, body: c.body });
    t.equal(r.status, 400, `${c.what}: 400`);
    const d = r.body.error?.details ?? {};
    t.equal(r.body.error?.code, 'invalid_request', `${c.what}: invalid_request`);
    t.equal(d['field'], c.field, `${c.what}: details.field`);
    t.equal(d['in'], 'body', `${c.what}: details.in`);
    t.ok(Array.isArray(d['allowed']) && (d['allowed'] as unknown[]).length > 0, `${c.what}: details.allowed lists the values (${JSON.stringify(d)})`);
    t.same(d['allowed'], d[c.older], `${c.what}: the same list as details.${c.older}`);
    for (const v of (d['allowed'] as string[] | undefined) ?? []) t.match(r.body.error?.message ?? '', v, `${c.what}: the message names ${v}`);
  }
});

t.test("every invalid_request naming a field says where it is, also when a handler's own check refused it", async (t) => {
  // found by a new user's walk through the docs: these answered details.field alone
  const a = await signupAgent(srv.url);
  const cases: { what: string; method: string; path: string; body: unknown; field: string }[] = [
    { what: 'a top-up below the minimum', method: 'POST', path: '/v1/agent/topup', body: { amount_cents: 50 }, field: 'amount_cents' },
    { what: 'a webhook secret too short', method: 'POST', path: '/v1/agent/webhook', body: { url: 'https://hooks.example.com/in', secret: 'short' }, field: 'secret' },
    { what: 'a credential secret that is not a URL', method: 'POST', path: '/v1/connections/credentials', body: { connector_kind: 'postgres', secret: 'not a url' }, field: 'secret' },
    { what: 'a nested credential option', method: 'POST', path: '/v1/connections/credentials', body: { connector_kind: 'postgres', secret: 'postgres://u:p@db.example.com/x', options: { sslmode: 'sometimes' } }, field: 'options.sslmode' },
  ];
  for (const c of cases) {
    const r = await api<Refusal>(srv.url, c.method, c.path, { key: a.key, body: c.body });
    t.equal(r.status, 400, `${c.what}: 400 (${r.text.slice(0, 200)})`);
    t.equal(r.body.error?.details?.['field'], c.field, `${c.what}: details.field`);
    t.equal(r.body.error?.details?.['in'], 'body', `${c.what}: details.in`);
  }
});
