/**
 * The agent's core flow on the healthcare demo: open a scoped connection, query, and see only the
 * rows of the scopes — checked against counts computed on the same demo database directly.
 */
import t from 'tap';
import { generateKeyAndCsr } from '../../pki/index.js';
import { api, groundTruth, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ limits: { maxRows: 500, queryTimeoutMs: 1500 } });
});
t.teardown(() => srv.close());

interface QueryBody {
  rows: Record<string, unknown>[];
  columns: { name: string }[];
  row_count: number;
  truncated: boolean;
  cost_cents: number;
  bytes_egressed: number;
  billed_to: string;
  audit_event_id: string;
  scope_applied: { tables_read: string[]; row_filters: Record<string, string | null>; tables_allowed: string[] | '*' };
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

const direct = (sql: string) => groundTruth(srv, sql);

/** Wait until the demo engine is back to its warm workers (a statement killed at its deadline takes its worker with it). */
async function warmEngines(): Promise<void> {
  const engine = (await srv.svc.demoReady) as unknown as { size: number };
  while (engine.size < srv.config.demoWorkers) await new Promise((r) => setTimeout(r, 50));
}

t.test('read:encounters + period:2024-Q1 returns exactly the Q1-2024 encounters', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters', 'period:2024-Q1']);
  const r = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, {
    key: a.key,
    body: { sql: 'SELECT count(*) AS n, min(period_start) AS first, max(period_start) AS last FROM encounters' },
  });
  t.equal(r.status, 200, r.status === 200 ? "200" : r.text);
  const [truth] = await direct(
    `SELECT count(*)::int AS n FROM demo_healthcare.encounters WHERE period_start >= '2024-01-01T00:00:00Z' AND period_start < '2024-04-01T00:00:00Z'`,
  );
  const [all] = await direct('SELECT count(*)::int AS n FROM demo_healthcare.encounters');
  const row = r.body.rows[0] as { n: number; first: string; last: string };
  t.equal(row.n, (truth as { n: number }).n, 'count matches the true in-scope count');
  t.ok(row.n > 100, 'Q1-2024 has a real number of encounters');
  t.ok(row.n < (all as { n: number }).n, 'and fewer than all of them');
  t.ok(row.first >= '2024-01-01T00:00:00.000Z' && row.last < '2024-04-01T00:00:00.000Z', `within Q1: ${row.first} .. ${row.last}`);

  // predicates of the agent cannot widen the scope
  const widened = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, {
    key: a.key,
    body: { sql: "SELECT count(*) AS n FROM encounters e WHERE e.period_start < '2024-01-01' OR true" },
  });
  t.equal(widened.status, 200);
  t.equal((widened.body.rows[0] as { n: number }).n, (truth as { n: number }).n);

  // response shape
  t.same(Object.keys(r.body).sort(), ['audit_event_id', 'billed_to', 'bytes_egressed', 'columns', 'cost_cents', 'duration_ms', 'row_count', 'rows', 'scope_applied', 'truncated'].sort());
  t.equal(r.body.bytes_egressed, Buffer.byteLength(JSON.stringify(r.body.rows)), 'bytes_egressed is the byte length of rows as serialized');
  t.equal(r.body.cost_cents, 0.5 + (r.body.bytes_egressed * 8) / 1e9);
  t.equal(r.body.billed_to, 'trial');
  t.match(r.body.audit_event_id, /^evt_/);
  t.same(r.body.scope_applied.tables_read, ['encounters']);
  t.match(r.body.scope_applied.row_filters['encounters'], /period_start.*2024-01-01.*2024-04-01/);
  t.same(r.body.scope_applied.tables_allowed, ['encounters']);
  t.same(r.body.columns.map((c) => c.name), ['n', 'first', 'last']);
});

t.test('rows of a period-scoped table all fall inside the period, joins included', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters', 'read:patients', 'period:2024-03']);
  const r = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, {
    key: a.key,
    body: { sql: 'SELECT e.encounter_id, e.period_start, p.gender FROM encounters e JOIN patients p USING (patient_id) ORDER BY e.period_start' },
  });
  t.equal(r.status, 200, r.status === 200 ? "200" : r.text);
  t.ok(r.body.rows.length > 0);
  for (const row of r.body.rows) {
    const at = row['period_start'] as string;
    if (!(at >= '2024-03-01T00:00:00.000Z' && at < '2024-04-01T00:00:00.000Z')) {
      t.fail(`row outside March 2024: ${at}`);
      break;
    }
  }
  t.same(r.body.scope_applied.row_filters['patients'], null, 'patients has no time column');
});

t.test('tables outside the scopes, writes and bad SQL are refused with actionable errors', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters', 'period:2024-Q1']);
  const q = (sql: string) => api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });

  const other = await q('SELECT * FROM claims');
  t.equal(other.status, 403);
  t.equal(other.body.error?.code, 'scope_violation');
  t.match(other.body.error?.message, /claims/);
  t.match(other.body.error?.message, /encounters/, 'says what the scopes allow');

  const hidden = await q('SELECT * FROM encounters WHERE patient_id IN (SELECT patient_id FROM patients)');
  t.equal(hidden.status, 403, 'a table in a subquery is checked too');

  for (const sql of ['DELETE FROM encounters', "UPDATE encounters SET status = 'x'", 'DROP TABLE encounters', 'SELECT 1; SELECT 2', 'SELECT pg_sleep(1)', 'SELECT * FROM pg_catalog.pg_class']) {
    const r = await q(sql);
    t.equal(r.status, 403, sql);
    t.equal(r.body.error?.code, 'scope_violation', sql);
  }
  const bad = await q('SELEC * FROM encounters');
  t.equal(bad.status, 400);
  t.equal(bad.body.error?.code, 'invalid_sql');
  t.equal(bad.body.error?.details?.['position'], 0);

  const missingColumn = await q('SELECT no_such_column FROM encounters');
  t.equal(missingColumn.status, 400);
  t.equal(missingColumn.body.error?.code, 'invalid_sql');

  // refusals are audited and not billed
  const usage = await api<{ queries: number; trial: { queries_left: number } }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(usage.body.queries, 0);
  t.equal(usage.body.trial.queries_left, 100);
  const audit = await api<{ events: { outcome: string; error_code: string }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key });
  t.equal(audit.body.events.length, 10);
  t.ok(audit.body.events.every((e) => e.outcome === 'refused'));
});

t.test('joins of period-scoped tables finish within the deadline (row security must not wreck the plan)', async (t) => {
  // before enable_nestloop = off and estimable period bounds, this ran 57 s as a nested loop
  await warmEngines();
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters', 'read:patients', 'read:claims', 'period:2024']);
  const sql = `SELECT p.gender, e.class_code, count(*) AS n, sum(c.total_amount) AS billed
    FROM encounters e JOIN patients p ON p.patient_id = e.patient_id LEFT JOIN claims c ON c.encounter_id = e.encounter_id
    WHERE e.status = 'finished' GROUP BY 1, 2 ORDER BY 3 DESC`;
  const r = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
  t.equal(r.status, 200, r.status === 200 ? '200' : r.text);
  const truth = await direct(`SELECT count(*)::int AS n FROM demo_healthcare.encounters e
    JOIN demo_healthcare.patients p ON p.patient_id = e.patient_id
    LEFT JOIN (SELECT * FROM demo_healthcare.claims WHERE created_at >= '2024-01-01Z' AND created_at < '2025-01-01Z') c ON c.encounter_id = e.encounter_id
    WHERE e.status = 'finished' AND e.period_start >= '2024-01-01Z' AND e.period_start < '2025-01-01Z'`);
  t.equal(r.body.rows.reduce((sum, row) => sum + Number(row['n']), 0), (truth[0] as { n: number }).n, 'and the answer is the in-scope truth');
});

t.test('the row cap truncates while reading and says so', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:*']);
  const r = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT encounter_id FROM encounters' } });
  t.equal(r.status, 200);
  t.equal(r.body.row_count, 500);
  t.equal(r.body.rows.length, 500);
  t.equal(r.body.truncated, true);
  const small = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT encounter_id FROM encounters LIMIT 3' } });
  t.equal(small.body.truncated, false);
  t.equal(small.body.row_count, 3);
});

/**
 * A paying organization (trial over, wallet funded). Trial statements of all free organizations
 * share one slice of the engines (see test/latency/admission.test.ts), so the organizations that
 * must not be stalled here pay.
 */
async function payingAgent(name: string): Promise<{ key: string; orgId: string }> {
  const a = await signupAgent(srv.url, name);
  await srv.svc.store.query('UPDATE orgs SET trial_queries_used = 100 WHERE id = $1', [a.orgId]);
  const top = await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 1000 } });
  if (top.status !== 200) throw new Error(`topup: ${top.status} ${top.text}`);
  return a;
}

t.test('a runaway statement is stopped at its deadline (504), is not billed, and never stalls other agents', async (t) => {
  const a = await signupAgent(srv.url, 'Slow Co');
  const b = await payingAgent('Fast Co');
  const slowConn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:*']);
  const fastConn = await openConnection(srv.url, b.key, 'demo-healthcare', ['read:patients']);
  const slow = api<QueryBody>(srv.url, 'POST', `/v1/connections/${slowConn}/query`, {
    key: a.key,
    body: { sql: 'SELECT count(*) FROM encounters a, encounters b, encounters c' },
  });
  // while it runs, the API and another agent's queries answer
  let fastAnswered = 0;
  let slowDone = false;
  void slow.then(() => (slowDone = true));
  for (let i = 0; i < 3; i++) {
    const targets = await api(srv.url, 'GET', '/v1/connections/packs', { key: b.key });
    t.equal(targets.status, 200);
    const r = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${fastConn}/query`, { key: b.key, body: { sql: 'SELECT count(*) AS n FROM patients' } });
    t.equal(r.status, 200);
    if (!slowDone) fastAnswered++;
  }
  t.ok(fastAnswered > 0, 'other queries completed while the slow one was still running');
  const s = await slow;
  t.equal(s.status, 504);
  t.equal(s.body.error?.code, 'query_timeout');
  const usage = await api<{ queries: number; egress_bytes: number; trial: { queries_left: number } }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(usage.body.trial.queries_left, 99, 'a statement that held an engine to its deadline is charged the query price');
  t.equal(usage.body.egress_bytes, 0, 'and no egress');
  // its organization waits while the engine it held is replaced (429 with Retry-After, not charged)…
  const soon = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${slowConn}/query`, { key: a.key, body: { sql: 'SELECT count(*) AS n FROM patients' } });
  t.equal(soon.status, 429);
  t.equal(soon.body.error?.code, 'rate_limited');
  t.match(soon.headers.get('retry-after'), /^\d+$/);
  // …and the engine recovers
  await warmEngines();
  const again = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${slowConn}/query`, { key: a.key, body: { sql: 'SELECT count(*) AS n FROM patients' } });
  t.equal(again.status, 200);
  const after = await api<{ trial: { queries_left: number } }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(after.body.trial.queries_left, 98, 'the held-back attempt was not charged');
});

t.test('one organization flooding slow statements holds at most its share of the engine', async (t) => {
  await warmEngines();
  const a = await signupAgent(srv.url, 'Flood Co');
  const b = await payingAgent('Victim Co');
  const flood = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const calm = await openConnection(srv.url, b.key, 'demo-healthcare', ['read:patients']);
  let floodDone = 0;
  const floods = Array.from({ length: 8 }, () =>
    api<QueryBody>(srv.url, 'POST', `/v1/connections/${flood}/query`, { key: a.key, body: { sql: 'SELECT count(*) FROM encounters a, encounters b, encounters c' } }).then((r) => {
      floodDone++;
      return r;
    }),
  );
  await new Promise((r) => setTimeout(r, 100)); // let the flood take its places
  const r = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${calm}/query`, { key: b.key, body: { sql: 'SELECT count(*) AS n FROM patients' } });
  t.equal(r.status, 200, 'the other organization is served');
  t.equal(floodDone, 0, 'while the flood is still held');
  const results = await Promise.all(floods);
  const statuses = results.map((x) => x.status);
  t.equal(statuses.filter((x) => x === 504).length, 1, 'one flooding statement ran, to its deadline');
  t.ok(statuses.every((x) => x === 504 || x === 503 || x === 429), `the rest waited (503) or were held back while its engine is replaced (429): ${statuses.join(',')}`);
  const held = results.find((x) => x.status === 429);
  if (held) t.match(held.headers.get('retry-after'), /^\d+$/);
  const usage = await api<{ trial: { queries_left: number } }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(usage.body.trial.queries_left, 99, 'only the statement that ran to its deadline was charged');
});

t.test('EXPLAIN shows the plan without costs or row estimates', async (t) => {
  await warmEngines();
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters', 'period:2024-Q1']);
  for (const sql of ['EXPLAIN SELECT * FROM encounters WHERE status = $$finished$$', 'EXPLAIN (COSTS ON) SELECT count(*) FROM encounters', 'EXPLAIN (FORMAT JSON, COSTS true) SELECT 1 FROM encounters']) {
    const r = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
    t.equal(r.status, 200, sql);
    t.ok(r.body.rows.length > 0);
    t.notMatch(JSON.stringify(r.body.rows), /cost=|Plan Rows|"rows=/i, `${sql}: no costs`);
  }
});

t.test('relay connections: the relay must be the organization’s own, and without a live tunnel a query answers 503 at once', async (t) => {
  const a = await signupAgent(srv.url);
  const b = await signupAgent(srv.url, 'Other Org');
  const tok = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: {} })).body.token;
  const relay = (await api<{ relay_id: string }>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok, csr_pem: generateKeyAndCsr().csrPem } })).body.relay_id;
  const foreign = await api<{ error: { code: string } }>(srv.url, 'POST', '/v1/connections', { key: b.key, body: { target_id: 'postgres-relay', scopes: [`relay:${relay}`, 'read:public.orders'] } });
  t.equal(foreign.status, 404, 'another organization’s relay does not exist for you');
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relay}`, 'read:public.orders']);
  const started = Date.now();
  const r = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT * FROM orders' } });
  t.equal(r.status, 503);
  t.equal(r.body.error?.code, 'relay_unavailable');
  t.equal(r.headers.get('retry-after'), '2', 'retryable: a relay whose replica died is back within seconds (review: no Retry-After)');
  t.ok(Date.now() - started < 5000, 'answered within 5 s, never hangs');
  const denied = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT * FROM public.customers' } });
  t.equal(denied.status, 403, 'tables outside read: scopes are refused before anything is sent');
});

t.test('a live target cannot be opened before its credential is registered: 400 naming the kind', async (t) => {
  const a = await signupAgent(srv.url);
  const r = await api<{ error?: { code: string; message: string; details?: Record<string, unknown> } }>(srv.url, 'POST', '/v1/connections', {
    key: a.key,
    body: { target_id: 'stripe', scopes: ['read:customers'] },
  });
  t.equal(r.status, 400);
  t.equal(r.body.error?.code, 'invalid_request');
  t.match(r.body.error?.details, { reason: 'credential_missing', connector_kind: 'stripe' });
  t.match(r.body.error?.message, /POST \/v1\/connections\/credentials/);
});
