/**
 * A hostile or buggy peer against the stream state machine (stream-state.ts, stream-read.ts,
 * stream-write.ts, streams.ts), together with an application that cancels, stops reading, fails
 * and ends streams at awkward moments. Whatever arrives, a broken rule is the PEER's error: the
 * session may close with the rule's code, or a stream may fail with a clean code, but nothing may
 * surface as PROTO_ERR_INTERNAL (an illegal transition here), throw out of the session, or leave an
 * unhandled rejection, and the stream table holds exactly the streams not yet finished. Seeded random
 * runs (HOSTILE_RUNS=n for more), then named sequences.
 */
import t from 'tap';
import { ProtocolError, StreamState, type Frame, type IncomingQuery, type QueryStream, type Row } from '../../protocol/index.js';
import { code, rawPeer, settle, type RawPeer } from './fixtures/peers.js';

/** a small deterministic PRNG (mulberry32) */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** every rejection and throw the application saw, by code */
class Outcomes {
  readonly codes = new Map<string, number>();
  readonly internal: string[] = [];
  note(err: unknown): void {
    const c = err instanceof ProtocolError ? err.code : `non-protocol error: ${String((err as Error)?.message ?? err)}`;
    this.codes.set(c, (this.codes.get(c) ?? 0) + 1);
    if (!(err instanceof ProtocolError) || err.code === 'PROTO_ERR_INTERNAL') this.internal.push(`${c}: ${(err as Error)?.message}`);
  }
  track(p: Promise<unknown>): void {
    p.catch((e: unknown) => this.note(e));
  }
  sync(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.note(e);
    }
  }
}

const processErrors: string[] = [];
const onUncaught = (e: unknown): void => {
  processErrors.push(String((e as Error)?.stack ?? e));
};
process.on('uncaughtException', onUncaught);
process.on('unhandledRejection', onUncaught);
t.teardown(() => {
  process.off('uncaughtException', onUncaught);
  process.off('unhandledRejection', onUncaught);
});

function internalFrom(peer: RawPeer): string[] {
  const sent = peer.frames.filter((f) => f.type === 'ERROR' && f.error.code === 'PROTO_ERR_INTERNAL').map((f) => (f.type === 'ERROR' ? f.error.message : ''));
  const closed = peer.session.closeInfo?.error?.code === 'PROTO_ERR_INTERNAL' ? [peer.session.closeInfo.error.message] : [];
  return [...sent, ...closed];
}

// ------------------------------------------------------------------ this side reads (opened the streams)

/** the peer's view of one stream it writes: what it has sent, so that it can follow the rules, or not */
interface PeerStream {
  id: number;
  columns: boolean;
  ended: boolean;
}

async function readerRun(seed: number): Promise<{ internal: string[]; closedWith: string | null }> {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const rudeness = seed % 2 ? 0.06 : 0.004;
  const rude = (): boolean => r() < rudeness; // how often the peer breaks a rule on purpose
  const peer = await rawPeer({ role: 'server', streamWindow: 4096, sessionWindow: 16384, maxControlFrames: 100_000 });
  const out = new Outcomes();
  const streams: QueryStream[] = [];
  const mine = new Map<number, PeerStream>();
  let goawayLast = 1 << 30;
  const row = (): Row => [pick([1, 'x', 'y'.repeat(Math.floor(r() * 900)), null])];
  for (let step = 0; step < 200 && peer.session.state === 'open'; step++) {
    const k = r();
    if (k < 0.12) {
      out.sync(() => {
        const s = peer.session.openStream({ statement: `s${step}` });
        streams.push(s);
        mine.set(s.id, { id: s.id, columns: false, ended: false });
      });
    } else if (k < 0.2 && streams.length) {
      const s = pick(streams);
      out.sync(() => s.cancel(pick([undefined, 'enough'])));
    } else if (k < 0.32 && streams.length) {
      out.track(pick(streams).next());
    } else if (k < 0.35 && streams.length) {
      out.track(pick(streams).return());
    } else if (k < 0.38 && streams.length) {
      out.track(pick(streams).collect());
    } else if (k < 0.4) {
      goawayLast = rude() ? pick([...mine.keys(), 0]) + 2 : Math.min(goawayLast, pick([...mine.keys(), 0]));
      peer.send({ type: 'GOAWAY', streamId: 0, goaway: { lastStreamId: goawayLast } });
    } else if (k < 0.42) {
      peer.send({ type: 'PING', streamId: 0, data: Buffer.alloc(8) });
    } else if (mine.size) {
      const live = [...mine.values()].filter((m) => !m.ended);
      const m = live.length && !rude() ? pick(live) : pick([...mine.values()]);
      const id = rude() && r() < 0.2 ? pick([999, m.id + 2]) : m.id;
      let f: Frame;
      if (!rude()) {
        if (!m.columns) f = { type: 'COLUMNS', streamId: id, columns: [{ name: 'a' }] };
        else {
          const n = r();
          f = n < 0.6 ? { type: 'ROWS', streamId: id, rows: [row(), row()] } : n < 0.85 ? { type: 'END', streamId: id, end: { rowCount: 1, byteCount: 1 } } : { type: 'ERROR', streamId: id, error: { code: pick(['RELAY_ERR_QUERY', 'PROTO_ERR_CANCELLED', 'PROTO_ERR_GOAWAY']), message: 'no' } };
        }
      } else {
        f = pick<Frame>([
          { type: 'COLUMNS', streamId: id, columns: [] },
          { type: 'ROWS', streamId: id, rows: [] },
          { type: 'ROWS', streamId: id, rows: [row()] },
          { type: 'END', streamId: id, end: { rowCount: 0, byteCount: 0 } },
          { type: 'ERROR', streamId: id, error: { code: 'X', message: 'x' } },
          { type: 'CREDIT', streamId: id, increment: 10 },
        ]);
      }
      if (id === m.id) {
        if (f.type === 'COLUMNS') m.columns = true;
        if (f.type === 'END' || f.type === 'ERROR') m.ended = true;
      }
      peer.send(f);
    }
    if (r() < 0.5) await settle();
  }
  await settle();
  if (peer.session.state === 'open') {
    // a stream stays in the table only until the peer's END or ERROR
    const registered = streams.filter((s) => s.state === StreamState.Open || s.state === StreamState.Reset).length;
    if (peer.session.stats().streams !== registered) out.internal.push(`the table holds ${peer.session.stats().streams} streams, ${registered} still wait for the peer`);
  }
  for (const s of streams) out.track(s.collect());
  peer.session.close();
  await settle();
  await settle();
  for (const s of streams) {
    if (s.state !== StreamState.Closed && s.state !== StreamState.Reset) out.internal.push(`stream ${s.id} left in ${s.state} after the session closed`);
  }
  return { internal: [...out.internal, ...internalFrom(peer)], closedWith: peer.session.closeInfo?.error?.code ?? null };
}

// ------------------------------------------------------------------ this side writes (the peer opened the streams)

async function writerRun(seed: number): Promise<{ internal: string[]; closedWith: string | null }> {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const rudeness = seed % 2 ? 0.06 : 0.004;
  const rude = (): boolean => r() < rudeness;
  const peer = await rawPeer({ role: 'client', maxControlFrames: 100_000 }, { streamWindow: 4096, sessionWindow: 8192 });
  const out = new Outcomes();
  const queries: IncomingQuery[] = [];
  const row: Row = ['z'.repeat(700)];
  peer.session.onStream(async (q) => {
    queries.push(q);
    const plan = pick(['full', 'full', 'fail', 'hang', 'throw', 'twice', 'late', 'forget']);
    if (plan === 'hang') return new Promise<void>((resolve) => q.signal.addEventListener('abort', () => resolve()));
    if (plan === 'throw') throw new Error('handler bug');
    await q.sendColumns([{ name: 'a' }]);
    for (let i = 0; i < Math.floor(r() * 5); i++) await q.sendRows([row, row]);
    if (plan === 'fail') return q.fail('RELAY_ERR_QUERY', 'the database said no');
    if (plan === 'forget') return;
    const end = q.end();
    if (plan === 'twice') out.track(q.end());
    if (plan === 'late') out.track(q.sendRows([row]));
    return end;
  });
  // credit the peer owes back, per stream and for the session: a well-behaved reader returns exactly what it received
  const owed = new Map<number, number>();
  let owedSession = 0;
  let seen = 0;
  const account = (): void => {
    for (const f of peer.frames.slice(seen)) {
      if (f.type === 'COLUMNS' || f.type === 'ROWS' || f.type === 'END') {
        const cost = 12 + f.payloadLength;
        owed.set(f.streamId, (owed.get(f.streamId) ?? 0) + cost);
        owedSession += cost;
      }
    }
    seen = peer.frames.length;
  };
  let nextId = 1;
  let goawayLast = 1 << 30;
  const opened = (): number[] => Array.from({ length: (nextId - 1) / 2 }, (_, i) => 2 * i + 1);
  for (let step = 0; step < 250 && peer.session.state === 'open'; step++) {
    account();
    const k = r();
    if (k < 0.15) {
      const id = rude() ? pick([Math.max(1, nextId - 2), nextId + 1, nextId]) : nextId;
      peer.send({ type: 'OPEN', streamId: id, open: { statement: `q${id}`, ...(r() < 0.2 ? { timeoutMs: 50 } : {}) } });
      if (id === nextId) nextId += 2;
    } else if (nextId === 1) {
      // nothing opened yet: only OPEN makes sense
    } else if (k < 0.25) {
      peer.send({ type: 'CANCEL', streamId: rude() ? nextId + 4 : pick(opened()) });
    } else if (k < 0.55) {
      const id = pick(opened());
      const inc = rude() ? pick([0, 1, 5000]) : owed.get(id) ?? 0;
      if (inc > 0 || rude()) {
        peer.send({ type: 'CREDIT', streamId: id, increment: inc });
        owed.set(id, 0);
      }
    } else if (k < 0.7) {
      const inc = rude() ? pick([1, 9000]) : owedSession;
      if (inc > 0) {
        peer.send({ type: 'CREDIT', streamId: 0, increment: inc });
        owedSession = 0;
      }
    } else if (k < 0.73) {
      goawayLast = Math.min(goawayLast, pick(opened()));
      peer.send({ type: 'GOAWAY', streamId: 0, goaway: { lastStreamId: goawayLast } });
    } else if (k < 0.78 && queries.length) {
      const q = pick(queries);
      out.sync(() => q.fail(pick(['RELAY_ERR_TIMEOUT', '']), 'app gives up'));
    } else if (k < 0.79 && seed % 5 === 0) {
      out.track(peer.session.drain({ timeoutMs: 100, message: 'draining' }));
    } else if (k < 0.85) {
      peer.clock.advance(pick([10, 60]));
    }
    if (r() < 0.6) await settle();
  }
  await settle();
  account();
  if (peer.session.state === 'open') {
    // the table holds exactly the streams not yet closed, and a stream whose END or ERROR went out is closed
    const finished = new Set(peer.frames.filter((f) => (f.type === 'END' || f.type === 'ERROR') && f.streamId !== 0).map((f) => f.streamId));
    for (const q of queries) if (finished.has(q.id) && q.state !== StreamState.Closed) out.internal.push(`incoming stream ${q.id} sent its ${q.state === StreamState.LocalClosed ? 'END' : 'last frame'} but is ${q.state}`);
    const live = queries.filter((q) => q.state !== StreamState.Closed).length;
    if (peer.session.stats().streams !== live) out.internal.push(`the table holds ${peer.session.stats().streams} streams, ${live} are not closed`);
  }
  peer.session.close();
  await settle();
  await settle();
  for (const q of queries) {
    if (q.state !== StreamState.Closed) out.internal.push(`incoming stream ${q.id} left in ${q.state} after the session closed`);
  }
  return { internal: [...out.internal, ...internalFrom(peer)], closedWith: peer.session.closeInfo?.error?.code ?? null };
}

const RUNS = Number(process.env['HOSTILE_RUNS'] ?? 150);

t.test('seeded hostile runs: nothing surfaces as PROTO_ERR_INTERNAL, nothing escapes', async (t) => {
  const ends = new Map<string, number>();
  for (let seed = 1; seed <= RUNS; seed++) {
    for (const [side, run] of [
      ['reader', readerRun],
      ['writer', writerRun],
    ] as const) {
      const res = await run(seed);
      const k = `${side}: ${res.closedWith ?? 'clean'}`;
      ends.set(k, (ends.get(k) ?? 0) + 1);
      if (res.internal.length > 0) t.fail(`${side} seed ${seed}: ${res.internal.join('; ')}`);
    }
  }
  t.same(processErrors, [], 'no uncaught exception or unhandled rejection');
  t.comment(JSON.stringify(Object.fromEntries(ends)));
});

// ------------------------------------------------------------------ the named sequences

t.test('read half: frames for a stream after the application cancelled it', async (t) => {
  const peer = await rawPeer({ role: 'server' });
  const s = peer.session.openStream({ statement: 'x' });
  s.cancel();
  peer.send({ type: 'COLUMNS', streamId: s.id, columns: [{ name: 'a' }] });
  peer.send({ type: 'ROWS', streamId: s.id, rows: [[1]] });
  peer.send({ type: 'END', streamId: s.id, end: { rowCount: 1, byteCount: 1 } });
  await settle();
  t.equal(peer.session.state, 'open', 'frames that crossed the CANCEL are dropped');
  t.equal(s.state, StreamState.Closed, 'END closes the reset stream');
  t.equal(peer.session.stats().streams, 0);
  peer.send({ type: 'ERROR', streamId: s.id, error: { code: 'PROTO_ERR_CANCELLED', message: 'late' } });
  const info = await peer.session.closed;
  t.equal(info.error?.code, 'PROTO_ERR_STREAM_CLOSED', 'an ERROR after END is the peer breaking the rules, with that code');
});

t.test('read half: the application cancels after END arrived but before reading it', async (t) => {
  const peer = await rawPeer({ role: 'server' });
  const s = peer.session.openStream({ statement: 'x' });
  peer.send({ type: 'COLUMNS', streamId: s.id, columns: [{ name: 'a' }] });
  peer.send({ type: 'END', streamId: s.id, end: { rowCount: 0, byteCount: 0 } });
  await settle();
  t.equal(s.state, StreamState.RemoteClosed);
  s.cancel('changed my mind');
  t.equal(s.state, StreamState.Closed);
  t.equal(await code(s.next()), 'PROTO_ERR_CANCELLED');
  t.notOk(peer.frames.some((f) => f.type === 'CANCEL'), 'no CANCEL for a stream the peer already ended');
  t.equal(peer.session.state, 'open');
  peer.session.close();
});

t.test('read half: duplicate COLUMNS and COLUMNS after ROWS are the peer breaking the order', async (t) => {
  for (const frames of [
    ['COLUMNS', 'COLUMNS'],
    ['COLUMNS', 'ROWS', 'COLUMNS'],
  ]) {
    const peer = await rawPeer({ role: 'server' });
    const s = peer.session.openStream({ statement: 'x' });
    s.cancel(); // also when the stream was reset here: the peer's order is checked all the same
    for (const f of frames) peer.send(f === 'COLUMNS' ? { type: 'COLUMNS', streamId: s.id, columns: [] } : { type: 'ROWS', streamId: s.id, rows: [[1]] });
    const info = await peer.session.closed;
    t.equal(info.error?.code, 'PROTO_ERR_UNEXPECTED_FRAME', frames.join(', '));
  }
});

t.test('read half: a stream refused by GOAWAY that the peer ends with END instead of ERROR', async (t) => {
  const peer = await rawPeer({ role: 'server' });
  const a = peer.session.openStream({ statement: 'a' });
  const b = peer.session.openStream({ statement: 'b' });
  peer.send({ type: 'GOAWAY', streamId: 0, goaway: { lastStreamId: a.id } });
  await settle();
  t.equal(b.state, StreamState.Reset);
  peer.send({ type: 'COLUMNS', streamId: b.id, columns: [] });
  peer.send({ type: 'END', streamId: b.id, end: { rowCount: 0, byteCount: 0 } });
  await settle();
  t.equal(b.state, StreamState.Closed);
  t.equal(await code(b.collect()), 'PROTO_ERR_GOAWAY');
  t.equal(peer.session.state, 'open');
  peer.session.close();
});

t.test('write half: CANCEL and CREDIT after END is queued, after it is sent, and twice', async (t) => {
  const peer = await rawPeer({ role: 'client' }, { streamWindow: 4096 });
  const qs: IncomingQuery[] = [];
  const ends: Promise<void>[] = [];
  peer.session.onStream(async (q) => {
    qs.push(q);
    await q.sendColumns([{ name: 'a' }]);
    void q.sendRows([['y'.repeat(1500)], ['y'.repeat(1500)], ['y'.repeat(1500)]]).catch(() => undefined);
    const end = q.end();
    ends.push(end);
    await end.catch(() => undefined);
  });
  peer.send({ type: 'OPEN', streamId: 1, open: { statement: 'x' } });
  await settle();
  t.equal(qs[0]?.state, StreamState.LocalClosed, 'END waits behind the ROWS that wait for credit');
  peer.send({ type: 'CANCEL', streamId: 1 });
  peer.send({ type: 'CANCEL', streamId: 1 });
  peer.send({ type: 'CREDIT', streamId: 1, increment: 2048 });
  await settle();
  t.equal(qs[0]?.state, StreamState.Closed);
  t.equal(await code(ends[0]!), 'PROTO_ERR_CANCELLED', 'the queued END is rejected, not sent');
  t.equal(peer.session.state, 'open', 'a second CANCEL and a late CREDIT may cross the ERROR on the wire');
  t.equal(peer.frames.filter((f) => f.type === 'ERROR' && f.streamId === 1).length, 1, 'one ERROR for the stream');
  peer.session.close();
});

t.test('write half: a peer that never grants credit holds the writes, not the session; the deadline or a cancel ends them', async (t) => {
  const peer = await rawPeer({ role: 'client' }, { streamWindow: 1024, sessionWindow: 1024 });
  const writes: Promise<void>[] = [];
  const qs: IncomingQuery[] = [];
  peer.session.onStream(async (q) => {
    qs.push(q);
    await q.sendColumns([{ name: 'a' }]);
    const w = q.sendRows([['y'.repeat(400)], ['y'.repeat(400)], ['y'.repeat(400)]]);
    writes.push(w);
    await w;
    await q.end();
  });
  peer.send({ type: 'OPEN', streamId: 1, open: { statement: 'x', timeoutMs: 1000 } });
  peer.send({ type: 'OPEN', streamId: 3, open: { statement: 'y' } });
  await settle();
  await settle();
  t.equal(peer.session.state, 'open');
  t.equal(writes.length, 2, 'both streams wait for credit');
  peer.clock.advance(1000);
  t.equal(await code(writes[0]!), 'PROTO_ERR_DEADLINE');
  peer.send({ type: 'CANCEL', streamId: 3 });
  t.equal(await code(writes[1]!), 'PROTO_ERR_CANCELLED');
  await settle();
  t.same(
    qs.map((q) => q.state),
    [StreamState.Closed, StreamState.Closed],
  );
  t.equal(peer.session.stats().queuedBytes, 0, 'nothing stays queued');
  t.equal(peer.session.state, 'open');
  peer.session.close();
});
