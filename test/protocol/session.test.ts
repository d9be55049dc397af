import t, { type Test } from 'tap';
import {
  HEADER_SIZE,
  IncomingQuery,
  ManualClock,
  ProtocolError,
  Session,
  encodeFrame,
  memoryTransportPair,
  type Row,
  type StreamEvent,
} from '../../protocol/index.js';
import { code, pair, rawPeer, settle, settleN, type RawPeer } from './fixtures/peers.js';

function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function syncCode(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return (err as ProtocolError).code;
  }
}

/** the session closed with `want`, told the raw peer with an ERROR on stream 0, and closed the transport with the code as reason */
async function expectFatal(t: Test, peer: RawPeer, want: string, closeCode = 1002): Promise<void> {
  const info = await peer.session.closed;
  t.equal(info.error?.code, want, `session closed with ${want}`);
  t.equal(info.code, closeCode, `close code ${closeCode}`);
  await settle();
  const err = peer.frames.find((f) => f.type === 'ERROR' && f.streamId === 0);
  t.equal(err?.type === 'ERROR' ? err.error.code : undefined, want, 'the peer was told the code in an ERROR frame');
  t.same(peer.closed, { code: closeCode, reason: want }, 'and the transport closed with the code as reason');
}

// ------------------------------------------------------------------ HELLO

t.test('hello negotiates the highest common version and the common features', async (t) => {
  const p = await pair({ versions: [1, 2], features: ['a', 'b'], agent: 'control-plane/0.1' }, { versions: [1], features: ['b', 'c'], agent: 'svc-relay/0.1' });
  const s = await p.server.ready;
  const c = await p.client.ready;
  t.equal(s.version, 1);
  t.equal(c.version, 1);
  t.same(s.features, ['b']);
  t.same(c.features, ['b']);
  t.equal(s.peer.role, 'client');
  t.equal(s.peer.agent, 'svc-relay/0.1');
  t.equal(c.peer.agent, 'control-plane/0.1');
  t.equal(p.server.state, 'open');
  p.server.close();
  const info = await p.client.closed;
  t.equal(info.code, 1000);
  t.equal(info.error, null, 'a graceful close carries no error');
});

t.test('hello version mismatch closes both sides with PROTO_ERR_VERSION_MISMATCH', async (t) => {
  const [st, ct] = memoryTransportPair();
  const s = new Session(st, { role: 'server', versions: [1] });
  const c = new Session(ct, { role: 'client', versions: [2, 3] });
  t.equal(await code(s.ready), 'PROTO_ERR_VERSION_MISMATCH');
  t.equal(await code(c.ready), 'PROTO_ERR_VERSION_MISMATCH');
  const si = await s.closed;
  t.equal(si.code, 1002);
  t.equal(si.reason, 'PROTO_ERR_VERSION_MISMATCH');
  t.match(si.error?.message, /versions \[2, 3\]/);
  t.equal(syncCode(() => s.openStream({ statement: 'x' })), 'PROTO_ERR_SESSION_CLOSED');
});

t.test('hello: same role, missing HELLO, HELLO twice, bad values, and the timeout', async (t) => {
  const same = await rawPeer({ role: 'server' }, null);
  same.send({ type: 'HELLO', streamId: 0, hello: { versions: [1], features: [], role: 'server', maxFrameSize: 4096, streamWindow: 4096, sessionWindow: 4096, maxConcurrentStreams: 1 } });
  await expectFatal(t, same, 'PROTO_ERR_BAD_HELLO');

  const first = await rawPeer({ role: 'server' }, null);
  first.send({ type: 'PING', streamId: 0, data: Buffer.alloc(8) });
  await expectFatal(t, first, 'PROTO_ERR_BAD_HELLO');

  const twice = await rawPeer({ role: 'server' });
  twice.send({ type: 'HELLO', streamId: 0, hello: { versions: [1], features: [], role: 'client', maxFrameSize: 4096, streamWindow: 4096, sessionWindow: 4096, maxConcurrentStreams: 1 } });
  await expectFatal(t, twice, 'PROTO_ERR_BAD_HELLO');

  const tiny = await rawPeer({ role: 'server' }, null);
  tiny.send({ type: 'HELLO', streamId: 0, hello: { versions: [1], features: [], role: 'client', maxFrameSize: 10, streamWindow: 4096, sessionWindow: 4096, maxConcurrentStreams: 1 } });
  await expectFatal(t, tiny, 'PROTO_ERR_BAD_HELLO');

  const silent = await rawPeer({ role: 'server', helloTimeoutMs: 5000 }, null);
  silent.clock.advance(4999);
  await settle();
  t.equal(silent.session.state, 'hello', 'still waiting just before the timeout');
  silent.clock.advance(1);
  await expectFatal(t, silent, 'PROTO_ERR_HELLO_TIMEOUT', 4000);
  t.equal(await code(silent.session.ready), 'PROTO_ERR_HELLO_TIMEOUT');
});

t.test('options are validated once, at construction', async (t) => {
  const [a] = memoryTransportPair();
  t.equal(syncCode(() => new Session(a, { role: 'boss' as 'server' })), 'PROTO_ERR_INVALID_ARGUMENT');
  t.equal(syncCode(() => new Session(a, { role: 'server', streamWindow: 10 })), 'PROTO_ERR_INVALID_ARGUMENT');
  t.equal(syncCode(() => new Session(a, { role: 'server', maxFrameSize: 1.5 })), 'PROTO_ERR_INVALID_ARGUMENT');
  t.equal(syncCode(() => new Session(a, { role: 'server', versions: [] })), 'PROTO_ERR_INVALID_ARGUMENT');
  t.equal(syncCode(() => new Session(a, { role: 'server', maxMissedPongs: 0 })), 'PROTO_ERR_INVALID_ARGUMENT');
  const [b] = memoryTransportPair();
  const s = new Session(b, { role: 'server' });
  t.equal(syncCode(() => s.openStream({ statement: 'x' })), 'PROTO_ERR_NOT_READY', 'no stream before HELLO completes');
  s.close();
});

// ------------------------------------------------------------------ streams

const COLUMNS = [
  { name: 'i', typeOid: 23 },
  { name: 's', type: 'text' },
];

function rowsFor(k: number, n: number): Row[] {
  const out: Row[] = [];
  for (let i = 0; i < n; i++) out.push([i, `stream ${k} row ${i}`]);
  return out;
}

t.test('100 concurrent streams, each carrying a known number of rows, all correct', async (t) => {
  const W = 16 * 1024;
  const p = await pair({ streamWindow: W, sessionWindow: 16 * W }, { dataFrameSize: 2048 });
  let maxQueued = 0;
  p.client.onStream(async (q) => {
    const k = Number(q.open.params?.[0]);
    const n = Number(q.open.params?.[1]);
    await q.sendColumns(COLUMNS);
    const rows = rowsFor(k, n);
    for (let i = 0; i < n; i += 37) {
      await q.sendRows(rows.slice(i, i + 37));
      maxQueued = Math.max(maxQueued, p.client.stats().queuedBytes);
    }
    await q.end({ command: `SELECT ${n}` });
  });
  const streams = Array.from({ length: 100 }, (_, k) => p.server.openStream({ statement: 'SELECT i, s FROM gen($1, $2)', params: [k, k * 13 + (k % 3 === 0 ? 0 : 5)] }));
  t.equal(new Set(streams.map((s) => s.id)).size, 100, '100 distinct stream ids');
  t.ok(streams.every((s) => s.id % 2 === 1), 'the server opens odd ids');
  let maxBuffered = 0;
  const results = await Promise.all(
    streams.map(async (s, k) => {
      const rows: Row[] = [];
      let columns: unknown;
      let end: unknown;
      for await (const ev of s) {
        maxBuffered = Math.max(maxBuffered, p.server.stats().bufferedBytes);
        t.ok(s.bufferedBytes <= W, 'a stream never holds more than its window');
        if (ev.type === 'columns') columns = ev.columns;
        else if (ev.type === 'rows') rows.push(...ev.rows);
        else end = ev.end;
        if (k % 10 === 0) await settle(); // some consumers are slow
      }
      return { rows, columns, end };
    }),
  );
  let total = 0;
  let bad = 0;
  results.forEach((r, k) => {
    const n = k * 13 + (k % 3 === 0 ? 0 : 5);
    total += n;
    if (JSON.stringify(r.rows) !== JSON.stringify(rowsFor(k, n))) bad++;
    if ((r.end as { rowCount: number }).rowCount !== n) bad++;
    if ((r.end as { command: string }).command !== `SELECT ${n}`) bad++;
    if (JSON.stringify(r.columns) !== JSON.stringify(COLUMNS)) bad++;
  });
  t.equal(bad, 0, `all 100 streams carried exactly their rows (${total} rows in all)`);
  t.ok(maxBuffered <= 16 * W, `session-wide buffering stayed within the session window (max ${maxBuffered})`);
  await settle();
  t.equal(p.server.stats().streams, 0, 'no stream left open on the server');
  t.equal(p.client.stats().streams, 0, 'no stream left open on the client');
  t.equal(p.client.stats().queuedBytes, 0);
  // credit flowed back: the client can still send a full window
  const again = await p.server.openStream({ statement: 'again', params: [1, 500] }).collect();
  t.equal(again.rows.length, 500, 'the session is still healthy afterwards');
});

t.test('cancellation from the opener reaches the handler (signal) and stops its sends', async (t) => {
  const p = await pair({ streamWindow: 4096 });
  const handlerDone = deferred<{ sendErr: string | undefined; reason: string | undefined; sent: number }>();
  p.client.onStream(async (q) => {
    await q.sendColumns(COLUMNS);
    let sent = 0;
    let sendErr: string | undefined;
    try {
      for (;;) {
        await q.sendRows([[sent, 'x'.repeat(50)]]);
        sent++;
      }
    } catch (err) {
      sendErr = (err as ProtocolError).code;
    }
    handlerDone.resolve({ sendErr, reason: (q.signal.reason as ProtocolError | undefined)?.code, sent });
  });
  const s = p.server.openStream({ statement: 'SELECT forever' });
  const it = s[Symbol.asyncIterator]();
  t.equal(((await it.next()).value as StreamEvent).type, 'columns');
  t.equal(((await it.next()).value as StreamEvent).type, 'rows');
  s.cancel('enough');
  t.equal(await code(it.next()), 'PROTO_ERR_CANCELLED', 'the reader sees PROTO_ERR_CANCELLED');
  const h = await handlerDone.promise;
  t.equal(h.sendErr, 'PROTO_ERR_CANCELLED', 'the pending send rejected');
  t.equal(h.reason, 'PROTO_ERR_CANCELLED', 'the handler signal aborted with PROTO_ERR_CANCELLED');
  t.ok(h.sent < 200, `the producer was held by the window (${h.sent} rows sent)`);
  await settle();
  t.equal(p.server.stats().streams, 0, 'the stream is gone on the opener once the cancel was acknowledged');
  t.equal(p.client.stats().streams, 0);
  t.ok(p.server.stats().bufferedBytes < 4096, 'what was buffered was released');
  s.cancel('again');
  t.pass('cancel is idempotent');
  // breaking out of for-await cancels too
  const s2 = p.server.openStream({ statement: 'SELECT forever' });
  for await (const ev of s2) if (ev.type === 'rows') break;
  await settle();
  t.equal(p.client.stats().streams, 0, 'break cancelled the stream at the handler');
  // and the session still works
  p.client.onStream(async (q) => {
    await q.sendColumns(COLUMNS);
    await q.sendRows([[1, 'one']]);
    await q.end();
  });
  const r = await p.server.openStream({ statement: 'SELECT 1' }).collect();
  t.same(r.rows, [[1, 'one']]);
  t.same(r.end, { rowCount: 1, byteCount: r.end.byteCount });
  t.ok(r.end.byteCount > 0, 'END counts the ROWS payload bytes');
});

t.test('the accepting side ends a stream with a coded error (explicitly, by throwing, or by forgetting to end)', async (t) => {
  const p = await pair();
  p.client.onStream(async (q) => {
    await q.sendColumns(COLUMNS);
    await q.sendRows([[1, 'a']]);
    switch (q.open.statement) {
      case 'fail':
        q.fail('RELAY_ERR_QUERY', 'relation "nope" does not exist', { detail: { sqlstate: '42P01' } });
        return;
      case 'throw coded':
        throw Object.assign(new Error('statement timeout'), { code: 'RELAY_ERR_TIMEOUT' });
      case 'throw plain':
        throw new Error('oops');
      case 'forget':
        return;
    }
  });
  const s = p.server.openStream({ statement: 'fail' });
  const seen: string[] = [];
  let err: ProtocolError | undefined;
  try {
    for await (const ev of s) seen.push(ev.type);
  } catch (e) {
    err = e as ProtocolError;
  }
  t.same(seen, ['columns', 'rows'], 'what came before the error is delivered first');
  t.equal(err?.code, 'RELAY_ERR_QUERY');
  t.equal(err?.remote, true);
  t.same(err?.detail, { sqlstate: '42P01' });
  t.match(err?.message, /does not exist/);
  t.equal(await code(p.server.openStream({ statement: 'throw coded' }).collect()), 'RELAY_ERR_TIMEOUT');
  t.equal(await code(p.server.openStream({ statement: 'throw plain' }).collect()), 'PROTO_ERR_HANDLER');
  t.equal(await code(p.server.openStream({ statement: 'forget' }).collect()), 'PROTO_ERR_HANDLER');
  await settle();
  t.equal(p.server.stats().streams + p.client.stats().streams, 0);
  t.equal(p.server.state, 'open', 'stream errors leave the session up');
});

t.test('a deadline (timeoutMs) fails the stream on both sides with PROTO_ERR_DEADLINE', async (t) => {
  const p = await pair();
  const aborted = deferred<string | undefined>();
  p.client.onStream((q) => {
    void q.sendColumns(COLUMNS);
    q.signal.addEventListener('abort', () => aborted.resolve((q.signal.reason as ProtocolError).code));
  });
  const s = p.server.openStream({ statement: 'SELECT pg_sleep(60)', timeoutMs: 5000 });
  await settle();
  p.clock.advance(4999);
  await settle();
  t.equal(p.client.stats().streams, 1, 'still running before the deadline');
  p.clock.advance(1);
  t.equal(await aborted.promise, 'PROTO_ERR_DEADLINE', 'the handler is told');
  t.equal(await code(s.collect()), 'PROTO_ERR_DEADLINE', 'the opener gets the coded error');
});

t.test('a stalled consumer blocks only its own stream, and its buffer stays within the window', async (t) => {
  const W = 16 * 1024;
  const p = await pair({ streamWindow: W, sessionWindow: 8 * W }, { dataFrameSize: 1024 });
  const N = 2000;
  const sent = new Map<number, number>();
  p.client.onStream(async (q) => {
    await q.sendColumns(COLUMNS);
    const rows = rowsFor(q.id, N);
    for (let i = 0; i < N; i += 10) {
      await q.sendRows(rows.slice(i, i + 10));
      sent.set(q.id, i + 10);
    }
    await q.end();
  });
  const stalled = p.server.openStream({ statement: 'stalled' });
  const others = Array.from({ length: 5 }, (_, i) => p.server.openStream({ statement: `other ${i}` }));
  const results = await Promise.all(others.map((s) => s.collect()));
  t.ok(
    results.every((r, i) => r.rows.length === N && JSON.stringify(r.rows) === JSON.stringify(rowsFor(others[i]?.id ?? 0, N))),
    `the other 5 streams each got all ${N} rows while one stream was stalled`,
  );
  await settleN(5);
  const stalledSent = sent.get(stalled.id) ?? 0;
  t.ok(stalledSent < N, `the stalled stream's sender is blocked (${stalledSent} of ${N} rows sent)`);
  t.ok(stalled.bufferedBytes <= W, `its buffer holds ${stalled.bufferedBytes} bytes, within the ${W}-byte window`);
  t.ok(stalled.bufferedBytes > W / 2, 'and it did fill most of the window');
  t.equal(p.server.stats().bufferedBytes, stalled.bufferedBytes, `session-wide, only the stalled stream holds memory (${p.server.stats().bufferedBytes} bytes)`);
  t.ok(p.client.stats().queuedBytes > 0, 'the sender holds its next batch, waiting for credit');
  await settleN(5);
  t.equal(sent.get(stalled.id), stalledSent, 'no progress while nobody reads');
  // the consumer wakes up: everything arrives
  const r = await stalled.collect();
  t.equal(r.rows.length, N);
  t.same(r.rows, rowsFor(stalled.id, N));
});

t.test('sending without awaiting is bounded: PROTO_ERR_QUEUE_FULL', async (t) => {
  const p = await pair({ streamWindow: 4096 }, { maxQueuedBytes: 16 * 1024 });
  const codes = deferred<(string | undefined)[]>();
  p.client.onStream(async (q) => {
    await q.sendColumns(COLUMNS);
    const sends: Promise<void>[] = [];
    for (let i = 0; i < 100; i++) sends.push(q.sendRows(rowsFor(i, 20)));
    codes.resolve(await Promise.all(sends.map((s) => code(s))));
    q.fail('STOP', 'stop');
  });
  const s = p.server.openStream({ statement: 'x' });
  const reading = s.collect().catch((e: ProtocolError) => e.code);
  const got = await codes.promise;
  t.ok(got.includes('PROTO_ERR_QUEUE_FULL'), 'sends beyond the queue limit fail');
  t.ok(got.filter((c) => c === undefined).length >= 1, 'the ones within it went through');
  t.equal(await reading, 'STOP');
});

t.test('stream limits: the opener respects the peer maximum; the acceptor refuses beyond its own', async (t) => {
  const p = await pair({}, { maxConcurrentStreams: 2 });
  p.client.onStream(() => undefined); // accept and hold
  const a = p.server.openStream({ statement: 'a' });
  const b = p.server.openStream({ statement: 'b' });
  t.equal(syncCode(() => p.server.openStream({ statement: 'c' })), 'PROTO_ERR_STREAM_LIMIT');
  a.cancel();
  await settle();
  t.ok(p.server.openStream({ statement: 'c' }), 'a slot frees once the cancel is acknowledged');
  b.cancel();
  // no handler registered: refused with a coded error
  const q = await pair();
  t.equal(await code(q.server.openStream({ statement: 'x' }).collect()), 'PROTO_ERR_NO_HANDLER');
  // both sides may open streams: the client uses even ids
  q.server.onStream(async (inc: IncomingQuery) => {
    await inc.sendColumns([{ name: 'ok' }]);
    await inc.end();
  });
  const fromClient = q.client.openStream({ statement: 'reverse' });
  t.equal(fromClient.id % 2, 0);
  t.same((await fromClient.collect()).columns, [{ name: 'ok' }]);
});

t.test('goaway: no new streams, in-flight opens refused (retryable), existing streams finish, then a clean close', async (t) => {
  const p = await pair();
  const release = deferred();
  p.client.onStream(async (q) => {
    await q.sendColumns(COLUMNS);
    await release.promise;
    await q.sendRows(rowsFor(q.id, 3));
    await q.end();
  });
  const s1 = p.server.openStream({ statement: 's1' });
  const s2 = p.server.openStream({ statement: 's2' });
  await settle();
  const goaways: number[] = [];
  p.server.onGoaway((g) => goaways.push(g.lastStreamId));
  let drained = false;
  const drain = p.client.drain({ message: 'relay restarting' }).then(() => (drained = true));
  // an OPEN already on the wire when the GOAWAY is sent
  const late = p.server.openStream({ statement: 'late' });
  t.equal(syncCode(() => p.client.openStream({ statement: 'x' })), 'PROTO_ERR_GOAWAY', 'the draining side opens nothing');
  await settle();
  t.same(goaways, [3], 'the peer learns the last stream id that will be served');
  t.equal(syncCode(() => p.server.openStream({ statement: 's3' })), 'PROTO_ERR_GOAWAY', 'the peer opens nothing new');
  let lateErr: ProtocolError | undefined;
  try {
    await late.collect();
  } catch (e) {
    lateErr = e as ProtocolError;
  }
  t.equal(lateErr?.code, 'PROTO_ERR_GOAWAY');
  t.equal(lateErr?.retryable, true, 'a refused stream is safe to retry on another session');
  t.equal(drained, false, 'the drain waits for the open streams');
  release.resolve();
  const [r1, r2] = await Promise.all([s1.collect(), s2.collect()]);
  t.equal(r1.rows.length, 3);
  t.equal(r2.rows.length, 3);
  await drain;
  const ci = await p.client.closed;
  const si = await p.server.closed;
  t.same([ci.code, ci.error], [1000, null], 'the drained side closes normally');
  t.same([si.code, si.error], [1000, null], 'and so does the peer');
});

t.test('drain with a timeout closes anyway', async (t) => {
  const p = await pair();
  p.client.onStream(() => undefined);
  const s = p.server.openStream({ statement: 'hang' });
  await settle();
  const d = p.client.drain({ timeoutMs: 1000 });
  await settle();
  p.clock.advance(1000);
  await d;
  t.equal(await code(s.collect()), 'PROTO_ERR_SESSION_CLOSED', 'the stream still open at the deadline fails');
});

t.test('dead-peer detection with an injected clock', async (t) => {
  const p = await pair({ pingIntervalMs: 1000, maxMissedPongs: 2 });
  for (let i = 0; i < 10; i++) {
    p.clock.advance(1000);
    await settle();
  }
  t.equal(p.server.state, 'open', 'pongs keep the session alive through 10 intervals');
  t.equal(p.server.stats().rttMs, 0, 'round trip time is measured (0 on a manual clock)');
  p.client.onStream(() => undefined);
  const s = p.server.openStream({ statement: 'hang' });
  await settle();
  p.ct.drop = true; // the network to the server goes dark
  p.clock.advance(1000); // ping 11 goes out, no pong
  await settle();
  p.clock.advance(1000); // one interval missed
  await settle();
  t.equal(p.server.state, 'open', 'one missed pong is tolerated');
  p.clock.advance(1000); // two missed: dead
  const info = await p.server.closed;
  t.equal(info.error?.code, 'PROTO_ERR_PEER_DEAD');
  t.equal(info.code, 4000);
  t.equal(await code(s.collect()), 'PROTO_ERR_PEER_DEAD', 'open streams fail with the reason');
});

t.test('closing the session fails open streams on both sides; an abrupt transport close is reported', async (t) => {
  const p = await pair();
  const aborted = deferred<string>();
  p.client.onStream((q) => {
    q.signal.addEventListener('abort', () => aborted.resolve((q.signal.reason as ProtocolError).code));
  });
  const s = p.server.openStream({ statement: 'x' });
  await settle();
  p.server.close();
  t.equal(await code(s.collect()), 'PROTO_ERR_SESSION_CLOSED');
  t.equal(await aborted.promise, 'PROTO_ERR_SESSION_CLOSED');
  const q = await pair();
  q.ct.close(1006, 'abnormal');
  const info = await q.server.closed;
  t.equal(info.error?.code, 'PROTO_ERR_TRANSPORT_CLOSED');
});

// ------------------------------------------------------------------ a misbehaving peer

function header(type: number, stream: number, length: number): Buffer {
  const b = Buffer.alloc(HEADER_SIZE);
  b[0] = 1;
  b[1] = type;
  b.writeUInt32BE(stream, 4);
  b.writeUInt32BE(length, 8);
  return b;
}

t.test('malformed: oversized length and unknown type close the session with their code', async (t) => {
  const big = await rawPeer({ maxFrameSize: 4096 });
  const before = process.memoryUsage().arrayBuffers;
  big.sendBytes(header(0x04, 1, 0xffff_ffff));
  await expectFatal(t, big, 'PROTO_ERR_FRAME_TOO_LARGE');
  t.ok(process.memoryUsage().arrayBuffers - before < 1024 * 1024, 'a 4 GiB declaration allocated nothing');

  const unknown = await rawPeer();
  unknown.sendBytes(header(0x42, 0, 0));
  await expectFatal(t, unknown, 'PROTO_ERR_UNKNOWN_TYPE');

  const badPayload = await rawPeer();
  badPayload.sendBytes(Buffer.concat([header(0x0b, 0, 3), Buffer.from('{x}')]));
  await expectFatal(t, badPayload, 'PROTO_ERR_BAD_PAYLOAD');

  const badVersion = await rawPeer();
  const h = header(0x09, 0, 8);
  h[0] = 7;
  badVersion.sendBytes(Buffer.concat([h, Buffer.alloc(8)]));
  await expectFatal(t, badVersion, 'PROTO_ERR_BAD_VERSION');
});

t.test('malformed: reused, out-of-order, wrong-parity and never-opened stream ids', async (t) => {
  const open = (id: number) => ({ type: 'OPEN' as const, streamId: id, open: { statement: 'x' } });
  const reused = await rawPeer({ role: 'client' });
  reused.session.onStream(() => undefined);
  reused.send(open(1));
  reused.send(open(1));
  await expectFatal(t, reused, 'PROTO_ERR_STREAM_ID');

  const order = await rawPeer({ role: 'client' });
  order.session.onStream(() => undefined);
  order.send(open(5));
  order.send(open(3));
  await expectFatal(t, order, 'PROTO_ERR_STREAM_ID');

  const parity = await rawPeer({ role: 'client' });
  parity.session.onStream(() => undefined);
  parity.send(open(2));
  await expectFatal(t, parity, 'PROTO_ERR_STREAM_ID');

  const never = await rawPeer({ role: 'server' });
  never.send({ type: 'COLUMNS', streamId: 7, columns: [] });
  await expectFatal(t, never, 'PROTO_ERR_STREAM_ID');

  const neverCancel = await rawPeer({ role: 'client' });
  neverCancel.send({ type: 'CANCEL', streamId: 9 });
  await expectFatal(t, neverCancel, 'PROTO_ERR_STREAM_ID');
});

t.test('malformed: frames after a stream closed, in the wrong direction or the wrong order', async (t) => {
  const closed = await rawPeer({ role: 'server' });
  const s = closed.session.openStream({ statement: 'x' });
  closed.send({ type: 'COLUMNS', streamId: s.id, columns: [] });
  closed.send({ type: 'END', streamId: s.id, end: { rowCount: 0, byteCount: 0 } });
  closed.send({ type: 'ROWS', streamId: s.id, rows: [[1]] });
  await expectFatal(t, closed, 'PROTO_ERR_STREAM_CLOSED');
  t.same((await s.collect().catch(() => null))?.end, { rowCount: 0, byteCount: 0 }, 'the stream itself had ended cleanly before');

  const direction = await rawPeer({ role: 'server' });
  const d = direction.session.openStream({ statement: 'x' });
  direction.send({ type: 'CANCEL', streamId: d.id });
  await expectFatal(t, direction, 'PROTO_ERR_UNEXPECTED_FRAME');

  const order = await rawPeer({ role: 'server' });
  const o = order.session.openStream({ statement: 'x' });
  order.send({ type: 'ROWS', streamId: o.id, rows: [[1]] });
  await expectFatal(t, order, 'PROTO_ERR_UNEXPECTED_FRAME');
  t.equal(await code(o.collect()), 'PROTO_ERR_UNEXPECTED_FRAME', 'the open stream fails with the session error');

  const upstream = await rawPeer({ role: 'client' });
  upstream.session.onStream(() => undefined);
  upstream.send({ type: 'OPEN', streamId: 1, open: { statement: 'x' } });
  upstream.send({ type: 'ROWS', streamId: 1, rows: [] });
  await expectFatal(t, upstream, 'PROTO_ERR_UNEXPECTED_FRAME');
});

t.test('malformed: exceeding the window (one big frame, or many tiny ones) closes the session; memory stays within the window', async (t) => {
  const W = 4096;
  const big = await rawPeer({ role: 'server', streamWindow: W });
  const s = big.session.openStream({ statement: 'x' });
  big.send({ type: 'COLUMNS', streamId: s.id, columns: [{ name: 'a' }] });
  big.send({ type: 'ROWS', streamId: s.id, rows: [['y'.repeat(5000)]] });
  await expectFatal(t, big, 'PROTO_ERR_WINDOW_EXCEEDED');

  const tiny = await rawPeer({ role: 'server', streamWindow: W });
  const s2 = tiny.session.openStream({ statement: 'x' });
  tiny.send({ type: 'COLUMNS', streamId: s2.id, columns: [{ name: 'a' }] });
  let maxHeld = 0;
  const frame = encodeFrame({ type: 'ROWS', streamId: s2.id, rows: [[1]] });
  for (let i = 0; i < 10_000 && tiny.session.state === 'open'; i++) {
    tiny.sendBytes(frame);
    if (i % 50 === 0) {
      await settle();
      maxHeld = Math.max(maxHeld, s2.bufferedBytes);
    }
  }
  await expectFatal(t, tiny, 'PROTO_ERR_WINDOW_EXCEEDED');
  t.ok(maxHeld <= W, `the stream held at most ${maxHeld} bytes`);

  // the session window binds too, across streams
  const sess = await rawPeer({ role: 'server', streamWindow: 4096, sessionWindow: 6000 });
  const a = sess.session.openStream({ statement: 'a' });
  const b = sess.session.openStream({ statement: 'b' });
  sess.send({ type: 'COLUMNS', streamId: a.id, columns: [] });
  sess.send({ type: 'COLUMNS', streamId: b.id, columns: [] });
  sess.send({ type: 'ROWS', streamId: a.id, rows: [['y'.repeat(3000)]] });
  sess.send({ type: 'ROWS', streamId: b.id, rows: [['y'.repeat(3000)]] });
  await expectFatal(t, sess, 'PROTO_ERR_WINDOW_EXCEEDED');
});

t.test('malformed: credit beyond the advertised window, or zero, is a window overflow', async (t) => {
  const session = await rawPeer({ role: 'client' });
  session.send({ type: 'CREDIT', streamId: 0, increment: 1 });
  await expectFatal(t, session, 'PROTO_ERR_WINDOW_OVERFLOW');

  const zero = await rawPeer({ role: 'client' });
  zero.send({ type: 'CREDIT', streamId: 0, increment: 0 });
  await expectFatal(t, zero, 'PROTO_ERR_WINDOW_OVERFLOW');

  const stream = await rawPeer({ role: 'client' }, { streamWindow: 8192 });
  stream.session.onStream(() => undefined);
  stream.send({ type: 'OPEN', streamId: 1, open: { statement: 'x' } });
  stream.send({ type: 'CREDIT', streamId: 1, increment: 2 ** 31 });
  await expectFatal(t, stream, 'PROTO_ERR_WINDOW_OVERFLOW');
});

t.test('malformed: floods of tiny frames end in PROTO_ERR_FLOOD with replies and memory bounded', async (t) => {
  const pings = await rawPeer({ role: 'server', maxControlFrames: 1000 });
  const ping = encodeFrame({ type: 'PING', streamId: 0, data: Buffer.alloc(8) });
  const heapBefore = process.memoryUsage().heapUsed;
  pings.sendBytes(Buffer.concat(Array.from({ length: 50_000 }, () => ping)));
  await expectFatal(t, pings, 'PROTO_ERR_FLOOD');
  const pongs = pings.frames.filter((f) => f.type === 'PONG').length;
  t.ok(pongs <= 1000, `at most the limit was answered (${pongs} pongs for 50 000 pings)`);
  t.ok(process.memoryUsage().heapUsed - heapBefore < 32 * 1024 * 1024, 'heap stayed bounded');

  const empty = await rawPeer({ role: 'server', maxControlFrames: 1000 });
  const s = empty.session.openStream({ statement: 'x' });
  empty.send({ type: 'COLUMNS', streamId: s.id, columns: [] });
  const none = encodeFrame({ type: 'ROWS', streamId: s.id, rows: [] });
  for (let i = 0; i < 2000; i++) empty.sendBytes(none);
  await expectFatal(t, empty, 'PROTO_ERR_FLOOD');

  // the limit is per window of time: the same rate spread over time is fine
  const spread = await rawPeer({ role: 'server', maxControlFrames: 100, floodWindowMs: 1000 });
  for (let round = 0; round < 5; round++) {
    for (let i = 0; i < 90; i++) spread.sendBytes(ping);
    await settle();
    spread.clock.advance(1000);
  }
  await settle();
  t.equal(spread.session.state, 'open', '90 pings a second, five seconds running, are not a flood');
  spread.session.close();

  const cancels = await rawPeer({ role: 'client', maxControlFrames: 500 });
  cancels.session.onStream(async (q) => {
    await q.sendColumns([]);
    await q.end();
  });
  cancels.send({ type: 'OPEN', streamId: 1, open: { statement: 'x' } });
  for (let i = 0; i < 1000; i++) cancels.send({ type: 'CANCEL', streamId: 1 });
  await expectFatal(t, cancels, 'PROTO_ERR_FLOOD');
});

t.test('a remote session error is reported with remote: true', async (t) => {
  const peer = await rawPeer({ role: 'server' });
  const s = peer.session.openStream({ statement: 'x' });
  peer.send({ type: 'ERROR', streamId: 0, error: { code: 'PROTO_ERR_FLOOD', message: 'you flooded me' } });
  const info = await peer.session.closed;
  t.equal(info.error?.code, 'PROTO_ERR_FLOOD');
  t.equal(info.error?.remote, true);
  t.equal(await code(s.collect()), 'PROTO_ERR_FLOOD');
});

t.test('ManualClock fires timers in order, including timers set by timers', async (t) => {
  const c = new ManualClock(0);
  const log: string[] = [];
  c.setTimeout(() => log.push('b@20'), 20);
  const h = c.setTimeout(() => log.push('never'), 15);
  c.setTimeout(() => {
    log.push('a@10');
    c.setTimeout(() => log.push('c@25'), 15);
  }, 10);
  c.clearTimeout(h);
  c.advance(30);
  t.same(log, ['a@10', 'b@20', 'c@25']);
  t.equal(c.now(), 30);
  t.equal(c.pending, 0);
});
