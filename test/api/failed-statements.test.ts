/**
 * What a failed statement costs, and how it is answered.
 *
 * - A statement the database rejects before running it (unknown column: SQLSTATE class 42) is
 *   free and counts against the key's refused-statement budget.
 * - A statement that ran at its source before it failed (a division by zero, a value the type
 *   cannot hold) used the engine: it is charged the query price with no egress, the error says
 *   so (`details.cost_cents`, `details.billed_to`), and it does not count as a refusal.
 * - A first row too large for any response is `400 invalid_sql` reason `row_too_large`; a first
 *   row that fits a response but not the trial egress this query could hold beside its
 *   organization's other running trial queries is `429 rate_limited` reason
 *   `trial_egress_held`. Both ran: charged the query price.
 * - A charge is made in the same transaction as the audit event, under the connection's row
 *   lock: a statement that fails after its key was revoked is answered 410 and not charged.
 * - A database error that quotes a huge value is answered with its message cut to 2,000
 *   characters.
 */
import t from 'tap';
import { api, openConnection, realPostgresAvailable, signupAgent, startServer, TEST_DATABASE_URL, type TestServer } from '../helpers/server.js';

interface Body {
  rows?: Record<string, unknown>[];
  cost_cents?: number;
  billed_to?: string;
  error?: { code: string; message: string; details?: Record<string, unknown> };
}
interface Usage {
  queries: number;
  trial: { queries_left: number; egress_bytes_left: number; egress_bytes_held: number };
}

let srv: TestServer;
t.before(async () => {
  srv = await startServer({
    env: { SVC_REFUSED_STATEMENTS_PER_MINUTE: '8', SVC_LIVE_ALLOW_PRIVATE: '1' },
    limits: { maxResultBytes: 1_000_000, queryTimeoutMs: 30_000 },
  });
});
t.teardown(() => srv.close());

const usage = async (key: string): Promise<Usage> => (await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key })).body;

t.test('a runtime failure is charged and not a refusal; a rejected statement is free and is one', async (t) => {
  const a = await signupAgent(srv.url, 'Failure Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const q = (sql: string) => api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });

  const before = await usage(a.key);
  t.equal(before.trial.egress_bytes_held, 0, 'usage reports the trial egress held (none while idle)');

  // eight runtime failures: past the refusal budget (8 a minute, bursts of 4) had they counted
  for (let i = 0; i < 8; i++) {
    const r = await q(`SELECT count(*) / (count(*) - count(*) + ${i} - ${i}) AS n FROM patients`);
    t.equal(r.status, 400, r.text);
    t.equal(r.body.error?.code, 'invalid_sql');
    t.equal(r.body.error?.details?.['sqlstate'], '22012', 'division by zero');
    t.equal(r.body.error?.details?.['cost_cents'], 0.5, 'charged the query price');
    t.equal(r.body.error?.details?.['billed_to'], 'trial');
    t.type(r.body.error?.details?.['audit_event_id'], 'string');
  }
  const afterRuntime = await usage(a.key);
  t.equal(before.trial.queries_left - afterRuntime.trial.queries_left, 8, 'eight trial queries used');
  t.equal(afterRuntime.trial.egress_bytes_left, before.trial.egress_bytes_left, 'no egress charged');
  t.equal(afterRuntime.trial.egress_bytes_held, 0, 'every hold was settled');

  // rejected before running (unknown column): free, and counted against the refusal budget
  const statuses: number[] = [];
  for (let i = 0; i < 8; i++) {
    const r = await q('SELECT no_such_column FROM patients');
    statuses.push(r.status);
    if (r.status === 400) t.notOk(r.body.error?.details && 'cost_cents' in r.body.error.details, 'a rejected statement is not charged');
  }
  t.same(statuses.slice(0, 4), [400, 400, 400, 400], `a burst of four refusals fits the budget (${statuses.join(',')})`);
  t.ok(statuses.slice(4).includes(429), 'then 429 refused_statements');
  const afterRejected = await usage(a.key);
  t.equal(afterRejected.trial.queries_left, afterRuntime.trial.queries_left, 'rejected statements used no trial query');

  const events = (await api<{ events: { type: string; outcome: string; cost_cents?: number }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key })).body.events;
  t.ok(events.filter((e) => e.type === 'query').length >= 10, 'every statement is audited');
});

t.test('first row too large: for any response 400; for this trial query beside others 429; both charged', async (t) => {
  const a = await signupAgent(srv.url, 'Row Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const q = (sql: string) => api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });

  const huge = await q("SELECT repeat('x', 2000000) AS v FROM patients LIMIT 1");
  t.equal(huge.status, 400, huge.text);
  t.equal(huge.body.error?.details?.['reason'], 'row_too_large');
  t.equal(huge.body.error?.details?.['cost_cents'], 0.5, 'it ran: charged');
  t.match(huge.body.error?.message ?? '', /left\(column, 1000\)/, 'says what to do');

  // another query of this organization holds trial egress: this one may hold at most 312,500 bytes
  await srv.svc.store.query('UPDATE orgs SET trial_egress_held = trial_egress_held + 1000 WHERE id = $1', [a.orgId]);
  const u0 = await usage(a.key);
  t.equal(u0.trial.egress_bytes_held, 1000);
  const beside = await q("SELECT repeat('x', 400000) AS v FROM patients LIMIT 1");
  t.equal(beside.status, 429, beside.text);
  t.equal(beside.body.error?.code, 'rate_limited');
  t.equal(beside.body.error?.details?.['reason'], 'trial_egress_held');
  // it ran: charged the query price (else one slow query kept running would make every other
  // statement with a large first row free and unlimited)
  t.equal(beside.body.error?.details?.['cost_cents'], 0.5, 'it ran: charged the query price');
  const u1 = await usage(a.key);
  t.equal(u1.trial.queries_left, u0.trial.queries_left - 1, 'one trial query used');
  t.equal(u1.trial.egress_bytes_left, u0.trial.egress_bytes_left, 'no egress charged');
  t.equal(u1.trial.egress_bytes_held, 1000, 'its hold was given back');

  // alone, the same row fits the response
  await srv.svc.store.query('UPDATE orgs SET trial_egress_held = trial_egress_held - 1000 WHERE id = $1', [a.orgId]);
  const alone = await q("SELECT repeat('x', 400000) AS v FROM patients LIMIT 1");
  t.equal(alone.status, 200, alone.text);
  t.equal(alone.body.rows?.length, 1);
});

t.test('a database error quoting a huge value is cut to 2,000 characters', async (t) => {
  if (!(await realPostgresAvailable())) return t.skip('no PostgreSQL server at TEST_DATABASE_URL', () => undefined);
  const a = await signupAgent(srv.url, 'Message Org');
  const url = `${TEST_DATABASE_URL}${TEST_DATABASE_URL.includes('?') ? '&' : '?'}sslmode=disable`;
  const cred = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: url } });
  t.equal(cred.status, 201, cred.text);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.svc_failed_statements']);
  const r = await api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: "SELECT repeat('x', 100000)::int AS v" } });
  t.equal(r.status, 400, r.text);
  t.equal(r.body.error?.details?.['sqlstate'], '22P02');
  const message = r.body.error?.message ?? '';
  t.ok(message.length > 1000 && message.length < 2100, `message length ${message.length}`);
  t.match(message, /more characters not shown\)$/);
  t.equal(r.body.error?.details?.['cost_cents'], 0.5, 'it ran at the database: charged');
});

t.test('every charged failure has its audit event, with the charge', async (t) => {
  const a = await signupAgent(srv.url, 'Audit Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const r = await api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) / (count(*) - count(*)) AS n FROM patients' } });
  t.equal(r.status, 400, r.text);
  const id = r.body.error?.details?.['audit_event_id'];
  const events = (await api<{ events: { id: string; type: string; outcome: string; cost_cents?: number; billed_to?: string; error_code?: string }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key })).body.events;
  const event = events.find((e) => e.id === id);
  t.ok(event, 'the answer names its audit event');
  t.equal(event?.cost_cents, 0.5, 'the event holds the charge');
  t.equal(event?.billed_to, 'trial');
  t.equal(event?.error_code, 'invalid_sql');
});

t.test('a statement that fails after its key was revoked (in the store, as the dashboard does) is 410, not charged', async (t) => {
  const a = await signupAgent(srv.url, 'Revoked Key Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const before = await usage(a.key);
  // runs for a while on the engine, then divides by zero
  const sent = api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, {
    key: a.key,
    body: { sql: 'SELECT count(*) / (count(*) - count(*)) AS n FROM patients x, patients y, (SELECT 1 FROM patients LIMIT 20) z' },
  });
  await new Promise((r) => setTimeout(r, 50));
  await srv.svc.store.query('UPDATE agent_keys SET revoked_at = $2 WHERE org_id = $1', [a.orgId, new Date().toISOString()]);
  const r = await sent;
  t.equal(r.status, 410, r.text);
  t.equal(r.body.error?.code, 'connection_revoked');
  t.equal(r.body.error?.details?.['cause'], 'key_revoked');
  t.notOk(r.body.error?.details && 'cost_cents' in r.body.error.details, 'not charged');
  const [org] = await srv.svc.store.query<{ q: number; held: number | string }>('SELECT trial_queries_used AS q, trial_egress_held AS held FROM orgs WHERE id = $1', [a.orgId]);
  t.equal(Number(org?.q), 100 - before.trial.queries_left, 'the trial query was given back');
  t.equal(Number(org?.held), 0, 'and its egress hold');
});

t.test('a whole table cast into an error message is not a way around egress and billing', async (t) => {
  const a = await signupAgent(srv.url, 'Exfil Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const before = await usage(a.key);
  const r = await api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: "SELECT (string_agg(e::text, ','))::int AS n FROM encounters e" } });
  t.equal(r.status, 400, r.text.slice(0, 300));
  t.ok(r.text.length < 4000, `the answer is ${r.text.length} bytes (the table is about 1.5 MB)`);
  t.equal(r.body.error?.details?.['cost_cents'], 0.5, 'it ran: charged');
  const after = await usage(a.key);
  t.equal(before.trial.queries_left - after.trial.queries_left, 1);
});
