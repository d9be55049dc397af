/**
 * Signed webhooks end to end: a real control plane, real receivers on port 0 that verify both
 * signature schemes themselves, the real outbox and worker (retry delays shortened by config).
 */
import t from 'tap';
import type { TapTest } from '../helpers/tap.js';
import { api, openConnection, signupAgent, startServer, type Agent, type TestServer } from '../helpers/server.js';
import { Receiver } from './receiver.js';

interface Attempt { attempt: number; kind: string; status_code: number | null; error_class: string | null; chaos: string | null; duration_ms: number; at: string; response_excerpt: string | null; retry_after_ms: number | null }
interface Delivery { delivery_id: string; event: string; status: string; connection_id: string | null; attempts: Attempt[]; envelope?: unknown }

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ env: { SVC_WEBHOOK_ALLOW_PRIVATE: '1', SVC_WEBHOOK_RETRY_DELAYS: '50ms,100ms,150ms,200ms', SVC_WEBHOOK_TIMEOUT_MS: '800' } });
});
t.teardown(() => srv.close());

async function setup(t: TapTest, opts: { secret?: string } = {}): Promise<{ agent: Agent; rx: Receiver }> {
  const agent = await signupAgent(srv.url, `Org ${Math.random()}`);
  const rx = await Receiver.start();
  t.teardown(() => rx.close());
  const r = await api<{ secret?: string; standard_webhooks_secret?: string }>(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: rx.url, ...(opts.secret ? { secret: opts.secret } : {}) } });
  t.equal(r.status, 200, r.status === 200 ? 'receiver configured' : r.text);
  rx.secret = opts.secret ?? r.body.secret ?? '';
  rx.whsec = r.body.standard_webhooks_secret ?? `whsec_${Buffer.from(rx.secret).toString('base64')}`;
  return { agent, rx };
}

async function trigger(agent: Agent, body: Record<string, unknown> = {}): Promise<{ delivery_id: string; event: string; receiver_configured?: boolean; note?: string }> {
  const r = await api<{ delivery_id: string; event: string; receiver_configured?: boolean; note?: string }>(srv.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body });
  if (r.status !== 202) throw new Error(`trigger: ${r.status} ${r.text}`);
  return r.body;
}

async function delivery(agent: Agent, id: string): Promise<Delivery> {
  const r = await api<Delivery>(srv.url, 'GET', `/v1/webhooks/deliveries/${id}`, { key: agent.key });
  if (r.status !== 200) throw new Error(`delivery: ${r.status} ${r.text}`);
  return r.body;
}

async function settled(agent: Agent, id: string, status = 'delivered', ms = 15_000): Promise<Delivery> {
  const deadline = Date.now() + ms;
  for (;;) {
    const d = await delivery(agent, id);
    if (d.status === status) return d;
    if (Date.now() > deadline) throw new Error(`delivery ${id} is ${d.status}, not ${status}: ${JSON.stringify(d.attempts)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}


t.test('a mock event arrives signed both ways; the generated secret is shown once', async (t) => {
  const { agent, rx } = await setup(t);
  t.match(rx.secret, /^svcsec_[A-Za-z0-9_-]{43}$/, 'svcsec_ + 32 random bytes base64url');
  const cfg = await api(srv.url, 'GET', '/v1/agent/webhook', { key: agent.key });
  t.notMatch(cfg.text, rx.secret.slice(7), 'the secret is never shown again');
  t.match(cfg.body, { default: { url: rx.url }, overrides: [] });

  const q = await trigger(agent, { scenario_id: 'claim.adjudicated' });
  t.match(q, { delivery_id: /^dlv_/, event: 'claim.adjudicated', receiver_configured: true });
  t.notOk('note' in q, 'no note when a receiver is configured');
  await rx.until(() => rx.of(q.delivery_id).length === 1);
  const got = rx.of(q.delivery_id)[0]!;
  t.ok(got.serviceOk, 'X-Service-Signature verifies (hex HMAC of the raw body, key = the secret string)');
  t.ok(got.standardOk, 'webhook-signature verifies with the whsec_ secret, as a Standard Webhooks library would');
  t.equal(got.headers['webhook-id'], q.delivery_id);
  t.match(got.headers['x-service-signature'], /^sha256=[0-9a-f]{64}$/);
  t.match(got.body, { id: q.delivery_id, event: 'claim.adjudicated', connection_id: null, environment: 'sandbox', data: { resource: { resourceType: 'ClaimResponse', use: 'claim', outcome: 'complete' } } });
  t.ok(Math.abs(Date.parse(got.body.timestamp) - Date.now()) < 60_000, 'ISO timestamp in the envelope');
  const d = await settled(agent, q.delivery_id);
  t.equal(d.attempts.length, 1);
  t.match(d.attempts[0], { attempt: 1, kind: 'initial', status_code: 200, error_class: null, response_excerpt: 'ok' });

  // a customer-chosen secret is accepted and used, never echoed
  const own = `svcsec_${'k'.repeat(40)}`;
  const set = await api(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: rx.url, secret: own } });
  t.equal(set.status, 200);
  t.notOk('secret' in set.body, 'a secret the caller sent is not echoed');
  rx.secret = own;
  rx.whsec = `whsec_${Buffer.from(own).toString('base64')}`;
  const q2 = await trigger(agent, { scenario_id: 'eligibility.verified' });
  await rx.until(() => rx.of(q2.delivery_id).length === 1);
  t.ok(rx.of(q2.delivery_id)[0]!.serviceOk && rx.of(q2.delivery_id)[0]!.standardOk, 'the new secret signs the next delivery');
});

t.test('every scenario carries a FHIR R4 resource of the right type', async (t) => {
  const { agent, rx } = await setup(t);
  const list = await api<{ scenarios: { id: string; event: string }[] }>(srv.url, 'GET', '/v1/webhooks/scenarios', { key: agent.key });
  const want: Record<string, string> = {
    'adt.admission': 'Encounter', 'adt.discharge': 'Encounter', 'adt.transfer': 'Encounter',
    'prior_authorization.requested': 'Claim', 'prior_authorization.approved': 'ClaimResponse', 'prior_authorization.denied': 'ClaimResponse',
    'claim.submitted': 'Claim', 'claim.adjudicated': 'ClaimResponse', 'claim.denied': 'ClaimResponse',
    'eligibility.verified': 'CoverageEligibilityResponse', 'eligibility.inactive': 'CoverageEligibilityResponse',
  };
  t.same(list.body.scenarios.map((s) => s.id).sort(), Object.keys(want).sort());
  const ids: { delivery_id: string; event: string }[] = [];
  for (const s of Object.keys(want)) ids.push(await trigger(agent, { scenario_id: s }));
  await rx.until(() => ids.every((q) => rx.of(q.delivery_id).length > 0));
  for (const q of ids) {
    const r = rx.of(q.delivery_id)[0]!;
    t.equal(r.body.data.resource.resourceType, want[q.event], q.event);
    t.match(r.body.data.resource.id, /^[A-Za-z0-9\-.]{1,64}$/, 'a valid FHIR id');
    t.ok(r.serviceOk && r.standardOk);
  }
  const adt = rx.events('adt.discharge')[0]!.body.data.resource;
  t.match(adt, { status: 'finished', class: { code: 'IMP' }, hospitalization: { dischargeDisposition: {} } });
});

t.test('a connection override wins over the organization default', async (t) => {
  const { agent, rx: def } = await setup(t);
  const over = await Receiver.start();
  t.teardown(() => over.close());
  const a = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:patients']);
  const b = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:patients']);
  const r = await api<{ secret: string; standard_webhooks_secret: string; level: string }>(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: over.url, connection_id: a } });
  t.equal(r.status, 200);
  t.equal(r.body.level, 'connection');
  over.secret = r.body.secret;
  over.whsec = r.body.standard_webhooks_secret;
  const qa = await trigger(agent, { connection_id: a, scenario_id: 'adt.transfer' });
  const qb = await trigger(agent, { connection_id: b, scenario_id: 'adt.transfer' });
  await over.until(() => over.of(qa.delivery_id).length === 1);
  await def.until(() => def.of(qb.delivery_id).length === 1);
  t.equal(def.of(qa.delivery_id).length, 0, "the override's event does not reach the default");
  t.equal(over.of(qb.delivery_id).length, 0);
  t.ok(over.of(qa.delivery_id)[0]!.serviceOk && over.of(qa.delivery_id)[0]!.standardOk, "signed with the override's own secret");
  t.equal(over.of(qa.delivery_id)[0]!.body.connection_id, a);
  // connection lifecycle: created (both, to the default: no override existed yet), revoked (a, to the override)
  // (the receiver is resolved at each attempt: a's created event may already go to its override)
  const created = (): Receiver['received'] => [...def.events('connection.created'), ...over.events('connection.created')];
  await def.until(() => created().length === 2);
  t.same(created().map((r) => r.body.connection_id).sort(), [a, b].sort());
  t.match(created()[0]!.body.data.resource, { resourceType: 'AuditEvent', action: 'C' });
  t.equal((await api(srv.url, 'POST', `/v1/connections/${a}/revoke`, { key: agent.key })).status, 200);
  await over.until(() => over.events('connection.revoked').length === 1);
  t.equal(over.events('connection.revoked')[0]!.body.connection_id, a);
  t.equal(def.events('connection.revoked').length, 0);
  // removing the override sends a's events to the default again
  t.equal((await api(srv.url, 'DELETE', `/v1/agent/webhook?connection_id=${a}`, { key: agent.key })).status, 204);
  const again = await trigger(agent, { connection_id: a });
  await def.until(() => def.of(again.delivery_id).length === 1);
});

t.test('503, 503, 200: three attempts, one delivery id, the same bytes', async (t) => {
  const { agent, rx } = await setup(t);
  rx.answer = (_r, nth) => (nth < 3 ? { status: 503, body: 'busy' } : { status: 200, body: 'thanks' });
  const q = await trigger(agent);
  const d = await settled(agent, q.delivery_id);
  const seen = rx.of(q.delivery_id);
  t.equal(seen.length, 3);
  t.ok(seen.every((s) => s.raw.equals(seen[0]!.raw)), 'byte-identical body on every attempt');
  t.ok(seen.every((s) => s.serviceOk && s.standardOk));
  t.same(d.attempts.map((a) => [a.attempt, a.kind, a.status_code, a.error_class]), [[1, 'initial', 503, 'http_status'], [2, 'retry', 503, 'http_status'], [3, 'retry', 200, null]]);
  t.equal(d.attempts[0]!.response_excerpt, 'busy');
  t.ok(seen[1]!.at - seen[0]!.at >= 40, 'the first retry waited (50 ms, jittered)');
  const list = await api<{ deliveries: Delivery[] }>(srv.url, 'GET', '/v1/webhooks/deliveries', { key: agent.key });
  t.equal(list.body.deliveries.filter((x) => x.delivery_id === q.delivery_id).length, 1);
});

t.test("429 with Retry-After is honoured over a shorter scheduled delay", async (t) => {
  const { agent, rx } = await setup(t);
  rx.answer = (_r, nth) => (nth === 1 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 204 });
  const q = await trigger(agent);
  const d = await settled(agent, q.delivery_id);
  const seen = rx.of(q.delivery_id);
  t.equal(seen.length, 2);
  t.ok(seen[1]!.at - seen[0]!.at >= 950, `waited ${seen[1]!.at - seen[0]!.at} ms for Retry-After: 1 (schedule said 50 ms)`);
  t.match(d.attempts[0], { status_code: 429, error_class: 'rate_limited', retry_after_ms: 1000 });
  t.match(d.attempts[1], { status_code: 204 });
});

t.test('no answer within the deadline is a failed attempt (timeout), then a retry', async (t) => {
  const { agent, rx } = await setup(t);
  rx.answer = (_r, nth) => (nth === 1 ? { status: 200, delayMs: 1500 } : { status: 200 });
  const q = await trigger(agent);
  const d = await settled(agent, q.delivery_id);
  t.match(d.attempts[0], { status_code: null, error_class: 'timeout' });
  t.ok(d.attempts[0]!.duration_ms >= 700 && d.attempts[0]!.duration_ms < 1500, `cut at the 800 ms deadline (${d.attempts[0]!.duration_ms})`);
  t.match(d.attempts[1], { status_code: 200, error_class: null });
});

t.test('a 3xx is not followed', async (t) => {
  const { agent, rx } = await setup(t);
  const other = await Receiver.start();
  t.teardown(() => other.close());
  rx.answer = () => ({ status: 307, headers: { location: other.url } });
  const q = await trigger(agent);
  await rx.until(() => rx.of(q.delivery_id).length >= 2);
  const d = await delivery(agent, q.delivery_id);
  t.match(d.attempts[0], { status_code: 307, error_class: 'redirect' });
  t.equal(other.received.length, 0, 'the redirect target never saw it');
});

t.test('after the last retry the delivery is failed, delivery.failed is sent, and replay sends it again with the same id', async (t) => {
  const { agent, rx } = await setup(t);
  let healthy = false;
  rx.answer = (r) => (healthy || r.body.event === 'delivery.failed' ? { status: 200 } : { status: 500, body: 'boom' });
  const q = await trigger(agent, { scenario_id: 'prior_authorization.denied' });
  const d = await settled(agent, q.delivery_id, 'failed');
  t.equal(d.attempts.length, 5, 'one attempt and 4 retries');
  t.same(d.attempts.map((a) => a.kind), ['initial', 'retry', 'retry', 'retry', 'retry']);
  await rx.until(() => rx.events('delivery.failed').length === 1);
  const f = rx.events('delivery.failed')[0]!.body;
  t.match(f.data, { delivery_id: q.delivery_id, failed_event: 'prior_authorization.denied', attempts: 5, resource: { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'transient' }] } });

  healthy = true;
  const rp = await api(srv.url, 'POST', `/v1/webhooks/deliveries/${q.delivery_id}/replay`, { key: agent.key });
  t.equal(rp.status, 202);
  t.match(rp.body, { delivery_id: q.delivery_id, status: 'pending' });
  const after = await settled(agent, q.delivery_id, 'delivered');
  t.equal(after.attempts.length, 6);
  t.match(after.attempts[5], { attempt: 6, kind: 'replay', status_code: 200 });
  const seen = rx.of(q.delivery_id);
  t.equal(seen.length, 6);
  t.ok(seen[5]!.raw.equals(seen[0]!.raw), 'the replay is byte-identical');
  t.ok(seen[5]!.serviceOk && seen[5]!.standardOk);
  t.equal(rx.events('delivery.failed').length, 1, 'delivery.failed once');

  // replaying a delivered one sends it again too
  t.equal((await api(srv.url, 'POST', `/v1/webhooks/deliveries/${q.delivery_id}/replay`, { key: agent.key })).status, 202);
  await rx.until(() => rx.of(q.delivery_id).length === 7);
  // another organization cannot see or replay it
  const stranger = await signupAgent(srv.url, 'Stranger');
  t.equal((await api(srv.url, 'POST', `/v1/webhooks/deliveries/${q.delivery_id}/replay`, { key: stranger.key })).status, 404);
  t.equal((await api(srv.url, 'GET', `/v1/webhooks/deliveries/${q.delivery_id}`, { key: stranger.key })).status, 404);
  t.equal((await api(srv.url, 'POST', '/v1/webhooks/deliveries/dlv_nope/replay', { key: agent.key })).status, 404);
});

t.test('history per connection lists deliveries with their attempts', async (t) => {
  const { agent, rx } = await setup(t);
  const c = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:claims']);
  const q = await trigger(agent, { connection_id: c, scenario_id: 'claim.submitted' });
  await settled(agent, q.delivery_id);
  await rx.until(() => rx.events('connection.created').length === 1);
  const list = await api<{ deliveries: Delivery[] }>(srv.url, 'GET', `/v1/webhooks/deliveries?connection_id=${c}`, { key: agent.key });
  t.equal(list.status, 200);
  t.same(list.body.deliveries.map((x) => x.event).sort(), ['claim.submitted', 'connection.created']);
  t.ok(list.body.deliveries.every((x) => x.connection_id === c && x.attempts.length >= 1));
  const a = list.body.deliveries.find((x) => x.delivery_id === q.delivery_id)!.attempts[0]!;
  t.ok(typeof a.at === 'string' && typeof a.duration_ms === 'number' && a.status_code === 200);
  t.equal((await api(srv.url, 'GET', '/v1/webhooks/deliveries?connection_id=conn_other', { key: agent.key })).status, 404);
  t.equal((await api(srv.url, 'GET', '/v1/webhooks/deliveries?status=bogus', { key: agent.key })).status, 400);
});

t.test('connection.expired is sent once when the TTL runs out', async (t) => {
  const { agent, rx } = await setup(t);
  const c = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:patients'], { ttl_seconds: 1 });
  await rx.until(() => rx.events('connection.expired').length === 1, 10_000);
  const e = rx.events('connection.expired')[0]!.body;
  t.equal(e.connection_id, c);
  t.match(e.data.resource, { resourceType: 'AuditEvent', action: 'U' });
  await new Promise((r) => setTimeout(r, 2500));
  t.equal(rx.events('connection.expired').length, 1, 'never twice');
});

t.test('chaos profiles take the real queue and signing path and are recorded as attempts', async (t) => {
  const { agent, rx } = await setup(t);
  const chaos = (body: Record<string, unknown>) => api(srv.url, 'PATCH', '/v1/sandbox/webhook-reliability', { key: agent.key, body });

  await t.test('transient_503', async (t) => {
    t.match((await chaos({ mode: 'transient_503' })).body, { mode: 'transient_503', failures: 2 });
    const q = await trigger(agent);
    const d = await settled(agent, q.delivery_id);
    t.same(d.attempts.map((a) => [a.status_code, a.chaos]), [[503, 'transient_503'], [503, 'transient_503'], [200, null]]);
    const seen = rx.of(q.delivery_id);
    t.equal(seen.length, 3, 'the receiver saw every retry, same id');
    t.same(seen.map((s) => s.headers['x-service-chaos'] ?? null), ['transient_503', 'transient_503', null]);
    t.ok(seen.every((s) => s.serviceOk && s.standardOk));
  });

  await t.test('rate_limit', async (t) => {
    t.equal((await chaos({ mode: 'rate_limit', retry_after_seconds: 1 })).status, 200);
    const q = await trigger(agent);
    const d = await settled(agent, q.delivery_id);
    t.match(d.attempts[0], { status_code: 429, error_class: 'rate_limited', chaos: 'rate_limit', retry_after_ms: 1000 });
    t.match(d.attempts[1], { status_code: 200, chaos: null });
    const seen = rx.of(q.delivery_id);
    t.ok(seen[1]!.at - seen[0]!.at >= 950, 'Retry-After honoured');
  });

  await t.test('slow', async (t) => {
    t.equal((await chaos({ mode: 'slow', delay_ms: 300 })).status, 200);
    const q = await trigger(agent);
    const d = await settled(agent, q.delivery_id);
    t.ok(d.attempts[0]!.duration_ms >= 300, 'held 300 ms');
    t.equal(d.attempts[0]!.chaos, 'slow');
    t.equal((await chaos({ mode: 'slow', delay_ms: 5000 })).status, 200);
    const q2 = await trigger(agent);
    await new Promise((r) => setTimeout(r, 1200));
    const d2 = await delivery(agent, q2.delivery_id);
    t.match(d2.attempts[0], { error_class: 'timeout', chaos: 'slow' }, 'past the deadline it is a timeout');
    t.equal(rx.of(q2.delivery_id).length, 0);
  });

  await t.test('off', async (t) => {
    t.match((await chaos({ mode: 'off' })).body, { mode: 'off' });
    const q = await trigger(agent);
    const d = await settled(agent, q.delivery_id);
    t.same(d.attempts.map((a) => a.chaos), [null]);
    t.match((await api(srv.url, 'GET', '/v1/sandbox/webhook-reliability', { key: agent.key })).body, { mode: 'off' });
  });

  t.equal((await chaos({ mode: 'explode' })).status, 400);
  t.equal((await chaos({})).status, 400);
  // another organization's deliveries are not affected by this one's profile
  const other = await setup(t);
  await chaos({ mode: 'transient_503' });
  const q = await trigger(other.agent);
  t.same((await settled(other.agent, q.delivery_id)).attempts.map((a) => a.status_code), [200]);
  await chaos({ mode: 'off' });
});

t.test('hostile configuration inputs are refused with 400', async (t) => {
  const agent = await signupAgent(srv.url, 'Hostile');
  const set = (body: unknown) => api<{ error: { code: string; details?: { field?: string; reason?: string } } }>(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body });
  const cases: Array<[string, unknown, number, string | undefined]> = [
    ['huge URL', { url: `https://example.com/${'a'.repeat(5000)}` }, 400, 'NET_ERR_URL_TOO_LONG'],
    ['URL over the schema limit', { url: `https://example.com/${'a'.repeat(10_000)}` }, 400, undefined],
    ['ftp scheme', { url: 'ftp://example.com/hook' }, 400, 'NET_ERR_SCHEME'],
    ['file scheme', { url: 'file:///etc/passwd' }, 400, 'NET_ERR_SCHEME'],
    ['javascript scheme', { url: 'javascript:alert(1)' }, 400, 'NET_ERR_SCHEME'],
    ['credentials in the URL', { url: 'https://user:pw@example.com/hook' }, 400, 'NET_ERR_CREDENTIALS'],
    ['not a URL', { url: 'hook' }, 400, 'NET_ERR_INVALID_URL'],
    ['oversize secret', { url: 'https://example.com/h', secret: `svcsec_${'x'.repeat(1000)}` }, 400, undefined],
    ['secret over 200 characters', { url: 'https://example.com/h', secret: `svcsec_${'x'.repeat(300)}` }, 400, undefined],
    ['secret without the prefix', { url: 'https://example.com/h', secret: 'x'.repeat(40) }, 400, undefined],
    ['short secret', { url: 'https://example.com/h', secret: 'svcsec_short' }, 400, undefined],
    ['secret with a newline', { url: 'https://example.com/h', secret: `svcsec_${'a'.repeat(30)}\nX-Evil: 1` }, 400, undefined],
    ['unknown field', { url: 'https://example.com/h', extra: 1 }, 400, undefined],
    ['url not a string', { url: 42 }, 400, undefined],
    ['unknown connection', { url: 'https://example.com/h', connection_id: 'conn_nope' }, 404, undefined],
  ];
  for (const [name, body, status, reason] of cases) {
    const r = await set(body);
    t.equal(r.status, status, name);
    if (reason) t.equal(r.body.error.details?.reason, reason, `${name}: ${reason}`);
  }
  t.equal((await api(srv.url, 'POST', '/v1/agent/webhook', { body: { url: 'https://example.com/h' } })).status, 401, 'no key');
  t.equal((await api(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: 'https://example.com/h' } })).status, 200);
  t.equal((await api(srv.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body: { scenario_id: 'nope' } })).status, 400);
  t.equal((await api(srv.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body: { connection_id: 'conn_nope' } })).status, 404);
});

t.test('a mock event triggered before any receiver is configured: 202, and delivered once one is (the queue retries it)', async (t) => {
  // the contract answers the trigger 202 {delivery_id, event}; it was 409 without a receiver
  const agent = await signupAgent(srv.url, `Org ${Math.random()}`);
  const q = await trigger(agent, { scenario_id: 'adt.admission' });
  t.equal(q.event, 'adt.admission');
  t.match(q, { receiver_configured: false, note: /no webhook receiver is configured/ }, 'the answer says nothing will arrive yet');
  const first = await (async () => {
    for (const deadline = Date.now() + 10_000; ; ) {
      const d = await delivery(agent, q.delivery_id);
      if (d.attempts.length > 0 || Date.now() > deadline) return d;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  t.match(first.attempts[0], { kind: 'initial', error_class: 'no_endpoint' }, 'the attempt says why: no webhook URL');
  t.not(first.status, 'delivered');
  // configured within the retries: the next attempt delivers it, signed, with the same id
  const rx = await Receiver.start();
  t.teardown(() => rx.close());
  const r = await api<{ secret: string }>(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: rx.url } });
  rx.secret = r.body.secret;
  const replay = await api(srv.url, 'POST', `/v1/webhooks/deliveries/${q.delivery_id}/replay`, { key: agent.key });
  t.ok([202, 409].includes(replay.status), `a replay is taken, or an attempt is in flight (${replay.status})`);
  const d = await settled(agent, q.delivery_id, 'delivered');
  t.equal(d.attempts.at(-1)?.status_code, 200);
  await rx.until(() => rx.of(q.delivery_id).length >= 1);
  t.ok(rx.of(q.delivery_id)[0]?.serviceOk, 'signed with the secret configured after the trigger');
});
