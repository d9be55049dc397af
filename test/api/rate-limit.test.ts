import t from 'tap';
import { TokenBuckets } from '../../control-plane/http/rate-limit.js';
import { api, signupAgent, startServer } from '../helpers/server.js';

t.test('token buckets allow the burst, then refill at the rate', async (t) => {
  const b = new TokenBuckets(2, 4);
  const now = 1_000_000;
  for (let i = 0; i < 4; i++) t.equal(b.take('k', now), 0);
  t.equal(b.take('k', now), 1, 'over the burst: wait a second');
  t.equal(b.take('other', now), 0, 'buckets are per key');
  t.equal(b.take('k', now + 500), 0, 'half a second refills one token at 2/s');
  t.ok(b.take('k', now + 500) > 0);
});

t.test('a clock stepped back neither refuses a key for the length of the step nor credits time twice', async (t) => {
  // review: the in-memory buckets (embedded store) added (now - at) × rate even when negative: an
  // hour's step back took 7,200 tokens at 2/s, and the key was refused for about that hour
  const b = new TokenBuckets(2, 4);
  const now = 10_000_000;
  t.equal(b.take('k', now), 0);
  t.equal(b.take('k', now - 3_600_000), 0, 'a take an hour "earlier" is allowed: nothing was taken by the step');
  t.equal(b.wait('k', now - 3_600_000), 0, 'and a wait says so');
  t.equal(b.take('k', now), 0, 'back at the first time: the bucket is where the two takes left it');
  t.equal(b.take('k', now), 0);
  t.ok(b.take('k', now) > 0, 'the burst of four is spent: the step back credited no time');
  t.equal(b.take('k', now + 500), 0, 'and refills at the rate from the latest time seen');
});

t.test('a wall clock stepped back and left there does not stop a bucket refilling', async (t) => {
  // review of 8ef84f0: a step back credited nothing until the clock passed the bucket's time again,
  // so a key that spent its burst after an hour's step back was refused for that hour (Retry-After
  // saying a second); the buckets' own clock only moves forward now
  const b = new TokenBuckets(1000, 1); // a token a millisecond, a burst of one
  const wall = Date.now.bind(Date);
  let offset = 0;
  Date.now = () => wall() - offset;
  t.teardown(() => {
    Date.now = wall;
  });
  t.equal(b.take('k'), 0, 'the burst');
  offset = 3_600_000; // the clock is set back an hour, and runs on from there
  await new Promise((r) => setTimeout(r, 20));
  t.equal(b.take('k'), 0, 'a token refilled since (20 ms at 1,000 a second)');
});

t.test('an agent over its limit gets 429 rate_limited with Retry-After; others are unaffected', async (t) => {
  const srv = await startServer({ env: { SVC_RATE_LIMIT: '5', SVC_SIGNUP_RATE_LIMIT: '3' } });
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url, 'A');
  const b = await signupAgent(srv.url, 'B');
  const statuses: number[] = [];
  let limited: Awaited<ReturnType<typeof api<{ error: { code: string; message: string } }>>> | undefined;
  for (let i = 0; i < 15; i++) {
    const r = await api<{ error: { code: string; message: string } }>(srv.url, 'GET', '/v1/connections/packs', { key: a.key });
    statuses.push(r.status);
    if (r.status === 429) limited ??= r;
  }
  t.ok(statuses.filter((s) => s === 200).length >= 10, 'the burst (2× the rate) passes');
  t.ok(limited, 'then requests are limited');
  t.equal(limited?.body.error.code, 'rate_limited');
  t.match(limited?.headers.get('retry-after'), /^\d+$/);
  t.equal((await api(srv.url, 'GET', '/v1/connections/packs', { key: b.key })).status, 200, 'another key is unaffected');
  // (GET /metrics without SVC_METRICS_TOKEN: open, and counts these 429s; test/api/metrics has the rest)
  const metrics = await fetch(`${srv.url}/metrics`);
  t.equal(metrics.status, 200, '/metrics is open when no token is set');
  t.match(await metrics.text(), /svc_http_requests_total\{method="GET",route="\/v1\/connections\/packs",status="429"\} \d+/);

  // signups per address: 2 made above, 1 more allowed at a burst of 3
  t.equal((await api(srv.url, 'POST', '/v1/agent/account', { body: { orgName: 'C', agentName: 'c' } })).status, 201);
  const over = await api<{ error: { code: string } }>(srv.url, 'POST', '/v1/agent/account', { body: { orgName: 'D', agentName: 'd' } });
  t.equal(over.status, 429);
  t.equal(over.body.error.code, 'rate_limited');
});
