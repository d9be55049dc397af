import t from 'tap';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ limits: { bodyLimitBytes: 4096 } });
});
t.teardown(() => srv.close());

t.test('signup answers 201 with a svc_conn_ key, org id, trial and expiry; the key is stored only as a hash', async (t) => {
  const r = await api<{ apiKey: string; orgId: string; trial: { queries: number; egressBytes: number }; expiresAt: string }>(srv.url, 'POST', '/v1/agent/account', {
    body: { orgName: 'Acme', agentName: 'bot', headless: true },
  });
  t.equal(r.status, 201);
  t.match(r.body.apiKey, /^svc_conn_[A-Za-z0-9_-]{43}$/);
  t.match(r.body.orgId, /^org_/);
  t.same(r.body.trial, { queries: 100, egressBytes: 5_000_000, days: 7, creditCents: 100 });
  const expires = Date.parse(r.body.expiresAt) - Date.now();
  t.ok(expires > 6.9 * 86_400_000 && expires <= 7 * 86_400_000, 'trial lasts 7 days');
  const rows = await srv.svc.store.query<{ key_hash: string }>('SELECT key_hash FROM agent_keys');
  t.ok(rows.length >= 1);
  for (const row of rows) t.not(row.key_hash, r.body.apiKey);
  const dump = JSON.stringify(await srv.svc.store.query('SELECT * FROM agent_keys'));
  t.notOk(dump.includes(r.body.apiKey.slice(9)), 'the key itself is nowhere in the store');
  // two signups never share a key or an org
  const b = await signupAgent(srv.url);
  t.not(b.key, r.body.apiKey);
  t.not(b.orgId, r.body.orgId);
});

t.test('every agent path needs a valid bearer key', async (t) => {
  const a = await signupAgent(srv.url);
  const paths: [string, string][] = [
    ['GET', '/v1/connections/targets'],
    ['GET', '/v1/connections/targets/demo-healthcare'],
    ['GET', '/v1/connections/packs'],
    ['GET', '/v1/connections'],
    ['POST', '/v1/connections'],
    ['GET', '/v1/connections/conn_x'],
    ['POST', '/v1/connections/conn_x/query'],
    ['POST', '/v1/connections/conn_x/revoke'],
    ['GET', '/v1/connections/conn_x/audit'],
    ['GET', '/v1/audit/verify?connection_id=conn_x'],
    ['GET', '/v1/agent/account/usage'],
    ['GET', '/v1/agent/billing/config'],
    ['POST', '/v1/agent/topup'],
  ];
  for (const [method, path] of paths) {
    const none = await api(srv.url, method, path, { body: method === 'POST' ? {} : undefined });
    t.equal(none.status, 401, `${method} ${path} without key`);
    t.match(none.body, { error: { code: 'unauthorized', message: /Authorization/ } });
    const bad = await api(srv.url, method, path, { key: 'svc_conn_' + 'A'.repeat(43), body: method === 'POST' ? {} : undefined });
    t.equal(bad.status, 401, `${method} ${path} unknown key`);
    const malformed = await api(srv.url, method, path, { headers: { authorization: `Basic ${a.key}` } });
    t.equal(malformed.status, 401, `${method} ${path} wrong scheme`);
  }
  const ok = await api(srv.url, 'GET', '/v1/connections/targets', { key: a.key });
  t.equal(ok.status, 200);
  // a revoked key stops working at once
  await srv.svc.store.query('UPDATE agent_keys SET revoked_at = now() WHERE org_id = $1', [a.orgId]);
  t.equal((await api(srv.url, 'GET', '/v1/connections/targets', { key: a.key })).status, 401);
});

t.test('dashboard-owned paths answer 501 dashboard_only naming the dashboard', async (t) => {
  for (const [method, path] of [
    ['GET', '/v1/auth/status'],
    ['POST', '/v1/auth/login'],
    ['GET', '/v1/keys'],
    ['DELETE', '/v1/keys/key_1'],
    ['POST', '/v1/agent/keys'],
  ] as const) {
    const r = await api<{ error: { code: string; message: string } }>(srv.url, method, path);
    t.equal(r.status, 501, `${method} ${path}`);
    t.equal(r.body.error.code, 'dashboard_only');
    t.match(r.body.error.message, srv.config.dashboardUrl);
  }
});

t.test('bad input is a 4xx with a coded body, never a 500 or a stack trace', async (t) => {
  const a = await signupAgent(srv.url);
  const cases: { name: string; method: string; path: string; raw?: string; body?: unknown; headers?: Record<string, string>; status: number; code: string; field?: string }[] = [
    { name: 'malformed JSON', method: 'POST', path: '/v1/agent/account', raw: '{"orgName": "x",', status: 400, code: 'invalid_request' },
    { name: 'JSON array instead of object', method: 'POST', path: '/v1/agent/account', raw: '[1,2]', status: 400, code: 'invalid_request' },
    { name: 'missing field', method: 'POST', path: '/v1/agent/account', body: { orgName: 'x' }, status: 400, code: 'invalid_request', field: 'agentName' },
    { name: 'wrong type', method: 'POST', path: '/v1/agent/account', body: { orgName: 1, agentName: 'y' }, status: 400, code: 'invalid_request', field: 'orgName' },
    { name: 'blank name', method: 'POST', path: '/v1/agent/account', body: { orgName: '   ', agentName: 'y' }, status: 400, code: 'invalid_request', field: 'orgName' },
    { name: 'unknown field', method: 'POST', path: '/v1/agent/account', body: { orgName: 'x', agentName: 'y', admin: true }, status: 400, code: 'invalid_request', field: 'admin' },
    { name: 'body over the limit', method: 'POST', path: '/v1/agent/account', body: { orgName: 'x'.repeat(5000), agentName: 'y' }, status: 413, code: 'payload_too_large' },
    { name: 'not JSON', method: 'POST', path: '/v1/agent/account', raw: 'orgName=x', headers: { 'content-type': 'text/plain' }, status: 415, code: 'unsupported_media_type' },
    { name: 'empty JSON body', method: 'POST', path: '/v1/agent/account', raw: '', headers: { 'content-type': 'application/json' }, status: 400, code: 'invalid_request' },
    { name: 'unknown route', method: 'GET', path: '/v1/nope', status: 404, code: 'not_found' },
    { name: 'query sql of wrong type', method: 'POST', path: '/v1/connections/conn_x/query', body: { sql: 42 }, status: 400, code: 'invalid_request', field: 'sql' },
    { name: 'ttl as string', method: 'POST', path: '/v1/connections', body: { target_id: 'demo-healthcare', scopes: ['read:*'], ttl_seconds: '60' }, status: 400, code: 'invalid_request', field: 'ttl_seconds' },
    { name: 'topup negative', method: 'POST', path: '/v1/agent/topup', body: { amount_cents: -5 }, status: 400, code: 'invalid_request', field: 'amount_cents' },
    { name: 'topup fractional', method: 'POST', path: '/v1/agent/topup', body: { amount_cents: 1.5 }, status: 400, code: 'invalid_request', field: 'amount_cents' },
    { name: 'prototype pollution attempt', method: 'POST', path: '/v1/agent/account', raw: '{"orgName":"x","agentName":"y","__proto__":{"admin":true}}', status: 400, code: 'invalid_request' },
  ];
  for (const c of cases) {
    const r = await api<{ error: { code: string; message: string; details?: { field?: string }; request_id?: string } }>(srv.url, c.method, c.path, {
      key: a.key,
      ...(c.raw !== undefined ? { raw: c.raw } : {}),
      ...(c.body !== undefined ? { body: c.body } : {}),
      ...(c.headers ? { headers: c.headers } : {}),
    });
    t.equal(r.status, c.status, `${c.name}: status`);
    t.equal(r.body?.error?.code, c.code, `${c.name}: code`);
    t.type(r.body?.error?.message, 'string', `${c.name}: message`);
    t.match(r.body?.error?.request_id, /^req_/, `${c.name}: request id`);
    if (c.field) t.equal(r.body.error.details?.field, c.field, `${c.name}: field`);
    t.notMatch(r.text, /at .*\.(ts|js):\d+/, `${c.name}: no stack trace`);
  }
});
