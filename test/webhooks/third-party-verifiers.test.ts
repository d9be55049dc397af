/**
 * Real deliveries checked the way an outside receiver checks them: with the official Standard
 * Webhooks library (`new Webhook(standard_webhooks_secret).verify(rawBody, headers)`), and with a
 * plain HMAC written here from docs/webhooks.md's words only (none of our signing code). The
 * receiver is a bare node:http server on 127.0.0.1 port 0 that keeps each request's raw bytes and
 * its header names as they came over the wire. The control plane is real (loopback receivers
 * need SVC_WEBHOOK_ALLOW_PRIVATE=1, as the docs say).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import t from 'tap';
import { enqueue } from '../../control-plane/webhooks/index.js';
import type { TapTest } from '../helpers/tap.js';
import { api, openConnection, signupAgent, startServer, type Agent, type TestServer } from '../helpers/server.js';

interface Got {
  readonly raw: Buffer;
  /** header name → value, names exactly as sent */
  readonly wire: Record<string, string>;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: { id: string; event: string; timestamp: string; connection_id: string | null } & Record<string, unknown>;
}

/** answers 200 unless `answer` says otherwise (a promise holds the answer until it settles) */
class Rx {
  readonly got: Got[] = [];
  answer: (g: Got, nth: number) => number | Promise<number> = () => 200;
  url = '';
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const wire: Record<string, string> = {};
      for (let i = 0; i < req.rawHeaders.length; i += 2) wire[req.rawHeaders[i]!] = req.rawHeaders[i + 1]!;
      const g: Got = { raw, wire, headers: req.headers, body: JSON.parse(raw.toString('utf8')) as Got['body'] };
      this.got.push(g);
      const nth = this.of(g.body.id).length;
      void Promise.resolve(this.answer(g, nth)).then((status) => res.writeHead(status).end());
    });
  });

  static async start(t: TapTest): Promise<Rx> {
    const rx = new Rx();
    await new Promise<void>((resolve) => rx.server.listen(0, '127.0.0.1', resolve));
    rx.url = `http://127.0.0.1:${(rx.server.address() as AddressInfo).port}/hook`;
    t.teardown(() => (rx.server.closeAllConnections(), new Promise<void>((resolve) => rx.server.close(() => resolve()))));
    return rx;
  }

  of(id: string): Got[] {
    return this.got.filter((g) => g.body.id === id);
  }

  async until(pred: () => boolean, ms = 20_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > deadline) throw new Error(`receiver: condition not met (${this.got.length} requests seen)`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

// ---- docs/webhooks.md, "Verifying a delivery: two ways", written out independently
const eq = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};
/** way 1: `sha256=` + lowercase hex HMAC-SHA256, key = the whole secret string as UTF-8, message = the raw body */
const way1 = (secret: string, g: Got): boolean => eq(`sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(g.raw).digest('hex')}`, g.headers['x-service-signature'] as string);
/** way 2: `v1,` + base64 HMAC-SHA256 over "<webhook-id>.<webhook-timestamp>.<raw body>", same key bytes */
const way2 = (secret: string, g: Got): boolean => {
  const msg = Buffer.concat([Buffer.from(`${String(g.headers['webhook-id'])}.${String(g.headers['webhook-timestamp'])}.`), g.raw]);
  const want = `v1,${createHmac('sha256', Buffer.from(secret, 'utf8')).update(msg).digest('base64')}`;
  return String(g.headers['webhook-signature']).split(' ').some((s) => eq(s, want));
};
/** "For a secret you chose, compute it yourself as `"whsec_" + base64(utf8(secret))`" */
const whsecOf = (secret: string): string => `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;

/** the official library, given the raw bytes and the headers as they came over the wire */
function library(whsec: string, g: Got): unknown {
  return new Webhook(whsec).verify(g.raw, g.wire);
}

/** Everything docs/webhooks.md promises a receiver about one request, and both verifications. */
function verified(t: TapTest, g: Got, secret: string, whsec: string, what: string): void {
  t.same(library(whsec, g), JSON.parse(g.raw.toString('utf8')), `${what}: the standardwebhooks library verifies it and returns the body`);
  t.ok(new Webhook(whsec).verify(g.raw, g.headers as Record<string, string>), `${what}: and with Node's req.headers as they are`);
  t.ok(way1(secret, g), `${what}: X-Service-Signature verifies by hand`);
  t.ok(way2(secret, g), `${what}: webhook-signature verifies by hand`);
  const names = Object.keys(g.wire);
  for (const h of ['content-type', 'x-service-delivery-id', 'x-service-event', 'x-service-signature', 'webhook-id', 'webhook-timestamp', 'webhook-signature']) {
    t.ok(names.includes(h), `${what}: header ${h} is sent, named as in the docs`);
  }
  t.equal(g.headers['content-type'], 'application/json', `${what}: content-type`);
  t.match(g.headers['x-service-signature'], /^sha256=[0-9a-f]{64}$/, `${what}: sha256= + 64 lowercase hex`);
  t.match(g.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/, `${what}: v1, + base64 of 32 bytes`);
  t.equal(g.headers['webhook-id'], g.headers['x-service-delivery-id'], `${what}: webhook-id is the delivery id`);
  t.equal(g.body.id, g.headers['x-service-delivery-id'], `${what}: the envelope's id is the delivery id`);
  t.equal(g.headers['x-service-event'], g.body.event, `${what}: x-service-event names the envelope's event`);
  t.match(g.headers['webhook-timestamp'], /^[1-9][0-9]{9}$/, `${what}: webhook-timestamp is whole Unix seconds`);
  t.ok(Number(g.headers['webhook-timestamp']) >= Math.floor(Date.parse(g.body.timestamp) / 1000), `${what}: the attempt is not before the event`);
  t.equal(Number(g.headers['content-length']), g.raw.length, `${what}: content-length is the byte length`);
}

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ env: { SVC_WEBHOOK_ALLOW_PRIVATE: '1', SVC_WEBHOOK_RETRY_DELAYS: '50ms,100ms,150ms,200ms' } });
});
t.teardown(() => srv.close());

async function receiver(t: TapTest, agent: Agent, body: Record<string, unknown> = {}): Promise<{ rx: Rx; secret: string; whsec: string }> {
  const rx = await Rx.start(t);
  const r = await api<{ secret?: string; standard_webhooks_secret?: string }>(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: rx.url, ...body } });
  if (r.status !== 200) throw new Error(`webhook: ${r.status} ${r.text}`);
  const secret = typeof body['secret'] === 'string' ? body['secret'] : (r.body.secret ?? '');
  return { rx, secret, whsec: r.body.standard_webhooks_secret ?? whsecOf(secret) };
}

async function mock(agent: Agent, body: Record<string, unknown> = {}): Promise<string> {
  const r = await api<{ delivery_id: string }>(srv.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body });
  if (r.status !== 202) throw new Error(`trigger: ${r.status} ${r.text}`);
  return r.body.delivery_id;
}

/** runs `fn` with the clock read `shiftSeconds` later (the library reads Date.now) */
function shifted<T>(shiftSeconds: number, fn: () => T): T {
  const real = Date.now;
  Date.now = () => real() + shiftSeconds * 1000;
  try {
    return fn();
  } finally {
    Date.now = real;
  }
}

t.test('a generated secret: connection events and mock events verify with the library and by hand; tampering, a wrong secret and a stale timestamp do not', async (t) => {
  const agent = await signupAgent(srv.url, 'Third Party Verifiers');
  const { rx, secret, whsec } = await receiver(t, agent);
  t.match(secret, /^svcsec_[A-Za-z0-9_-]{43}$/);
  t.ok(Buffer.from(whsec.slice('whsec_'.length), 'base64').equals(Buffer.from(secret, 'utf8')), 'standard_webhooks_secret decodes to the svcsec_ string’s UTF-8 bytes');
  t.equal(whsec, whsecOf(secret), 'and is exactly whsec_ + base64(utf8(secret))');

  const conn = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:patients']);
  const q = await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: 'SELECT count(*) AS n FROM patients' } });
  t.equal(q.status, 200, 'a query on the connection');
  const m1 = await mock(agent, { scenario_id: 'claim.adjudicated' });
  const m2 = await mock(agent, { scenario_id: 'adt.transfer', connection_id: conn });
  t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/revoke`, { key: agent.key })).status, 200);
  const events = ['connection.created', 'claim.adjudicated', 'adt.transfer', 'connection.revoked'];
  await rx.until(() => events.every((e) => rx.got.some((g) => g.body.event === e)));
  for (const e of events) verified(t, rx.got.find((g) => g.body.event === e)!, secret, whsec, e);
  t.equal(rx.of(m1)[0]?.body.connection_id, null);
  t.equal(rx.of(m2)[0]?.body.connection_id, conn);

  const g = rx.of(m1)[0]!;
  const tampered: Got = { ...g, raw: Buffer.from(g.raw.toString('utf8').replace('"claim.adjudicated"', '"claim.denied"')) };
  t.throws(() => library(whsec, tampered), WebhookVerificationError, 'the library refuses a changed body');
  t.notOk(way1(secret, tampered) || way2(secret, tampered), 'so does the hand check');
  const other = whsecOf(`svcsec_${'w'.repeat(43)}`);
  t.throws(() => library(other, g), WebhookVerificationError, 'the library refuses another secret');
  t.notOk(way1(`svcsec_${'w'.repeat(43)}`, g), 'so does the hand check');
  t.throws(() => library(whsec, { ...g, wire: { ...g.wire, 'webhook-id': 'dlv_other' } }), WebhookVerificationError, 'the id is signed');
  // the library's tolerance is 5 minutes either way: the timestamp is seconds, not milliseconds
  t.ok(shifted(290, () => library(whsec, g)), 'verifies 290 s after the attempt');
  t.throws(() => shifted(310, () => library(whsec, g)), /too old/, 'refused 310 s after the attempt');
  t.throws(() => shifted(-310, () => library(whsec, g)), /too new/, 'refused when the receiver’s clock is 310 s behind');
});

t.test('a retry after a 500 and a replay: same id and bytes, a fresh signed timestamp, each verifies', async (t) => {
  const agent = await signupAgent(srv.url, 'Retry Verifiers');
  const { rx, secret, whsec } = await receiver(t, agent);
  rx.answer = (_g, nth) => (nth === 1 ? 500 : 200);
  const id = await mock(agent, { scenario_id: 'claim.submitted' });
  await rx.until(() => rx.of(id).length === 2);
  const rp = await api(srv.url, 'POST', `/v1/webhooks/deliveries/${id}/replay`, { key: agent.key });
  t.equal(rp.status, 202);
  await rx.until(() => rx.of(id).length === 3);
  const [first, retry, replay] = rx.of(id) as [Got, Got, Got];
  for (const [g, what] of [[first, 'first attempt (answered 500)'], [retry, 'retry'], [replay, 'replay']] as const) {
    verified(t, g, secret, whsec, what);
    t.equal(g.headers['webhook-id'], id, `${what}: webhook-id is stable`);
    t.ok(g.raw.equals(first.raw), `${what}: the same bytes`);
  }
  t.ok(Number(retry.headers['webhook-timestamp']) >= Number(first.headers['webhook-timestamp']), 'the retry’s timestamp is its own attempt’s');
  t.ok(Number(replay.headers['webhook-timestamp']) >= Number(retry.headers['webhook-timestamp']), 'so is the replay’s');
  const d = await api<{ envelope: unknown; attempts: { kind: string }[] }>(srv.url, 'GET', `/v1/webhooks/deliveries/${id}`, { key: agent.key });
  t.same(d.body.attempts.map((a) => a.kind), ['initial', 'retry', 'replay']);
  t.equal(JSON.stringify(d.body.envelope), first.raw.toString('utf8'), 'the stored envelope is the body as sent');

  // a delivery that uses up its retries: each attempt, and the delivery.failed event, verify
  rx.answer = (g) => (g.body.event === 'delivery.failed' ? 200 : 500);
  const lost = await mock(agent, { scenario_id: 'claim.denied' });
  await rx.until(() => rx.got.some((g) => g.body.event === 'delivery.failed'));
  t.equal(rx.of(lost).length, 5, 'one attempt and 4 retries');
  rx.of(lost).forEach((g, i) => verified(t, g, secret, whsec, `attempt ${i + 1} of a failing delivery`));
  const failed = rx.got.find((g) => g.body.event === 'delivery.failed')!;
  verified(t, failed, secret, whsec, 'delivery.failed');
  t.match(failed.body['data'], { delivery_id: lost, failed_event: 'claim.denied' });
});

t.test('chaos profiles: faulted attempts are signed like any other', async (t) => {
  const agent = await signupAgent(srv.url, 'Chaos Verifiers');
  const { rx, secret, whsec } = await receiver(t, agent);
  for (const profile of [{ mode: 'transient_503', failures: 1 }, { mode: 'slow', delay_ms: 200 }]) {
    t.equal((await api(srv.url, 'PATCH', '/v1/sandbox/webhook-reliability', { key: agent.key, body: profile })).status, 200);
    const id = await mock(agent);
    await rx.until(() => rx.of(id).length === (profile.mode === 'slow' ? 1 : 2));
    rx.of(id).forEach((g, i) => {
      verified(t, g, secret, whsec, `${profile.mode}, attempt ${i + 1}`);
      t.equal(g.headers['x-service-chaos'], i === 0 ? profile.mode : undefined, `${profile.mode}, attempt ${i + 1}: X-Service-Chaos only on a faulted attempt`);
    });
  }
});

t.test('a chosen secret, a new secret while a delivery is retried, and a connection override', async (t) => {
  const agent = await signupAgent(srv.url, 'Chosen Secrets');
  const chosen = `svcsec_${'+/=!~"\\'.repeat(5)}AbZ09`;
  const { rx, whsec } = await receiver(t, agent, { secret: chosen });
  t.equal(whsec, whsecOf(chosen));
  const a = await mock(agent);
  await rx.until(() => rx.of(a).length === 1);
  verified(t, rx.of(a)[0]!, chosen, whsecOf(chosen), 'chosen secret');

  // the secret is looked up again at every attempt: a retry after the secret was replaced is signed with the new one
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  rx.answer = async (_g, nth) => (nth === 1 ? (await held, 500) : 200);
  const b = await mock(agent, { scenario_id: 'eligibility.inactive' });
  await rx.until(() => rx.of(b).length === 1);
  const next = `svcsec_${'n'.repeat(32)}`;
  t.equal((await api(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: rx.url, secret: next } })).status, 200);
  release();
  await rx.until(() => rx.of(b).length === 2);
  const [before, after] = rx.of(b) as [Got, Got];
  verified(t, before, chosen, whsecOf(chosen), 'the attempt before the change');
  verified(t, after, next, whsecOf(next), 'the retry after the change');
  t.throws(() => library(whsecOf(chosen), after), WebhookVerificationError, 'the old secret no longer verifies the retry (no overlap is documented)');

  // a connection's override has its own generated secret
  const conn = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:patients']);
  const over = await receiver(t, agent, { connection_id: conn });
  t.equal(over.whsec, whsecOf(over.secret));
  const c = await mock(agent, { scenario_id: 'prior_authorization.approved', connection_id: conn });
  await over.rx.until(() => over.rx.of(c).length === 1);
  verified(t, over.rx.of(c)[0]!, over.secret, over.whsec, 'override');
  t.throws(() => library(whsecOf(next), over.rx.of(c)[0]!), WebhookVerificationError, 'the default’s secret does not verify the override’s delivery');
  t.equal(rx.of(c).length, 0, 'the default receiver did not get it');
});

t.test('unicode and a large body are signed over exactly the bytes sent', async (t) => {
  const agent = await signupAgent(srv.url, 'Bytes Exactly');
  const { rx, secret, whsec } = await receiver(t, agent);
  const text = 'naïve café — 日本語 🩺 \u2028\u2029 "quoted" \\ </script> \u0000 \ud83d';
  const big = 'Ω'.repeat(1_500_000);
  const q = await srv.svc.services.store.tx((sql) =>
    enqueue(sql, { orgId: agent.orgId, connectionId: null, event: 'adt.admission', environment: 'sandbox', resource: { resourceType: 'Basic', id: 'b-1', text, big } }, { always: true }),
  );
  const id = q!.delivery_id;
  await rx.until(() => rx.of(id).length === 1);
  const g = rx.of(id)[0]!;
  verified(t, g, secret, whsec, 'unicode, 3 MB');
  t.ok(g.raw.length > 3_000_000, 'the whole body arrived');
  const resource = (g.body['data'] as { resource: { text: string; big: string } }).resource;
  t.equal(resource.text, text, 'the text arrives as it was');
  t.equal(resource.big, big);
  t.ok(g.raw.includes(Buffer.from('日本語 🩺', 'utf8')), 'sent as UTF-8, not escaped');
  const d = await api<{ envelope: unknown }>(srv.url, 'GET', `/v1/webhooks/deliveries/${id}`, { key: agent.key });
  t.equal(JSON.stringify(d.body.envelope), g.raw.toString('utf8'), 'the envelope the API shows is the body as sent');
});
