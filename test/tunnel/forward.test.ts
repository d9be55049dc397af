/**
 * The asking side of a relay forward (tunnel/forward.ts): a replica's first forwards after a
 * start share one certificate (found by review: each concurrent first forward generated its own
 * RSA key on the main thread, about 4 s of blocked event loop for 12 of them, and left the
 * replaced agents' sockets open).
 */
import https from 'node:https';
import net from 'node:net';
import t from 'tap';
import { createCa, issueServerCertificate, tlsServerOptions } from '../../pki/index.js';
import { FORWARD_CONNECT_MS, RelayForwarder, serveForward, silentAfterMs, type ServeForwarded } from '../../control-plane/tunnel/forward.js';
import type { ReadQueryResult } from '../../control-plane/results/index.js';
import { ApiError } from '../../control-plane/errors.js';
import type { Store } from '../../control-plane/store/index.js';
import { tcpServer } from '../helpers/tcp.js';
import type { TapTest } from '../helpers/tap.js';

t.test('concurrent first forwards share one replica certificate', async (t) => {
  const ca = createCa({ keyBits: 2048 });
  let asked = 0;
  const store = { kind: 'embedded' } as unknown as Store; // holder() is not called here
  const fwd = new RelayForwarder(store, 'rep_single', async () => {
    asked++;
    return ca;
  });
  t.teardown(() => fwd.close());
  const agent = (fwd as unknown as { agent(): Promise<{ agent: object }> }).agent.bind(fwd);
  const got = await Promise.all(Array.from({ length: 12 }, () => agent()));
  t.equal(asked, 1, 'the CA was asked once');
  t.equal(new Set(got.map((g) => g.agent)).size, 1, 'one agent, one certificate, for all twelve');
  t.equal((await agent()).agent, got[0]?.agent, 'and kept for later forwards');
});

/** a forwarder, and a holder that accepts connections and never answers (a replica frozen, or cut off) */
async function silentHolder(t: TapTest, timeoutMs: number) {
  const ca = createCa({ keyBits: 2048 });
  const store = { kind: 'embedded' } as unknown as Store; // holder() is not called here
  const fwd = new RelayForwarder(store, 'rep_asker', async () => ca);
  t.teardown(() => fwd.close());
  const { port } = await tcpServer(t);
  const holder = { replicaId: 'rep_holder', address: `127.0.0.1:${port}` };
  const request = { relay_id: 'rly_x', sql: 'SELECT 1', limits: { timeoutMs, maxRows: 10, maxBytes: 1000 } } as unknown as Parameters<RelayForwarder['run']>[1];
  return { fwd, holder, request };
}

t.test('a forward stopped before or while it is sent fails alone and never ends the process', async (t) => {
  const { fwd, holder, request } = await silentHolder(t, 5000);
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown): void => void uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  t.teardown(() => process.off('uncaughtException', onUncaught));
  // already stopped when asked
  await t.rejects(fwd.run(holder, request, AbortSignal.abort()), /aborted/);
  // stopped while the request is on its way
  const c = new AbortController();
  const running = fwd.run(holder, request, c.signal);
  setImmediate(() => c.abort());
  await t.rejects(running, /aborted/);
  await new Promise((r) => setTimeout(r, 200)); // a late 'error' from the destroyed request would surface here
  t.same(uncaught, [], 'no unhandled error');
});

t.test('a holder that accepts the connection and never completes it is not waited for until the deadline', async (t) => {
  // review: a frozen holder (its kernel still accepts) held every forward to it until the statement's deadline plus 5 s
  const { fwd, holder, request } = await silentHolder(t, 600_000);
  const err = (await fwd.run(holder, request).then(() => undefined, (e: unknown) => e)) as ApiError | undefined;
  t.ok(err instanceof ApiError, String(err));
  t.equal(err?.code, 'relay_unavailable', 'a retryable 503');
  t.match(err?.message, new RegExp(`did not complete the connection within ${FORWARD_CONNECT_MS / 1000} s`), 'answered after the connection bound, not the 10-minute deadline');
  t.equal(err?.headers?.['Retry-After'], '1');
});

/**
 * A holder (serveForward over mutual TLS, its server certificate from the CA) whose statement
 * answers after `answerMs`, beating every `heartbeatMs`, reached through a proxy that can freeze:
 * it then passes nothing either way and keeps both connections open, as a holder stopped
 * (SIGSTOP) or cut off by the network whose kernel still holds the connection.
 */
async function freezableHolder(t: TapTest, o: { readonly heartbeatMs: number; readonly answerMs: number; readonly failWith?: Error; readonly serve?: ServeForwarded }) {
  const ca = createCa({ keyBits: 2048 });
  const cert = issueServerCertificate(ca, { ipAddresses: ['127.0.0.1'] });
  const result: ReadQueryResult = { columns: [{ name: 'one', typeOid: 23 }], rows: [{ one: 1 }], truncated: false, bytes: 9 } as unknown as ReadQueryResult;
  let started = false; // serve is called once the answer's headers are sent
  const failures: unknown[] = [];
  const serve: ServeForwarded = (request, signal, onStart) =>
    new Promise((resolve, reject) => {
      started = true;
      if (o.serve) return o.serve(request, signal, onStart).then(resolve, reject);
      const timer = setTimeout(() => (o.failWith ? reject(o.failWith) : resolve(result)), o.answerMs);
      signal.addEventListener('abort', () => (clearTimeout(timer), reject(new Error('asker gone'))), { once: true });
    });
  const holder = https.createServer({ ...tlsServerOptions({ keyPem: cert.keyPem, certPem: cert.certPem, caCertPem: ca.certPem }), rejectUnauthorized: false }, (req, res) => {
    // as the tunnel listener (tunnel/index.ts): logged, and an answer not ended is cut
    serveForward(req, res, ca, serve, o.heartbeatMs).catch((err: unknown) => {
      failures.push(err);
      if (!res.writableEnded) res.destroy();
    });
  });
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
  const sockets = new Set<net.Socket>();
  let frozen = false;
  const proxy = net.createServer((client) => {
    const up = net.connect((holder.address() as net.AddressInfo).port, '127.0.0.1');
    for (const [from, to] of [[client, up], [up, client]] as const) {
      sockets.add(from);
      from.on('error', () => undefined);
      from.on('data', (d: Buffer) => void (frozen || to.write(d)));
      from.on('close', () => to.destroy());
    }
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
  t.teardown(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => proxy.close(r));
    await new Promise((r) => holder.close(r));
  });
  const fwd = new RelayForwarder({ kind: 'embedded' } as unknown as Store, 'rep_asker', async () => ca);
  t.teardown(() => fwd.close());
  const request = { relay_id: 'rly_x', connection_id: 'conn_x', sql: 'SELECT 1', limits: { timeoutMs: 600_000, maxRows: 10, maxBytes: 1000 } };
  const address = { replicaId: 'rep_holder', address: `127.0.0.1:${(proxy.address() as net.AddressInfo).port}` };
  return {
    run: (signal?: AbortSignal, onStart?: () => void) => fwd.run(address, request, signal, onStart),
    freeze: () => void (frozen = true),
    started: () => started,
    failures,
  };
}

t.test('a holder that freezes while the statement runs is given up once it falls silent, not at the deadline', async (t) => {
  // review: a forward already sent to a holder that then froze waited for the statement's deadline plus 5 s
  const h = await freezableHolder(t, { heartbeatMs: 100, answerMs: 600_000 });
  const started = Date.now();
  const running = h.run().then(
    () => undefined,
    (e: unknown) => e,
  );
  // frozen once the statement runs on the holder, its headers and a few beats through
  while (!h.started()) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 250));
  h.freeze();
  const err = (await running) as ApiError | undefined;
  t.ok(err instanceof ApiError, String(err));
  t.equal(err?.code, 'relay_unavailable', 'a retryable 503');
  t.match(err?.message, new RegExp(`stopped answering \\(nothing for ${silentAfterMs(100) / 1000} s`), 'given up for its silence');
  t.ok(Date.now() - started < 60_000, `long before the 10-minute deadline (${Date.now() - started} ms)`);
});

t.test('a holder that beats is waited for past the silence bound, and its answer comes through', async (t) => {
  const h = await freezableHolder(t, { heartbeatMs: 100, answerMs: silentAfterMs(100) * 2 });
  const rows = await h.run();
  t.same(rows.rows, [{ one: 1 }], 'answered after twice the silence bound: the beats kept it');
});

t.test("a holder's heartbeat is waited for within a timer's range, whatever it says", async (t) => {
  // review: a holder saying x-svc-heartbeat-ms: 1e12 overflowed the timer, which fired at once
  t.equal(silentAfterMs(1000), 5000, 'five beats');
  t.equal(silentAfterMs(1), 1000, 'at least a second');
  t.equal(silentAfterMs(1e12), 300_000, 'at most five minutes');
});

t.test("a failure of the holder's own (not an API error) reaches the asker as a 500, not as a holder gone", async (t) => {
  // review: since the holder sends its headers first, such a failure cut the answer, which the
  // asker read as an unreachable holder (a retryable 503 relay_unavailable)
  const bug = new TypeError('a bug on the holder');
  const h = await freezableHolder(t, { heartbeatMs: 100, answerMs: 50, failWith: bug });
  const err = (await h.run().then(() => undefined, (e: unknown) => e)) as ApiError | undefined;
  t.ok(err instanceof ApiError, String(err));
  t.equal(err?.code, 'internal_error');
  t.equal(err?.status, 500);
  t.notMatch(err?.message, /a bug on the holder/, "the failure's own text stays on the holder");
  t.same(h.failures, [bug], 'thrown on to the listener, which logs it');
});

/**
 * The asker counts a forwarded statement as started (an agent leaving is then charged, as one
 * leaving a local relay statement) only when the holder says it sent the statement to the relay:
 * a holder that refuses it first (the connection gone, an outdated relay, its tunnel lost) leaves
 * the agent uncharged. (Read in review: the relay backend marked the start before forwarding, so
 * an agent leaving during a forward the holder then refused was charged the query price.)
 */
t.test('a forwarded statement counts as started only when the holder sent it to the relay', async (t) => {
  const rows: ReadQueryResult = { columns: [{ name: 'one', type_oid: 23 }], rows: [{ one: 1 }], truncated: false, bytes: 9 };
  t.test('refused by the holder before it was sent: never started, while the asker waits or after it gave up', async (t) => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let asked = 0;
    const h = await freezableHolder(t, {
      heartbeatMs: 50,
      answerMs: 0,
      serve: async () => {
        asked++;
        await gate;
        throw new ApiError('relay_unavailable', 'relay rly_x is outdated', { reason: 'relay_outdated' });
      },
    });
    let starts = 0;
    const gone = new AbortController();
    const leaving = h.run(gone.signal, () => starts++).then(
      () => undefined,
      (e: unknown) => e,
    );
    while (!h.started()) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 150)); // the holder's headers and beats arrived meanwhile
    gone.abort();
    t.match(await leaving, /aborted/, 'the asker gave up');
    t.equal(starts, 0, 'not started: the holder had not sent it');
    release();
    const refused = (await h.run(undefined, () => starts++).then(() => undefined, (e: unknown) => e)) as ApiError | undefined;
    t.equal(refused?.code, 'relay_unavailable', "the holder's refusal comes through");
    t.equal(refused?.details?.['reason'], 'relay_outdated');
    t.equal(starts, 0, 'a refusal is not a start');
    t.equal(asked, 2);
  });
  t.test('sent by the holder: started before its answer, once', async (t) => {
    const order: string[] = [];
    let sent!: () => void;
    const sentNow = new Promise<void>((r) => (sent = r));
    const h = await freezableHolder(t, {
      heartbeatMs: 50,
      answerMs: 0,
      serve: async (_request, _signal, onStart) => {
        onStart();
        sent();
        await new Promise((r) => setTimeout(r, 200)); // runs a while at the relay, beating
        return rows;
      },
    });
    const running = h.run(undefined, () => order.push('started')).then((r) => (order.push('answered'), r));
    await sentNow;
    const answer = await running;
    t.same(answer.rows, [{ one: 1 }]);
    t.same(order, ['started', 'answered']);
  });
  t.test('a holder that does not announce the signal (an older version) counts as started when it answers', async (t) => {
    const ca = createCa({ keyBits: 2048 });
    const cert = issueServerCertificate(ca, { ipAddresses: ['127.0.0.1'] });
    const older = https.createServer({ ...tlsServerOptions({ keyPem: cert.keyPem, certPem: cert.certPem, caCertPem: ca.certPem }), rejectUnauthorized: false }, (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if ((JSON.parse(body) as { sql?: string }).sql === 'REFUSE') {
          // refused before running, as every holder refuses a caller it does not accept
          res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'forbidden', message: 'not a replica' } }));
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json', 'x-svc-heartbeat-ms': '1000' });
        res.flushHeaders();
        setTimeout(() => res.end(JSON.stringify(rows)), 100);
      });
    });
    await new Promise<void>((r) => older.listen(0, '127.0.0.1', () => r()));
    t.teardown(() => new Promise((r) => older.close(r)));
    const fwd = new RelayForwarder({ kind: 'embedded' } as unknown as Store, 'rep_asker', async () => ca);
    t.teardown(() => fwd.close());
    const order: string[] = [];
    const request = { relay_id: 'rly_x', connection_id: 'conn_x', sql: 'SELECT 1', limits: { timeoutMs: 60_000, maxRows: 10, maxBytes: 1000 } };
    const answer = await fwd.run({ replicaId: 'rep_old', address: `127.0.0.1:${(older.address() as net.AddressInfo).port}` }, request, undefined, () => order.push('started'));
    order.push('answered');
    t.same(answer.rows, [{ one: 1 }]);
    t.same(order, ['started', 'answered'], 'as before the signal: started once its answer began');
    // review: a 4xx refusal (no header either) counted as started too
    let starts = 0;
    const refused = await fwd.run({ replicaId: 'rep_old', address: `127.0.0.1:${(older.address() as net.AddressInfo).port}` }, { ...request, sql: 'REFUSE' }, undefined, () => starts++).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.equal((refused as ApiError | undefined)?.code, 'relay_unavailable', `refused: ${String(refused)}`);
    t.equal(starts, 0, 'a refusal before running is not a start');
  });
});
