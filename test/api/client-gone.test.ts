/**
 * An agent that closes its connection before the answer stops its statement at its source: the
 * engine is freed at once (not at the statement's deadline), the statement is audited as
 * `client_closed_request`, and charged the query price with no egress, as at its deadline (else
 * leaving just before the deadline would make any statement free).
 */
import t from 'tap';
import { until } from '../helpers/tap.js';
import { sendThenLeave } from '../helpers/leave.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ demo: 'eager', limits: { queryTimeoutMs: 20_000 } });
});
t.teardown(() => srv.close());

type AuditEvent = { type: string; outcome?: string; error_code?: string | null; cost_cents?: number; billed_to?: string };


t.test('closing the connection mid-statement stops it, audits it as client_closed_request, charges the query price', async (t) => {
  const a = await signupAgent(srv.url, 'Impatient Org');
  await srv.svc.store.query('UPDATE orgs SET trial_queries_used = 100 WHERE id = $1', [a.orgId]);
  t.equal((await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 1000 } })).status, 200);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const usage0 = (await api<Record<string, unknown>>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  const running = srv.svc.services.running;
  const engine = await srv.svc.demoReady;

  const sent = sendThenLeave(srv.url, 'POST', `/v1/connections/${conn}/query`, a.key, { sql: 'SELECT count(*) AS n FROM encounters a, encounters b, encounters c' });
  await until('the statement runs', () => running.count(conn) === 1 && engine.stats().running === 1);
  await new Promise((r) => setTimeout(r, 300));
  const leftAt = Date.now();
  sent.leave();
  t.equal(await sent.done, undefined, 'the client gave up before any answer');
  await until('the statement is stopped (its deadline is 20 s)', () => running.count(conn) === 0 && engine.stats().running === 0);
  t.comment(`stopped ${Date.now() - leftAt} ms after the client left`);

  let events: AuditEvent[] = [];
  await until('the audit event', async () => {
    const r = await api<{ events: { body?: AuditEvent }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key });
    events = r.body.events.map((e) => e.body ?? (e as unknown as AuditEvent));
    return events.some((e) => e.type === 'query');
  });
  const q = events.find((e) => e.type === 'query');
  t.match(q, { outcome: 'error', error_code: 'client_closed_request', billed_to: 'wallet' }, 'audited as client_closed_request');
  const price = (await api<{ price_per_query_cents: number }>(srv.url, 'GET', '/v1/agent/billing/config', { key: a.key })).body.price_per_query_cents;
  t.equal(q?.cost_cents, price, `charged the query price (${price} cents), no egress`);
  const usage1 = (await api<{ wallet_balance_cents: number }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  t.equal(Math.round((Number(usage0['wallet_balance_cents']) - usage1.wallet_balance_cents) * 1e6) / 1e6, price, 'the wallet paid exactly that');

  const after = await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) AS n FROM encounters' } });
  t.equal(after.status, 200, 'the next statement runs at once');
});

// (0e5b7d5 charged it the query price: the engine charged every client_closed_request raised once
// backend.run was called; the demo gate now says when a statement gets its engine)
t.test('closing the connection while the statement waits for an engine charges nothing (it never ran)', async (t) => {
  const a = await signupAgent(srv.url, 'Queued Org');
  await srv.svc.store.query('UPDATE orgs SET trial_queries_used = 100 WHERE id = $1', [a.orgId]);
  t.equal((await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 1000 } })).status, 200);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const running = srv.svc.services.running;
  const engine = await srv.svc.demoReady;
  const send = () => sendThenLeave(srv.url, 'POST', `/v1/connections/${conn}/query`, a.key, { sql: 'SELECT count(*) AS n FROM encounters a, encounters b, encounters c' });
  const first = send();
  await until('the first statement runs', () => running.count(conn) === 1 && engine.stats().running === 1);
  const queued = send();
  await until('the second statement waits', () => running.count(conn) === 2);
  await new Promise((r) => setTimeout(r, 300));
  t.equal(engine.stats().running, 1, 'the second statement waits for the engine (its organization holds its share)');
  queued.leave();
  await queued.done;
  await until('the waiting statement is stopped', () => running.count(conn) === 1);
  const r = await api<{ events: { body?: AuditEvent }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key });
  const events = r.body.events.map((e) => e.body ?? (e as unknown as AuditEvent)).filter((e) => e.type === 'query');
  t.equal(events.length, 1, 'only the statement that left is settled');
  t.match(events[0], { outcome: 'error', error_code: 'client_closed_request' });
  t.equal(events[0]?.cost_cents ?? 0, 0, 'never ran: not charged');
  first.leave();
  await first.done;
  await until('the first statement is stopped', () => running.count(conn) === 0);
});
