/**
 * Two replicas on one PostgreSQL store with embedded demo engines: an agent that leaves while its
 * statement waits, through one replica, for a place its organization holds through the other
 * (control-plane/demo/shares.ts) is not charged: the statement never ran, as when it waits for an
 * engine on one replica (test/api/client-gone). Skipped with a reason where no PostgreSQL answers.
 */
import t from 'tap';
import { SHARE_SPACE } from '../../control-plane/demo/shares.js';
import { until } from '../helpers/tap.js';
import { sendThenLeave } from '../helpers/leave.js';
import { placesAwaited, placesHeld } from '../helpers/advisory.js';
import { twoReplicas } from '../helpers/replicas.js';
import { api, openConnection, realPostgresAvailable, signupAgent } from '../helpers/server.js';

type AuditEvent = { type: string; outcome?: string; error_code?: string | null; cost_cents?: number };

if (!(await realPostgresAvailable())) {
  t.skip('demo share charges through two replicas: no PostgreSQL answers at TEST_DATABASE_URL for the shared store', () => undefined);
} else {
  const { a, b, watcher } = await twoReplicas(t, 'svc_test_demo_shares_charges', { queryTimeoutMs: 20_000 });

  // (70ee84f charged it the query price: the demo gate said the statement had its engine before
  // its place across the replicas was taken)
  t.test('leaving while the statement waits for a place held through another replica charges nothing', async (t) => {
    const org = await signupAgent(a.url, 'Spread Queued Org');
    await a.svc.store.query('UPDATE orgs SET trial_queries_used = 100 WHERE id = $1', [org.orgId]);
    t.equal((await api(a.url, 'POST', '/v1/agent/topup', { key: org.key, body: { amount_cents: 1000 } })).status, 200);
    const conn = await openConnection(a.url, org.key, 'demo-healthcare', ['read:encounters']);
    const usage0 = (await api<{ wallet_balance_cents: number }>(a.url, 'GET', '/v1/agent/account/usage', { key: org.key })).body;
    const send = (url: string) => sendThenLeave(url, 'POST', `/v1/connections/${conn}/query`, org.key, { sql: 'SELECT count(*) AS n FROM encounters a, encounters b, encounters c' });
    const first = send(a.url);
    await until('the first statement holds its place (through replica a)', async () => (await placesHeld(watcher, SHARE_SPACE)) === 1);
    const queued = send(b.url);
    await until(
      "the second statement queues for it (through replica b, in the lock's queue)",
      async () => (await placesAwaited(watcher, SHARE_SPACE)) > 0,
    );
    queued.leave();
    t.equal(await queued.done, undefined, 'the client gave up before any answer');
    await until('the waiting statement is settled', () => b.svc.services.running.count(conn) === 0);
    let events: AuditEvent[] = [];
    await until('its audit event', async () => {
      const r = await api<{ events: { body?: AuditEvent }[] }>(a.url, 'GET', `/v1/connections/${conn}/audit`, { key: org.key });
      events = r.body.events.map((e) => e.body ?? (e as unknown as AuditEvent)).filter((e) => e.type === 'query');
      return events.length > 0;
    });
    t.equal(events.length, 1, 'only the statement that left is settled');
    t.match(events[0], { outcome: 'error', error_code: 'client_closed_request' });
    t.equal(events[0]?.cost_cents ?? 0, 0, 'never ran: not charged');
    first.leave();
    await first.done;
    await until('the first statement is stopped', () => a.svc.services.running.count(conn) === 0);
    // the first one ran until its agent left: charged the query price (test/api/client-gone)
    const price = (await api<{ price_per_query_cents: number }>(a.url, 'GET', '/v1/agent/billing/config', { key: org.key })).body.price_per_query_cents;
    await until('both are settled', async () => {
      const r = await api<{ events: { body?: AuditEvent }[] }>(a.url, 'GET', `/v1/connections/${conn}/audit`, { key: org.key });
      return r.body.events.filter((e) => (e.body ?? (e as unknown as AuditEvent)).type === 'query').length === 2;
    });
    const usage1 = (await api<{ wallet_balance_cents: number }>(a.url, 'GET', '/v1/agent/account/usage', { key: org.key })).body;
    t.equal(Math.round((usage0.wallet_balance_cents - usage1.wallet_balance_cents) * 1e6) / 1e6, price, `the wallet paid one query price (${price} cents), for the statement that ran`);
  });
}
