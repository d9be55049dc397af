/**
 * One organization cannot stall webhook delivery for the others: a real control plane with the
 * default per-organization cap (4 in flight), real receivers on port 0. Organization A has the
 * slow chaos profile, a receiver that answers nothing until the test lets it, and a backlog up to
 * the sandbox's pending mock-event limit; organization B's single event still arrives while A's
 * backlog has barely moved. Assertions are about order and counts, never about how long it took.
 */
import t from 'tap';
import type { TapTest } from '../helpers/tap.js';
import { api, signupAgent, startServer, type Agent, type TestServer } from '../helpers/server.js';
import { Receiver } from './receiver.js';

interface Attempt { attempt: number; at: string; duration_ms: number; chaos: string | null; status_code: number | null; error_class: string | null }
interface Delivery { delivery_id: string; status: string; chaos_hold_since: string | null; attempts: Attempt[] }

const MOCK_PENDING_MAX = 24;
let srv: TestServer;
t.before(async () => {
  srv = await startServer({
    env: {
      SVC_WEBHOOK_ALLOW_PRIVATE: '1',
      // no retry and no deadline can happen while the test holds a receiver's answers
      SVC_WEBHOOK_RETRY_DELAYS: '60s',
      SVC_WEBHOOK_TIMEOUT_MS: '30000',
      SVC_WEBHOOK_MOCK_PENDING_MAX: String(MOCK_PENDING_MAX),
    },
  });
});
t.teardown(() => srv.close());


async function setup(t: TapTest, name: string): Promise<{ agent: Agent; rx: Receiver }> {
  const agent = await signupAgent(srv.url, `${name} ${Math.random()}`);
  const rx = await Receiver.start();
  t.teardown(() => rx.close());
  const r = await api<{ secret: string; standard_webhooks_secret: string }>(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: rx.url } });
  if (r.status !== 200) throw new Error(`webhook: ${r.status} ${r.text}`);
  rx.secret = r.body.secret;
  rx.whsec = r.body.standard_webhooks_secret;
  return { agent, rx };
}

const trigger = (agent: Agent) => api<{ delivery_id: string; error?: { code: string; details?: Record<string, unknown> } }>(srv.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body: { scenario_id: 'adt.admission' } });
const chaos = (agent: Agent, body: Record<string, unknown>) => api(srv.url, 'PATCH', '/v1/sandbox/webhook-reliability', { key: agent.key, body });
const deliveries = async (agent: Agent): Promise<Delivery[]> => {
  const r = await api<{ deliveries: Delivery[] }>(srv.url, 'GET', '/v1/webhooks/deliveries?limit=500', { key: agent.key });
  if (r.status !== 200) throw new Error(`deliveries: ${r.status} ${r.text}`);
  return r.body.deliveries;
};
async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test("A's slow, stuck backlog does not hold up B; A never has more than 4 in flight; the sandbox backlog is bounded", async (t) => {
  const a = await setup(t, 'Org A');
  const b = await setup(t, 'Org B');
  let openGate: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (openGate = resolve));
  t.teardown(() => openGate());
  a.rx.answer = () => ({ status: 200, body: 'ok', gate });
  t.equal((await chaos(a.agent, { mode: 'slow', delay_ms: 300 })).status, 200);

  const backlog: string[] = [];
  for (let i = 0; i < MOCK_PENDING_MAX; i++) {
    const r = await trigger(a.agent);
    t.equal(r.status, 202, `A's mock event ${i + 1} of ${MOCK_PENDING_MAX} accepted`);
    backlog.push(r.body.delivery_id);
  }
  const over = await trigger(a.agent);
  t.equal(over.status, 429, 'past the pending mock-event limit: 429');
  t.equal(over.body.error?.code, 'rate_limited');
  t.match(over.body.error?.details, { reason: 'mock_events_pending', pending_limit: MOCK_PENDING_MAX });
  t.match(over.headers.get('retry-after'), /^[1-9]\d*$/, 'with Retry-After in seconds');

  const qb = await trigger(b.agent);
  t.equal(qb.status, 202, "B's own limit is untouched by A's backlog");
  await b.rx.until(() => b.rx.of(qb.body.delivery_id).length === 1, 20_000);
  // B arrived: how far had A's backlog got?
  const aSeen = a.rx.received.length;
  const aPending = (await deliveries(a.agent)).filter((d) => d.status === 'pending').length;
  t.ok(aSeen <= 4, `when B's delivery arrived, A's receiver had been sent ${aSeen} (at most its 4 in flight), not the 16 slots of the process`);
  t.equal(aPending, MOCK_PENDING_MAX, `all ${MOCK_PENDING_MAX} of A's deliveries were still pending: B did not wait behind A's backlog`);
  t.ok(b.rx.of(qb.body.delivery_id)[0]!.serviceOk, "B's delivery is signed with B's secret");
  const db = await until('B delivered', async () => (await deliveries(b.agent)).find((d) => d.delivery_id === qb.body.delivery_id && d.status === 'delivered'));
  t.equal(db.attempts.length, 1, 'B: one attempt');

  // A's receiver answers at last: A drains, never more than 4 at once
  openGate();
  const done = await until('A drained', async () => {
    const all = await deliveries(a.agent);
    return all.filter((d) => backlog.includes(d.delivery_id)).every((d) => d.status === 'delivered') ? all : undefined;
  }, 60_000);
  t.ok(a.rx.maxOpen >= 1 && a.rx.maxOpen <= 4, `A's receiver never had more than 4 requests open at once (max ${a.rx.maxOpen})`);
  t.equal(a.rx.received.length, MOCK_PENDING_MAX, 'each of A’s deliveries was sent once');
  t.same(new Set(a.rx.received.map((r) => r.deliveryId)).size, MOCK_PENDING_MAX);
  t.ok(a.rx.received.every((r) => r.serviceOk && r.headers['x-service-chaos'] === 'slow'), 'signed, and marked as the slow chaos profile');
  for (const d of done.filter((x) => backlog.includes(x.delivery_id))) {
    if (d.attempts.length !== 1 || d.attempts[0]!.chaos !== 'slow' || d.attempts[0]!.duration_ms < 300) t.fail(`A ${d.delivery_id}: ${JSON.stringify(d.attempts)}`);
  }
  t.equal((await trigger(a.agent)).status, 202, 'with the backlog delivered, A may send mock events again');
});

t.test('the slow hold is scheduled, not a held slot: more deliveries are held at once than the organization may have in flight', async (t) => {
  const c = await setup(t, 'Org C');
  t.equal((await chaos(c.agent, { mode: 'slow', delay_ms: 4000 })).status, 200);
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) ids.push((await trigger(c.agent)).body.delivery_id);
  // with the hold inside a worker slot, at most 4 (the in-flight cap) could be held at a time
  const held = await until('all 10 held at once', async () => {
    const all = (await deliveries(c.agent)).filter((d) => d.status === 'pending' && d.chaos_hold_since !== null && d.attempts.length === 0);
    return all.length === 10 ? all : undefined;
  });
  t.equal(c.rx.received.length, 0, 'nothing is sent during the hold');
  await c.rx.until(() => ids.every((id) => c.rx.of(id).length === 1), 30_000);
  const done = await until('C delivered', async () => {
    const all = await deliveries(c.agent);
    return all.every((d) => d.status === 'delivered') ? all : undefined;
  });
  for (const d of done) {
    const since = held.find((h) => h.delivery_id === d.delivery_id)!.chaos_hold_since;
    t.match(d.attempts, [{ attempt: 1, chaos: 'slow', status_code: 200 }], `${d.delivery_id}: one attempt`);
    t.equal(d.attempts[0]!.at, since, 'the attempt started when its hold began');
    t.ok(d.attempts[0]!.duration_ms >= 4000, `its duration includes the hold (${d.attempts[0]!.duration_ms} ms)`);
    t.equal(d.chaos_hold_since, null, 'no hold once delivered');
  }
});

t.test('?limit= of the delivery list is a number in the query string', async (t) => {
  const d = await setup(t, 'Org D');
  for (let i = 0; i < 3; i++) t.equal((await trigger(d.agent)).status, 202);
  const two = await api<{ deliveries: unknown[] }>(srv.url, 'GET', '/v1/webhooks/deliveries?limit=2', { key: d.agent.key });
  t.equal(two.status, 200, 'a query-string number is accepted');
  t.equal(two.body.deliveries.length, 2);
  for (const bad of ['abc', '-1', '1e3', '10000']) {
    const r = await api<{ error: { code: string } }>(srv.url, 'GET', `/v1/webhooks/deliveries?limit=${bad}`, { key: d.agent.key });
    t.equal(r.status, 400, `limit=${bad}: 400`);
    t.equal(r.body.error.code, 'invalid_request');
  }
});
