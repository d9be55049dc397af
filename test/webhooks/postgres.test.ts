/**
 * Two control planes (two replicas) on one real PostgreSQL store (DATABASE_URL), each running its
 * delivery worker on the shared outbox: 50 events, triggered through both, all arrive signed, no
 * delivery id more than twice, all `delivered`, and the organization never has more than its 4
 * attempts in flight across both replicas. Skipped, with the reason, when no PostgreSQL answers.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { api, freshDatabase, realPostgresAvailable, signupAgent, startServer, TEST_DATABASE_URL, type TestServer } from '../helpers/server.js';
import { Receiver } from './receiver.js';

const EVENTS = 50;

if (!(await realPostgresAvailable())) {
  t.skip(`no PostgreSQL answers at ${TEST_DATABASE_URL} (set TEST_DATABASE_URL); the embedded store runs the other webhook tests`, () => undefined);
} else {
  t.test(`two control planes sharing one PostgreSQL deliver ${EVENTS} events`, async (t) => {
    const db = await freshDatabase('svc_webhooks');
    const servers: TestServer[] = [];
    t.teardown(async () => {
      for (const s of servers) await s.close();
      await db.drop();
    });
    // both replicas open the same sealed secrets: one master key
    const env = { SVC_MASTER_KEY: randomBytes(32).toString('hex'), SVC_WEBHOOK_ALLOW_PRIVATE: '1', SVC_WEBHOOK_RETRY_DELAYS: '100ms,200ms,300ms,400ms' };
    servers.push(await startServer({ databaseUrl: db.url, demoWorkers: 1, env }));
    servers.push(await startServer({ databaseUrl: db.url, demoWorkers: 1, env }));
    const [one, two] = servers as [TestServer, TestServer];

    const rx = await Receiver.start();
    t.teardown(() => rx.close());
    // an answer that takes a moment, so that attempts overlap and the cap is visible
    rx.answer = () => ({ status: 200, body: 'ok', delayMs: 30 });
    const agent = await signupAgent(one.url, 'Replicated Health');
    const set = await api<{ secret: string; standard_webhooks_secret: string }>(two.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: rx.url } });
    t.equal(set.status, 200, 'configured through the second replica with a key made on the first');
    rx.secret = set.body.secret;
    rx.whsec = set.body.standard_webhooks_secret;

    const ids: string[] = [];
    for (let i = 0; i < EVENTS; i++) {
      const via = i % 2 === 0 ? one : two;
      const q = await api<{ delivery_id: string }>(via.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body: { scenario_id: 'eligibility.verified' } });
      if (q.status !== 202) throw new Error(`trigger ${i}: ${q.status} ${q.text}`);
      ids.push(q.body.delivery_id);
    }
    await rx.until(() => ids.every((id) => rx.of(id).length >= 1), 60_000);

    const counts = ids.map((id) => rx.of(id).length);
    t.equal(counts.filter((n) => n >= 1).length, EVENTS, `all ${EVENTS} arrived`);
    t.ok(counts.every((n) => n <= 2), `no delivery id more than twice (max ${Math.max(...counts)})`);
    t.ok(rx.received.every((r) => r.serviceOk && r.standardOk), 'every request verifies with the secret');
    t.ok(rx.maxOpen <= 4, `never more than 4 attempts of the organization in flight across both replicas (max ${rx.maxOpen})`);

    const statuses = async (): Promise<Map<string, string>> => {
      const r = await api<{ deliveries: { delivery_id: string; status: string }[] }>(one.url, 'GET', '/v1/webhooks/deliveries?limit=500', { key: agent.key });
      return new Map(r.body.deliveries.map((d) => [d.delivery_id, d.status]));
    };
    const deadline = Date.now() + 30_000;
    let seen = await statuses();
    while (!ids.every((id) => seen.get(id) === 'delivered') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      seen = await statuses();
    }
    t.equal(ids.filter((id) => seen.get(id) === 'delivered').length, EVENTS, 'all delivered (read through the first replica)');
  });
}
