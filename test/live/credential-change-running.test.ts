/**
 * Replacing or deleting an organization's database credential stops what runs with the old one on
 * this replica: a `postgres` statement already running is cancelled at the database and answered
 * `503 service_unavailable` (`details.reason: "credential_changed"`), audited, and not charged;
 * the next statement runs with the current credential. (Before, a running statement ran on to its
 * end or deadline with the credential its organization had just withdrawn, and returned rows.)
 *
 * A real PostgreSQL (PGlite cannot interrupt a running statement), the real control plane over
 * HTTP, the credential replaced and deleted through the API.
 */
import t from 'tap';
import { ordersOnRealPostgres, withSslmode } from '../helpers/customer-db.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import type { TapTest } from '../helpers/tap.js';

type Answer = { status: number; body: { error?: { code?: string; details?: Record<string, unknown> }; rows?: unknown[] } };
const SLOW = 'SELECT count(*) AS n FROM orders a, orders b, orders c';

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 60_000 } });
});
t.teardown(() => srv.close());

/** `change` while a slow statement runs on a new agent's `postgres` connection; that statement's answer, the usage before and after, and the agent */
async function changeWhileRunning(t: TapTest, prefix: string, change: (key: string, url: string) => Promise<void>) {
  const customer = await ordersOnRealPostgres(t, prefix, 2000);
  if (!customer) return undefined;
  const a = await signupAgent(srv.url, prefix);
  const put = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: withSslmode(customer.db.url) } });
  t.equal(put.status, 201, put.text);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:orders']);
  const usage = async () => (await api<Record<string, unknown>>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  const before = await usage();
  const running = api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: SLOW } }) as Promise<Answer>;
  // running at the database: a backend of this database other than the test's own is active (the
  // statement, or the FETCH of its cursor)
  const active = async () => (await customer.client.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND datname = current_database() AND pid <> pg_backend_pid()")).rows[0]?.n ?? 0;
  let ended: Answer | undefined;
  void running.then((a) => (ended = a));
  for (let i = 0; i < 500 && !ended && (await active()) === 0; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(await active(), 1, `the statement runs at the database${ended ? ` (it answered ${ended.status} ${JSON.stringify(ended.body).slice(0, 300)})` : ''}`);
  await change(a.key, customer.db.url);
  const answer = await running;
  let left = await active();
  for (let i = 0; i < 100 && left > 0; i++) left = (await new Promise((r) => setTimeout(r, 50)), await active());
  t.equal(left, 0, 'nothing of it runs at the database any more: cancelled there');
  return { answer, before, after: await usage(), key: a.key, conn, url: customer.db.url };
}

function assertStopped(t: TapTest, r: NonNullable<Awaited<ReturnType<typeof changeWhileRunning>>>): void {
  t.equal(r.answer.status, 503, JSON.stringify(r.answer.body).slice(0, 300));
  t.equal(r.answer.body.error?.code, 'service_unavailable');
  t.equal(r.answer.body.error?.details?.['reason'], 'credential_changed');
  t.equal(r.answer.body.rows, undefined, 'no rows');
  t.same(r.after, r.before, 'nothing charged');
}

t.test('deleting the credential stops a statement running with it', async (t) => {
  const r = await changeWhileRunning(t, 'svc_cred_delete', async (key) => {
    const del = await api(srv.url, 'DELETE', '/v1/connections/credentials/postgres', { key });
    t.equal(del.status, 200, del.text);
  });
  if (!r) return;
  assertStopped(t, r);
  type Event = { type?: string; error_code?: string | null; outcome?: string };
  const audit = await api<{ events: (Event & { body?: Event })[] }>(srv.url, 'GET', `/v1/connections/${r.conn}/audit`, { key: r.key });
  const q = audit.body.events.map((e) => e.body ?? e).filter((b) => b.type === 'query');
  t.match(q, [{ outcome: 'error', error_code: 'service_unavailable' }], 'audited as stopped');
  const after = await api<Answer['body']>(srv.url, 'POST', `/v1/connections/${r.conn}/query`, { key: r.key, body: { sql: 'SELECT id FROM orders WHERE id = 1' } });
  t.equal(after.status, 400, 'with no credential the next statement is refused');
});

t.test('replacing the credential stops a statement running with the old one; the next runs with the new one', async (t) => {
  const r = await changeWhileRunning(t, 'svc_cred_replace', async (key, url) => {
    const put = await api<{ replaced: boolean }>(srv.url, 'POST', '/v1/connections/credentials', { key, body: { connector_kind: 'postgres', secret: withSslmode(url) } });
    t.equal(put.status, 201, put.text);
    t.equal(put.body.replaced, true);
  });
  if (!r) return;
  assertStopped(t, r);
  const next = await api<{ rows: unknown[] }>(srv.url, 'POST', `/v1/connections/${r.conn}/query`, { key: r.key, body: { sql: 'SELECT id FROM orders WHERE id = 1' } });
  t.equal(next.status, 200, next.text);
  t.same(next.body.rows, [{ id: 1 }]);
});
