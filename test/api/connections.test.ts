import { createHash } from 'node:crypto';
import t from 'tap';
import { canon } from '../../control-plane/audit/index.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

type Err = { error: { code: string; message: string; details?: Record<string, unknown> } };

t.test('create validates target, scopes, tier and ttl', async (t) => {
  const a = await signupAgent(srv.url);
  const post = (body: Record<string, unknown>) => api<Err & { connectionId: string; audit_genesis_hash: string; expires_at: string; status: string }>(srv.url, 'POST', '/v1/connections', { key: a.key, body });

  const ok = await post({ target_id: 'demo-healthcare', scopes: ['read:encounters', 'period:2024-Q1'], tier: 'container', ttl_seconds: 600 });
  t.equal(ok.status, 201, ok.text);
  t.match(ok.body.connectionId, /^conn_/);
  t.match(ok.body.audit_genesis_hash, /^[0-9a-f]{64}$/);
  t.equal(ok.body.status, 'active');
  const ttl = Date.parse(ok.body.expires_at) - Date.now();
  t.ok(ttl > 590_000 && ttl <= 600_000);

  const defaults = await post({ target_id: 'demo-healthcare', scopes: ['read:*'] });
  t.equal(defaults.status, 201);
  t.match(defaults.body, { tier: 'container', ttl_seconds: 3600 });

  const cases: [string, Record<string, unknown>, number, string, RegExp?][] = [
    ['unknown target', { target_id: 'nope', scopes: ['read:*'] }, 404, 'not_found', /GET \/v1\/connections\/targets/],
    ['unknown table', { target_id: 'demo-healthcare', scopes: ['read:secrets'] }, 400, 'invalid_scope', /encounters/],
    ['unknown scope name', { target_id: 'demo-healthcare', scopes: ['read:*', 'write:encounters'] }, 400, 'invalid_scope', /period:<YYYY>/],
    ['no read scope', { target_id: 'demo-healthcare', scopes: ['period:2024'] }, 400, 'invalid_scope', /read:/],
    ['not name:value', { target_id: 'demo-healthcare', scopes: ['encounters'] }, 400, 'invalid_scope'],
    ['bad quarter', { target_id: 'demo-healthcare', scopes: ['read:*', 'period:2024-Q5'] }, 400, 'invalid_scope'],
    ['bad month', { target_id: 'demo-healthcare', scopes: ['read:*', 'period:2024-13'] }, 400, 'invalid_scope'],
    ['year zero', { target_id: 'demo-healthcare', scopes: ['read:*', 'period:0000'] }, 400, 'invalid_scope'],
    ['empty scopes', { target_id: 'demo-healthcare', scopes: [] }, 400, 'invalid_request'],
    ['unlisted tier', { target_id: 'demo-healthcare', scopes: ['read:*'], tier: 'gpu' }, 400, 'invalid_request', /container/],
    ['ttl 0', { target_id: 'demo-healthcare', scopes: ['read:*'], ttl_seconds: 0 }, 400, 'invalid_request'],
    ['ttl over 7 days', { target_id: 'demo-healthcare', scopes: ['read:*'], ttl_seconds: 604_801 }, 400, 'invalid_request'],
    ['ttl fractional', { target_id: 'demo-healthcare', scopes: ['read:*'], ttl_seconds: 1.5 }, 400, 'invalid_request'],
    ['relay without relay scope', { target_id: 'postgres-relay', scopes: ['read:public.orders'] }, 400, 'invalid_scope', /relay:/],
    ['unknown relay', { target_id: 'postgres-relay', scopes: ['relay:rly_nope', 'read:public.orders'] }, 404, 'not_found'],
    ['filter without its read scope', { target_id: 'postgres-relay', scopes: ['relay:rly_nope', 'read:public.orders', 'filter:public.users.id=1'] }, 400, 'invalid_scope'],
    ['malformed filter', { target_id: 'postgres-relay', scopes: ['relay:rly_nope', 'read:public.orders', 'filter:orders=1'] }, 400, 'invalid_scope'],
  ];
  for (const [name, body, status, code, message] of cases) {
    const r = await post(body);
    t.equal(r.status, status, `${name}: ${r.text}`);
    t.equal(r.body.error?.code, code, name);
    if (message) t.match(r.body.error.message, message, name);
  }
  t.equal((await post({ target_id: 'demo-healthcare', scopes: ['read:*'], ttl_seconds: 604_800 })).status, 201, 'ttl 7 days is the maximum');
  t.equal((await post({ target_id: 'demo-healthcare', scopes: ['read:*'], ttl_seconds: 1 })).status, 201, 'ttl 1 is the minimum');
});

t.test('list, get and revoke; revoked and expired connections answer 410', async (t) => {
  const a = await signupAgent(srv.url);
  const c1 = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const c2 = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients'], { ttl_seconds: 1 });
  const list = await api<{ connections: { connection_id: string }[] }>(srv.url, 'GET', '/v1/connections', { key: a.key });
  t.same(list.body.connections.map((c) => c.connection_id).sort(), [c1, c2].sort());

  const got = await api<{ connection_id: string; scopes: string[]; target_id: string }>(srv.url, 'GET', `/v1/connections/${c1}`, { key: a.key });
  t.equal(got.status, 200);
  t.same(got.body.scopes, ['read:patients']);

  const rev = await api<{ status: string; revoked_at: string }>(srv.url, 'POST', `/v1/connections/${c1}/revoke`, { key: a.key });
  t.equal(rev.status, 200);
  t.equal(rev.body.status, 'revoked');
  const again = await api<{ revoked_at: string }>(srv.url, 'POST', `/v1/connections/${c1}/revoke`, { key: a.key });
  t.equal(again.body.revoked_at, rev.body.revoked_at, 'revoking twice changes nothing');
  const q1 = await api<Err>(srv.url, 'POST', `/v1/connections/${c1}/query`, { key: a.key, body: { sql: 'SELECT 1' } });
  t.equal(q1.status, 410);
  t.equal(q1.body.error.code, 'connection_revoked');

  // wait out the 1-second TTL by the server's own clock
  const expiresAt = Date.parse((await api<{ expires_at: string }>(srv.url, 'GET', `/v1/connections/${c2}`, { key: a.key })).body.expires_at);
  await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now()) + 50));
  const q2 = await api<Err>(srv.url, 'POST', `/v1/connections/${c2}/query`, { key: a.key, body: { sql: 'SELECT 1' } });
  t.equal(q2.status, 410);
  t.equal(q2.body.error.code, 'connection_expired');
  t.match(q2.body.error.message, /POST \/v1\/connections/);

  const active = await api<{ connections: unknown[] }>(srv.url, 'GET', '/v1/connections?status=active', { key: a.key });
  t.equal(active.body.connections.length, 0);
  const revoked = await api<{ connections: { connection_id: string }[] }>(srv.url, 'GET', '/v1/connections?status=revoked', { key: a.key });
  t.same(revoked.body.connections.map((c) => c.connection_id), [c1]);

  // the revocation is in the audit chain, which still verifies
  const v = await api<{ verified: boolean; events_checked: number }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${c1}`, { key: a.key });
  t.match(v.body, { verified: true, events_checked: 2 });
});

t.test('another organization’s connection is not found, never forbidden', async (t) => {
  const a = await signupAgent(srv.url, 'A');
  const b = await signupAgent(srv.url, 'B');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  for (const [method, path, body] of [
    ['GET', `/v1/connections/${conn}`, undefined],
    ['POST', `/v1/connections/${conn}/query`, { sql: 'SELECT 1' }],
    ['POST', `/v1/connections/${conn}/revoke`, undefined],
    ['GET', `/v1/connections/${conn}/audit`, undefined],
    ['GET', `/v1/audit/verify?connection_id=${conn}`, undefined],
  ] as const) {
    const r = await api<Err>(srv.url, method, path, { key: b.key, ...(body ? { body } : {}) });
    t.equal(r.status, 404, `${method} ${path}`);
    t.equal(r.body.error.code, 'not_found');
  }
  const list = await api<{ connections: unknown[] }>(srv.url, 'GET', '/v1/connections', { key: b.key });
  t.same(list.body.connections, []);
  // and B's attempt left nothing in A's chain
  const v = await api<{ events_checked: number }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key });
  t.equal(v.body.events_checked, 0);
});

t.test('list pages with a cursor', async (t) => {
  const a = await signupAgent(srv.url);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push(await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']));
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const r: { body: { connections: { connection_id: string }[]; next_cursor: string | null } } = await api(srv.url, 'GET', `/v1/connections?limit=2${cursor ? `&cursor=${cursor}` : ''}`, { key: a.key });
    seen.push(...r.body.connections.map((c) => c.connection_id));
    cursor = r.body.next_cursor;
  } while (cursor);
  t.same(seen.sort(), ids.sort());
});

t.test('a Connection carries all the genesis hash is made of: an auditor recomputes it from GET alone', async (t) => {
  const a = await signupAgent(srv.url);
  const id = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters', 'period:2024-Q1']);
  const c = (await api<Record<string, unknown>>(srv.url, 'GET', `/v1/connections/${id}`, { key: a.key })).body;
  t.equal(c['org_id'], a.orgId);
  const input = { connection_id: c['connection_id'], org_id: c['org_id'], target_id: c['target_id'], scopes: c['scopes'], created_at: c['created_at'] };
  const genesis = createHash('sha256').update(`svc-audit-v1\n${canon(input)}`, 'utf8').digest('hex');
  t.equal(genesis, c['audit_genesis_hash'], 'sha256("svc-audit-v1\\n" + canon({connection_id, org_id, target_id, scopes, created_at}))');
});
