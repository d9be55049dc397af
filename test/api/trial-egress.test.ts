/**
 * The trial's egress allowance is reserved up front like money: 30 concurrent large answers on a
 * fresh trial bill the trial past its 5,000,000 bytes by at most one answer (the one that crosses
 * it); the rest is 402 (no wallet). With a smaller response cap, concurrent trial answers are
 * capped to the bytes held for each (truncated_reason "trial_egress").
 */
import t from 'tap';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ limits: { queryTimeoutMs: 30_000 } });
});
t.teardown(() => srv.close());

type Answer = { status: number; body: { billed_to?: string; bytes_egressed?: number; truncated?: boolean; truncated_reason?: string; row_count?: number; error?: { code?: string } } };

t.test('30 concurrent 9 MB answers on a fresh trial: trial-billed egress stays within the allowance', async (t) => {
  const a = await signupAgent(srv.url, 'Egress Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const sql = "SELECT repeat('x', 100000) AS v FROM encounters LIMIT 90";
  const answers = (await Promise.all(Array.from({ length: 30 }, () => api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })))) as Answer[];
  const statuses = answers.map((r) => r.status);
  // 429: still waiting for the first answer's hold at its deadline (a loaded machine)
  t.ok(statuses.every((s) => s === 200 || s === 402 || s === 429), `only 200, 402 or 429 (${statuses.join(',')})`);
  const trialBilled = answers.filter((r) => r.status === 200 && r.body.billed_to === 'trial');
  const bytes = trialBilled.reduce((n, r) => n + (r.body.bytes_egressed ?? 0), 0);
  t.ok(trialBilled.length >= 1, `${trialBilled.length} answered on the trial`);
  t.ok(bytes <= 5_000_000 + 10_000_000, `trial-billed egress ${bytes} passes 5,000,000 by at most one answer (the 10 MB response cap)`);
  const beside = trialBilled.filter((r) => r.body.truncated_reason === 'trial_egress');
  t.ok(beside.every((r) => (r.body.bytes_egressed ?? 0) <= 312_500), 'answers beside a running one are capped to a sixteenth of the allowance');
  t.ok(bytes > 4_000_000, `the allowance was used (${bytes})`);
  for (const r of answers.filter((x) => x.status === 402)) t.equal(r.body.error?.code, 'payment_required');
  for (const r of answers.filter((x) => x.status === 429)) t.equal(r.body.error?.code, 'rate_limited');
  const usage = await api<{ trial: { egress_bytes_left: number }; egress_bytes: number }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(usage.body.trial.egress_bytes_left, Math.max(0, 5_000_000 - bytes), 'usage agrees with the answers');
  t.equal(usage.body.egress_bytes, bytes);
});

t.test('small concurrent trial queries are not refused because others hold egress', async (t) => {
  const a = await signupAgent(srv.url, 'Small Egress Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const answers = (await Promise.all(Array.from({ length: 20 }, () => api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT 1 AS one' } })))) as Answer[];
  t.same(
    answers.map((r) => r.status),
    Array.from({ length: 20 }, () => 200),
  );
  t.ok(answers.every((r) => r.body.billed_to === 'trial' && r.body.truncated === false));
});

t.test('with a 1 MB response cap, concurrent trial answers share what is left and say trial_egress when cut by it', async (t) => {
  const small = await startServer({ limits: { maxResultBytes: 1_000_000 } });
  t.teardown(() => small.close());
  const a = await signupAgent(small.url, 'Capped Egress Org');
  await small.svc.store.query('UPDATE orgs SET trial_egress_used = 500000 WHERE id = $1', [a.orgId]);
  const conn = await openConnection(small.url, a.key, 'demo-healthcare', ['read:encounters']);
  const sql = "SELECT repeat('x', 10000) AS v FROM encounters LIMIT 300";
  const answers = (await Promise.all(Array.from({ length: 12 }, () => api(small.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })))) as Answer[];
  const trialBilled = answers.filter((r) => r.status === 200 && r.body.billed_to === 'trial');
  const bytes = trialBilled.reduce((n, r) => n + (r.body.bytes_egressed ?? 0), 0);
  t.ok(500_000 + bytes <= 5_000_000 + 1_000_000, `trial egress ${500_000 + bytes} within the allowance plus one answer`);
  const cut = trialBilled.filter((r) => r.body.truncated_reason === 'trial_egress');
  for (const r of cut) t.ok((r.body.bytes_egressed ?? 0) < 1_000_000, 'an answer cut by the trial is below the response cap');
  t.comment(`${cut.length} answers cut by the trial's egress`);
  t.ok(answers.every((r) => r.status === 200 || r.status === 402 || r.status === 429), answers.map((r) => r.status).join(','));
});
