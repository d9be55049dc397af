/**
 * A whole bring-your-own-credential flow with the server logging at `trace`: every log line,
 * every response body (errors included) and every audit event is searched for the secrets, and
 * nothing is found. Then master-key rotation: credentials sealed with the previous key stay
 * readable while it is listed in SVC_MASTER_KEY_PREVIOUS, and fail cleanly when it is not.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, signupAgent, startServer, tempDir, type ApiResponse } from '../helpers/server.js';

let db: CustomerDatabase;
t.before(async () => {
  db = await customerDatabase('svc_cred_leak');
  const { default: pg } = await import('pg');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query('CREATE TABLE orders (id int, tenant_id int, total numeric)');
  await c.query('INSERT INTO orders SELECT g, g % 3, g FROM generate_series(1, 50) g');
  await c.end();
});
t.teardown(() => db?.drop());

/** the customer URL with a password in it (trust and PGlite ignore it; it still travels everywhere a leak could) */
function withPassword(url: string, password: string): string {
  const u = new URL(url);
  u.username = u.username || 'postgres';
  u.password = password;
  u.searchParams.set('sslmode', 'disable');
  return u.toString();
}

t.test('no secret in any log line, response body or audit event', async (t) => {
  const canary = `Canary-${randomBytes(12).toString('hex')}`;
  const pgSecret = withPassword(db.url, canary);
  const stripeSecret = `rk_test_${randomBytes(16).toString('hex')}`;
  const refusedStripe = `sk_live_${randomBytes(16).toString('hex')}`;
  const badUrl = `postgres://u:${canary}@db.example.com:99999/app`;
  const needles = [canary, pgSecret, stripeSecret.slice(0, -4), refusedStripe, encodeURIComponent(canary)];

  const logs = new PassThrough();
  const lines: string[] = [];
  logs.on('data', (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
  const srv = await startServer({ env: { LOG_LEVEL: 'trace', SVC_LIVE_ALLOW_PRIVATE: '1' }, logStream: logs, limits: { queryTimeoutMs: 1500 } });
  t.teardown(() => srv.close());

  const bodies: ApiResponse[] = [];
  const call = async <T = Record<string, unknown>>(method: string, path: string, key: string, body?: unknown): Promise<ApiResponse<T>> => {
    const r = await api<T>(srv.url, method, path, { key, ...(body !== undefined ? { body } : {}) });
    bodies.push(r as ApiResponse);
    return r;
  };

  const a = await signupAgent(srv.url);
  t.equal((await call('POST', '/v1/connections/credentials', a.key, { connector_kind: 'postgres', secret: badUrl })).status, 400);
  t.equal((await call('POST', '/v1/connections/credentials', a.key, { connector_kind: 'stripe', secret: refusedStripe })).status, 400);
  t.equal((await call('POST', '/v1/connections/credentials', a.key, { connector_kind: 'mysql', secret: pgSecret })).status, 400, 'a postgres URL for mysql is refused');
  t.equal((await call('POST', '/v1/connections/credentials', a.key, { connector_kind: 'stripe', secret: stripeSecret })).status, 201);
  t.equal((await call('POST', '/v1/connections/credentials', a.key, { connector_kind: 'postgres', secret: pgSecret })).status, 201);
  t.equal((await call('POST', '/v1/connections/credentials', a.key, { connector_kind: 'postgres', secret: pgSecret })).status, 201, 'replaced');
  await call('GET', '/v1/connections/credentials', a.key);
  await call('GET', '/v1/connections/credentials/kinds', a.key);

  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.orders', 'filter:public.orders.tenant_id=1']);
  const slow = 'SELECT count(*) FROM orders a, orders b, orders c, orders d, orders e, orders f, orders g, orders h, orders i';
  // the PGlite fallback cannot interrupt a running statement: the deadline path needs a real PostgreSQL
  for (const sql of ['SELECT count(*) AS n FROM orders', 'SELECT * FROM secrets', 'SELECT nope FROM orders', 'DELETE FROM orders', 'SELECT 1; SELECT 2', ...(db.cancelAtDatabase ? [slow] : [])]) {
    await call('POST', `/v1/connections/${conn}/query`, a.key, { sql });
  }
  t.equal(bodies.filter((b) => b.status === 200 && 'rows' in (b.body as object)).length, 1, 'one query answered');

  // the server refuses the credential (no such database): the error names the kind, not the URL
  const u = new URL(pgSecret);
  u.pathname = '/svc_missing_db_for_leak_test';
  await call('POST', '/v1/connections/credentials', a.key, { connector_kind: 'postgres', secret: u.toString() });
  await call('POST', `/v1/connections/${conn}/query`, a.key, { sql: 'SELECT 1 AS x FROM orders' });
  // nothing listens there
  await call('POST', '/v1/connections/credentials', a.key, { connector_kind: 'postgres', secret: `postgres://u:${canary}@127.0.0.1:1/app?sslmode=disable` });
  await call('POST', `/v1/connections/${conn}/query`, a.key, { sql: 'SELECT 1 AS x FROM orders' });
  await call('DELETE', '/v1/connections/credentials/postgres', a.key);
  const after = await call<{ error: { code: string } }>('POST', `/v1/connections/${conn}/query`, a.key, { sql: 'SELECT 1 AS x FROM orders' });
  t.equal(after.status, 400);
  await call('GET', `/v1/connections/${conn}/audit`, a.key);
  const jsonl = await fetch(`${srv.url}/v1/connections/${conn}/audit?format=jsonl`, { headers: { authorization: `Bearer ${a.key}` } });
  const auditText = await jsonl.text();
  const queries = bodies.filter((b) => ('rows' in (b.body as object) || JSON.stringify(b.body).includes('audit_event_id'))).length;
  t.equal(auditText.split('\n').filter(Boolean).length, queries, `every query was audited (${queries})`);
  await call('GET', `/v1/audit/verify?connection_id=${conn}`, a.key);

  // and what the store holds about the credential is sealed
  const stored = await srv.svc.store.query<{ sealed: string }>('SELECT sealed FROM credentials');
  t.ok(stored.length >= 1);

  await new Promise((r) => setTimeout(r, 100)); // the last log lines are written asynchronously
  t.ok(lines.length > 20, `the server logged (${lines.length} lines)`);
  const haystacks: [string, string][] = [
    ...lines.map((l, i): [string, string] => [`log line ${i}`, l]),
    ...bodies.map((b, i): [string, string] => [`response ${i} (${b.status})`, b.text]),
    ['audit export', auditText],
    ...stored.map((s, i): [string, string] => [`stored row ${i}`, s.sealed]),
  ];
  let found = 0;
  for (const [where, text] of haystacks) {
    for (const n of needles) {
      if (text.includes(n)) {
        found++;
        t.fail(`secret found in ${where}: ${text.slice(0, 300)}`);
      }
    }
  }
  t.equal(found, 0, `no secret in ${haystacks.length} places searched`);
});

t.test('master-key rotation: previous keys still open what they sealed', async (t) => {
  const dir = await tempDir();
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const k1 = randomBytes(32).toString('hex');
  const k2 = randomBytes(32).toString('base64');
  const secret = withPassword(db.url, 'rotation-pw');

  let srv = await startServer({ dataDir: dir, demoWorkers: 1, env: { SVC_MASTER_KEY: k1, SVC_LIVE_ALLOW_PRIVATE: '1' } });
  const a = await signupAgent(srv.url);
  t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret } })).status, 201);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:orders']);
  const q = () => api<{ rows: { n: number }[]; error?: { code: string; details: { reason: string } } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*)::int AS n FROM orders' } });
  t.same((await q()).body.rows, [{ n: 50 }]);
  const [before] = await srv.svc.store.query<{ key_id: string }>('SELECT key_id FROM credentials');
  await srv.close();

  // rotated: the new key seals, the old one is still listed
  srv = await startServer({ dataDir: dir, demoWorkers: 1, env: { SVC_MASTER_KEY: k2, SVC_MASTER_KEY_PREVIOUS: k1, SVC_LIVE_ALLOW_PRIVATE: '1' } });
  const r = await q();
  t.equal(r.status, 200, 'a credential sealed with the previous key is still readable');
  t.same(r.body.rows, [{ n: 50 }]);
  const b = await signupAgent(srv.url, 'Second Org');
  await api(srv.url, 'POST', '/v1/connections/credentials', { key: b.key, body: { connector_kind: 'postgres', secret } });
  const ids = await srv.svc.store.query<{ org_id: string; key_id: string }>('SELECT org_id, key_id FROM credentials');
  const newer = ids.find((x) => x.org_id === b.orgId);
  t.not(newer?.key_id, before?.key_id, 'new credentials are sealed with the new key');
  // at start the control plane re-seals what a previous key sealed
  let left = 1;
  for (let i = 0; i < 100 && left > 0; i++) {
    left = (await srv.svc.store.query('SELECT 1 FROM credentials WHERE key_id = $1', [before?.key_id])).length;
    if (left > 0) await new Promise((res) => setTimeout(res, 50));
  }
  t.equal(left, 0, 'every credential moved to the new key');
  t.equal(await srv.svc.services.credentials.reseal(), 0, 'and re-sealing again finds nothing to do');
  await srv.close();

  // the old key gone: the re-sealed credential still opens
  srv = await startServer({ dataDir: dir, demoWorkers: 1, env: { SVC_MASTER_KEY: k2, SVC_LIVE_ALLOW_PRIVATE: '1' } });
  t.equal((await q()).status, 200, 're-sealed credentials need only the new key');
  await srv.close();

  // a key that never sealed it: a clean 400 naming the kind to register again
  srv = await startServer({ dataDir: dir, demoWorkers: 1, env: { SVC_MASTER_KEY: randomBytes(32).toString('hex'), SVC_LIVE_ALLOW_PRIVATE: '1' } });
  const lost = await q();
  t.equal(lost.status, 400);
  t.equal(lost.body.error?.details.reason, 'credential_unreadable');
  await srv.close();
});
