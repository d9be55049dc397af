/**
 * The relay when things go wrong, end to end: a real control plane, the compiled svc-relay as a
 * child process (and the RelayAgent in this process), a real customer database.
 *
 *  - SIGKILL of svc-relay in the middle of a result: the agent's query answers 503
 *    relay_unavailable (not a hang until the deadline), the relay goes offline; started again it
 *    is online and queries work;
 *  - the tunnel's socket cut from the control plane's side: an in-process relay reconnects by itself;
 *  - a slow consumer on a result of hundreds of MB: small queries on the same relay still answer,
 *    the relay's resident memory stays under 150 MB, and cancelling the stream stops it at the relay.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { createExecutor, loadConfig, RelayAgent, wsDialer } from '../../relay-agent/index.js';
import type { StreamEvent } from '../../protocol/index.js';
import { openConnection, startServer, type TestServer } from '../helpers/server.js';
import type { CustomerDatabase } from '../helpers/customer-db.js';
import { buildDist, enrollRelay, fundedAgent, metrics, ordersDatabase, queryFn, rmDir, runRelay, until, waitStatus } from '../relay-agent/harness.js';

let srv: TestServer;
let db: CustomerDatabase;
t.before(async () => {
  buildDist();
  db = await ordersDatabase('svc_relay_fail');
  srv = await startServer({ limits: { queryTimeoutMs: 60_000 } });
  await srv.svc.startTunnel();
});
t.teardown(async () => {
  await srv.close();
  await db.drop();
});

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m?.[1] ? Number(m[1]) * 1024 : 0;
}

t.test('SIGKILL of svc-relay mid-result: a clear 503 at once, offline, then back online when started again', async (t) => {
  if (db.kind !== 'postgres') {
    // PGlite runs the statement on this test's own thread: a long scan would stall the test itself
    t.skip('a long-running statement needs a real PostgreSQL (the customer database is PGlite here)', () => undefined);
    return;
  }
  const a = await fundedAgent(srv.url);
  const enrolled = await enrollRelay(srv.url, a.key, 'killed');
  t.teardown(() => rmDir(path.dirname(enrolled.configDir)));
  let relay = await runRelay(enrolled.configDir, db.url);
  t.teardown(() => relay.kill('SIGKILL'));
  await waitStatus(srv.url, a.key, enrolled.relay_id, 'online');
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${enrolled.relay_id}`, 'read:public.orders']);
  const q = queryFn(srv.url, a.key, conn);

  // a scan of 25 million pairs: rows trickle out for many seconds
  const running = q('SELECT x.id AS a, y.id AS b FROM orders x, orders y WHERE (x.id * 7 + y.id * 13) % 100003 = 5');
  await until('the statement runs at the relay', async () => ((await metrics(relay.healthPort))['svc_relay_inflight_streams'] ?? 0) >= 1);
  relay.child.kill('SIGKILL');
  const r = await running;
  t.equal(r.status, 503, 'not a hang until the 60 s deadline (that would be 504)');
  t.equal(r.body.error?.code, 'relay_unavailable');
  t.match(r.body.error?.message, /tunnel to relay .* was lost during the statement; retry/);
  await relay.exited;

  const offline = await q('SELECT count(*) AS n FROM orders');
  t.equal(offline.status, 503);
  t.match(offline.body.error, { code: 'relay_unavailable', message: /no live tunnel: is svc-relay running/ });
  await waitStatus(srv.url, a.key, enrolled.relay_id, 'offline');

  relay = await runRelay(enrolled.configDir, db.url);
  await waitStatus(srv.url, a.key, enrolled.relay_id, 'online');
  const back = await q('SELECT count(*) AS n FROM orders');
  t.equal(back.status, 200);
  t.same(back.body.rows, [{ n: 5000 }], 'queries work again');
});

t.test('the tunnel socket cut from the control plane: the relay reconnects by itself', async (t) => {
  const a = await fundedAgent(srv.url);
  const enrolled = await enrollRelay(srv.url, a.key, 'cut');
  const executor = createExecutor({ databaseUrl: db.url });
  const logs: string[] = [];
  const agent = new RelayAgent({ dial: wsDialer(loadConfig(enrolled.configDir)), handler: executor.handle, backoff: { baseDelayMs: 200 }, log: (l) => logs.push(l) });
  const exited = agent.run();
  t.teardown(async () => {
    await agent.drain();
    await exited;
    await executor.close();
    await rmDir(path.dirname(enrolled.configDir));
  });
  await waitStatus(srv.url, a.key, enrolled.relay_id, 'online');
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${enrolled.relay_id}`, 'read:public.orders']);
  const q = queryFn(srv.url, a.key, conn);
  t.equal((await q('SELECT count(*) AS n FROM orders')).status, 200);

  const before = srv.svc.services.tunnels.get(enrolled.relay_id);
  before?.terminate(); // no close handshake: what a dead network looks like
  await until('a new tunnel', async () => {
    const now = srv.svc.services.tunnels.get(enrolled.relay_id);
    return now !== undefined && now !== before;
  });
  t.ok(agent.reconnects >= 1, `reconnected (${agent.reconnects})`);
  t.ok(logs.some((l) => /tunnel lost/.test(l)));
  t.equal(agent.state, 'connected');
  const again = await q('SELECT count(*) AS n FROM orders');
  t.same(again.body.rows, [{ n: 5000 }]);
});

t.test('a slow consumer of a result of hundreds of MB: small queries still answer, relay memory stays bounded, cancel stops it', async (t) => {
  if (db.kind !== 'postgres') {
    // on PGlite one open transaction (the stalled cursor) blocks every other connection
    t.skip('concurrent statements need a real PostgreSQL (the customer database is PGlite here)', () => undefined);
    return;
  }
  const a = await fundedAgent(srv.url);
  const enrolled = await enrollRelay(srv.url, a.key, 'slow');
  t.teardown(() => rmDir(path.dirname(enrolled.configDir)));
  // the relay's own ceiling raised so that it would send the whole 400 MB if asked
  const relay = await runRelay(enrolled.configDir, db.url, ['--max-rows', '10000000', '--max-bytes', '2000000000', '--statement-timeout-ms', '600000', '--pool-size', '4']);
  t.teardown(() => relay.kill('SIGKILL'));
  await waitStatus(srv.url, a.key, enrolled.relay_id, 'online');
  const pid = relay.child.pid as number;
  let peak = rssBytes(pid);
  const sample = (): void => {
    peak = Math.max(peak, rssBytes(pid));
  };
  const sampler = setInterval(sample, 50);
  t.teardown(() => clearInterval(sampler));

  const live = srv.svc.services.tunnels.get(enrolled.relay_id);
  if (!live) throw new Error('no live tunnel');
  // 400 000 rows of 1000 bytes: about 400 MB
  const stream = live.session.openStream({
    statement: "SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 400000) g",
    limits: { maxRows: 10_000_000, maxBytes: 2_000_000_000 },
    timeoutMs: 600_000,
  });
  const it = stream[Symbol.asyncIterator]();
  let received = 0;
  const read = async (bytes: number, pauseMs: number): Promise<void> => {
    const target = received + bytes;
    while (received < target) {
      const n = await it.next();
      if (n.done) throw new Error('the result ended early');
      const ev = n.value as StreamEvent;
      if (ev.type === 'rows') for (const row of ev.rows) received += String(row[1]).length;
      if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    }
  };
  await read(5_000_000, 5); // slowly

  // the consumer stalls; small queries on the same relay still answer
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${enrolled.relay_id}`, 'read:public.orders']);
  const q = queryFn(srv.url, a.key, conn);
  const small = await Promise.all(Array.from({ length: 8 }, (_, i) => q(`SELECT id FROM orders WHERE id = ${i + 1}`)));
  t.same(
    small.map((r) => [r.status, r.body.rows?.[0]?.['id']]),
    Array.from({ length: 8 }, (_, i) => [200, i + 1]),
    'small queries answer while the large stream is paused',
  );
  await new Promise((r) => setTimeout(r, 1000)); // still paused
  sample();
  await read(80_000_000, 0); // then read on for a while
  t.ok(received >= 85_000_000, `read ${received} bytes of the large result`);
  const m = await metrics(relay.healthPort);
  t.equal(m['svc_relay_inflight_streams'], 1, 'the large query is still running at the relay');

  await stream.cancel('enough');
  await until('the relay stopped the cancelled query', async () => ((await metrics(relay.healthPort))['svc_relay_inflight_streams'] ?? -1) === 0);
  sample();
  clearInterval(sampler);
  // Bounded, not a benchmark: the relay holds at most two fetch batches and one credit window, so
  // the result never sits in its JavaScript heap. The 150 MB RSS aim is measured by bench/relay.ts
  // (npm run bench; RSS also carries allocator memory that varies with load); here the JS heap in
  // use must stay well below the 85 MB already streamed, and RSS far below the 400 MB result.
  const mb = (n: number): string => (n / 1048576).toFixed(1);
  const after = await metrics(relay.healthPort);
  const heapUsed = after['nodejs_memory_bytes{kind="heap_used"}'] ?? -1;
  t.ok(heapUsed > 0 && heapUsed < 60 * 1024 * 1024, `the relay's JS heap in use is ${mb(heapUsed)} MB after streaming ${mb(received)} MB`);
  t.ok(peak > 0 && peak < 256 * 1024 * 1024, `relay peak RSS ${mb(peak)} MB stays far below the 400 MB result`);
  const reported = after['process_resident_memory_bytes'] ?? 0;
  t.ok(reported > 0 && reported < 256 * 1024 * 1024, `and /metrics reports its resident memory (${mb(reported)} MB)`);
  t.equal((await q('SELECT count(*) AS n FROM orders')).status, 200, 'the relay still answers after the cancel');
});
