/**
 * Retries of enrollment and renewal (relay-agent/retry.ts, p-retry) against a real control plane.
 * Enrollment goes through a small real HTTP server in front of the register endpoint, which
 * answers 503 or 429 itself for the first requests (a restarting or busy control plane) and
 * forwards the rest; renewal goes through a TCP relay in front of the tunnel port that resets
 * the first connections. Transient failures are tried again and the call succeeds; a refusal
 * (used token, deleted relay) is exactly one attempt with a clear error.
 */
import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t from 'tap';
import { enroll, loadConfig, RelayError, RenewError, requestRenewal, retryAfterMs, transientNetworkError, transientStatus } from '../../relay-agent/index.js';
import { api, signupAgent, startServer, tempDir, type TestServer } from '../helpers/server.js';
import type { TapTest } from '../helpers/tap.js';
import { until } from './harness.js';

/** fast backoff for the tests; Retry-After is still honoured */
const FAST = { retries: 3, minTimeoutMs: 5, maxTimeoutMs: 20 };

let srv: TestServer;
let tunnelPort: number;
t.before(async () => {
  srv = await startServer();
  tunnelPort = (await srv.svc.startTunnel()).port;
});
t.teardown(() => srv.close());

async function enrollToken(key: string): Promise<string> {
  const r = await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key, body: {} });
  if (r.status !== 201) throw new Error(`enroll-token: ${r.status} ${r.text}`);
  return r.body.token;
}

type Answer = { status: number; headers?: Record<string, string> } | 'forward';

/** a real HTTP server in front of the control plane: answers the first requests from `script`, forwards the rest */
async function frontServer(t: TapTest, script: Answer[]): Promise<{ url: string; attempts: () => number }> {
  let attempts = 0;
  const s = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      attempts++;
      const answer = script.shift() ?? 'forward';
      if (answer !== 'forward') {
        res.writeHead(answer.status, { 'content-type': 'application/json', ...(answer.headers ?? {}) }).end(JSON.stringify({ error: { code: 'service_unavailable', message: 'restarting' } }));
        return;
      }
      void fetch(srv.url + (req.url ?? '/'), { method: req.method ?? 'GET', headers: { 'content-type': 'application/json' }, body: Buffer.concat(chunks) }).then(async (r) => {
        res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' }).end(await r.text());
      });
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => s.close(() => r())));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, attempts: () => attempts };
}

async function configDir(): Promise<string> {
  return path.join(await tempDir('svc-relay-retry-'), 'cfg');
}

t.test('enroll: 503 twice, then the control plane registers it', async (t) => {
  const a = await signupAgent(srv.url);
  const front = await frontServer(t, [{ status: 503 }, { status: 503 }, 'forward']);
  const log: string[] = [];
  const dir = await configDir();
  const r = await enroll({ controlPlane: front.url, token: await enrollToken(a.key), configDir: dir, keyBits: 2048, retry: FAST, log: (l) => log.push(l) });
  t.equal(front.attempts(), 3, 'two refused attempts and the one that registered');
  t.equal(log.length, 2, 'each retried failure is logged');
  t.match(log[0], /registration attempt 1 of 4 failed: .*HTTP 503 service_unavailable.*trying again/);
  t.equal(loadConfig(dir).relay_id, r.relay_id, 'the configuration is written');
  const listed = await api<{ relays: { relay_id: string }[] }>(srv.url, 'GET', '/v1/relays', { key: a.key });
  t.ok(listed.body.relays.some((x) => x.relay_id === r.relay_id), 'the control plane knows the relay');
});

t.test('enroll: a refusal (a used token) is one attempt and a clear error', async (t) => {
  const a = await signupAgent(srv.url);
  const token = await enrollToken(a.key);
  await enroll({ controlPlane: srv.url, token, configDir: await configDir(), keyBits: 2048 });
  const front = await frontServer(t, []);
  const dir = await configDir();
  const log: string[] = [];
  const err = await enroll({ controlPlane: front.url, token, configDir: dir, keyBits: 2048, retry: FAST, log: (l) => log.push(l) }).catch((e: unknown) => e);
  t.ok(err instanceof RelayError);
  t.equal((err as RelayError).code, 'RELAY_ERR_REGISTER_REFUSED');
  t.match((err as RelayError).message, /refused the registration \(HTTP 409 conflict\): this enrollment token was already used/);
  t.notMatch((err as RelayError).message, /attempts/, 'no retry to report');
  t.equal(front.attempts(), 1, 'exactly one attempt');
  t.same(log, []);
  t.notOk(existsSync(path.join(dir, 'key.pem')), 'nothing written');

  const bad = await frontServer(t, []);
  const e2 = await enroll({ controlPlane: bad.url, token: 'svc_enroll_not_a_token', configDir: dir, keyBits: 2048, retry: FAST }).catch((e: unknown) => e);
  t.match(e2, { code: 'RELAY_ERR_REGISTER_REFUSED', message: /HTTP 401 unauthorized\): unknown enrollment token/ });
  t.equal(bad.attempts(), 1, 'an unknown token: one attempt too');
});

t.test('enroll: 429 with Retry-After waits at least that long', async (t) => {
  const a = await signupAgent(srv.url);
  const front = await frontServer(t, [{ status: 429, headers: { 'retry-after': '1' } }, 'forward']);
  const t0 = Date.now();
  await enroll({ controlPlane: front.url, token: await enrollToken(a.key), configDir: await configDir(), keyBits: 2048, retry: FAST });
  const waited = Date.now() - t0;
  t.equal(front.attempts(), 2);
  t.ok(waited >= 1000, `waited ${waited} ms for Retry-After: 1`);
  t.ok(waited < 5000, `but not much longer (${waited} ms)`);
});

t.test('enroll: a Retry-After beyond the longest wait ends the retries at once', async (t) => {
  const front = await frontServer(t, [{ status: 503, headers: { 'retry-after': '3600' } }]);
  const err = await enroll({ controlPlane: front.url, token: 'svc_enroll_x', configDir: await configDir(), keyBits: 2048, retry: FAST }).catch((e: unknown) => e);
  t.match(err, { code: 'RELAY_ERR_REGISTER_REFUSED' });
  t.match((err as Error).message, /HTTP 503.*asks to retry after 3600 s/);
  t.equal(front.attempts(), 1);
});

t.test('enroll: a refused connection is retried, then reported with the number of attempts', async (t) => {
  const closed = net.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const log: string[] = [];
  const err = await enroll({ controlPlane: `http://127.0.0.1:${port}`, token: 'svc_enroll_x', configDir: await configDir(), keyBits: 2048, retry: { retries: 2, minTimeoutMs: 5 }, log: (l) => log.push(l) }).catch((e: unknown) => e);
  t.match(err, { code: 'RELAY_ERR_UNREACHABLE' });
  t.match((err as Error).message, /ECONNREFUSED.*\(after 3 attempts\)/);
  t.equal(log.length, 2);
  t.notMatch((err as Error).message, /may have registered/, 'a refused connection never reached the control plane');
});

/** a TCP relay to the tunnel port that resets the first `reset` connections */
async function resettingRelay(t: TapTest, reset: number): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const s = net.createServer((c) => {
    connections++;
    if (connections <= reset) {
      c.resetAndDestroy();
      return;
    }
    const up = net.connect(tunnelPort, '127.0.0.1');
    sockets.add(c).add(up);
    c.pipe(up).pipe(c);
    up.on('error', () => c.destroy());
    c.on('error', () => up.destroy());
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        for (const c of sockets) c.destroy();
        s.close(() => r());
      }),
  );
  return { port: (s.address() as AddressInfo).port, connections: () => connections };
}

t.test('renewal: reset connections are retried; a deleted relay is refused at the first attempt', async (t) => {
  const a = await signupAgent(srv.url);
  const r = await enroll({ controlPlane: srv.url, token: await enrollToken(a.key), configDir: await configDir(), keyBits: 2048 });
  const cfg = loadConfig(r.configDir);
  const flaky = await resettingRelay(t, 2);
  const log: string[] = [];
  const renewed = await requestRenewal({ ...cfg, tunnel_url: `wss://127.0.0.1:${flaky.port}` }, { keyBits: 2048, retry: FAST, log: (l) => log.push(l) });
  t.equal(flaky.connections(), 3, 'two reset connections, then the renewal');
  t.match(log[0], /certificate renewal attempt 1 of 4 failed: .*(ECONNRESET|socket hang up)/);
  t.match(renewed.certPem, /BEGIN CERTIFICATE/);

  t.equal((await api(srv.url, 'DELETE', `/v1/relays/${r.relay_id}`, { key: a.key })).status, 200);
  const direct = await resettingRelay(t, 0);
  const current = { ...cfg, keyPem: renewed.keyPem, certPem: renewed.certPem, tunnel_url: `wss://127.0.0.1:${direct.port}` };
  const err = await requestRenewal(current, { keyBits: 2048, retry: FAST }).catch((e: unknown) => e);
  t.ok(err instanceof RenewError);
  t.match(err, { status: 403, reason: 'relay_revoked' });
  t.equal(direct.connections(), 1, 'exactly one attempt');
});

t.test('renewal: stopping the relay ends the wait between attempts at once', async (t) => {
  const a = await signupAgent(srv.url);
  const r = await enroll({ controlPlane: srv.url, token: await enrollToken(a.key), configDir: await configDir(), keyBits: 2048 });
  const down = await resettingRelay(t, Number.POSITIVE_INFINITY);
  const stop = new AbortController();
  const t0 = Date.now();
  // waits: 0.4-0.8 s after the first attempt, then at least 0.8 s after the second (stopped in it)
  const renewing = requestRenewal({ ...loadConfig(r.configDir), tunnel_url: `wss://127.0.0.1:${down.port}` }, { keyBits: 2048, retry: { retries: 3, minTimeoutMs: 400, maxTimeoutMs: 60_000 }, signal: stop.signal });
  await until('the second attempt failed', async () => down.connections() >= 2, 10_000, 10);
  await new Promise((res) => setTimeout(res, 100));
  const stopped = Date.now();
  stop.abort();
  const err = await renewing.catch((e: unknown) => e);
  t.equal((err as Error).name, 'AbortError', 'the stop, not a failure of its own');
  t.ok(Date.now() - stopped < 400, `stopped at once (${Date.now() - stopped} ms), not after the wait`);
  t.equal(down.connections(), 2, 'no further attempt');
  t.ok(Date.now() - t0 < 10_000);
});

t.test('what counts as transient', async (t) => {
  for (const s of [408, 429, 500, 502, 503, 504]) t.ok(transientStatus(s), `${s} is retried`);
  for (const s of [200, 400, 401, 403, 404, 409, 422, 501, 505]) t.notOk(transientStatus(s), `${s} is not`);
  t.equal(retryAfterMs('2'), 2000);
  t.equal(retryAfterMs(['0']), 0);
  t.equal(retryAfterMs(new Date(Date.UTC(2030, 0, 1, 0, 0, 10)).toUTCString(), Date.UTC(2030, 0, 1)), 10_000, 'an HTTP date');
  t.equal(retryAfterMs(undefined), undefined);
  t.equal(retryAfterMs('soon'), undefined);
  t.ok(transientNetworkError(Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('x'), { code: 'ECONNREFUSED' }) })));
  t.ok(transientNetworkError(new DOMException('timed out', 'TimeoutError')));
  t.notOk(transientNetworkError(Object.assign(new Error('bad certificate'), { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' })), 'a certificate problem is not retried');
});
