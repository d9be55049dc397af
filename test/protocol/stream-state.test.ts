import t from 'tap';
import { StreamState, type IncomingQuery, type ProtocolError, type Row } from '../../protocol/index.js';
import { READ_TRANSITIONS, WRITE_TRANSITIONS, transition } from '../../protocol/stream-state.js';
import { code, rawPeer, settle } from './fixtures/peers.js';

t.test('the transition tables: each half moves only forward, and Closed is final', async (t) => {
  t.same(READ_TRANSITIONS, {
    open: ['remote-closed', 'reset'],
    'local-closed': [],
    'remote-closed': ['closed'],
    reset: ['closed'],
    closed: [],
  });
  t.same(WRITE_TRANSITIONS, {
    open: ['local-closed', 'closed'],
    'local-closed': ['closed'],
    'remote-closed': [],
    reset: [],
    closed: [],
  });
  t.equal(transition(READ_TRANSITIONS, 1, StreamState.Open, StreamState.Reset), 'reset');
  let err: ProtocolError | undefined;
  try {
    transition(WRITE_TRANSITIONS, 3, StreamState.Closed, StreamState.Open);
  } catch (e) {
    err = e as ProtocolError;
  }
  t.equal(err?.code, 'PROTO_ERR_INTERNAL', 'an illegal transition is a bug on this side');
  t.match(err?.message, /stream 3: no transition from closed to open/);
});

t.test('read half: Open, RemoteClosed once END arrives, Closed once the application has read it', async (t) => {
  const peer = await rawPeer({ role: 'server' });
  const s = peer.session.openStream({ statement: 'x' });
  t.equal(s.state, StreamState.Open);
  peer.send({ type: 'COLUMNS', streamId: s.id, columns: [{ name: 'a' }] });
  peer.send({ type: 'ROWS', streamId: s.id, rows: [[1], [2]] });
  peer.send({ type: 'END', streamId: s.id, end: { rowCount: 2, byteCount: 6 } });
  await settle();
  t.equal(s.state, StreamState.RemoteClosed, 'END arrived and waits behind the unread events');
  t.notOk(s.finished);
  t.equal(peer.session.stats().streams, 0, 'the session forgot the stream on END');
  const r = await s.collect();
  t.same(r.rows, [[1], [2]]);
  t.equal(s.state, StreamState.Closed);
  t.ok(s.finished);

  // an ERROR from the peer: delivered after what came before it
  const e = peer.session.openStream({ statement: 'y' });
  peer.send({ type: 'COLUMNS', streamId: e.id, columns: [] });
  peer.send({ type: 'ERROR', streamId: e.id, error: { code: 'RELAY_ERR_QUERY', message: 'no' } });
  await settle();
  t.equal(e.state, StreamState.RemoteClosed);
  t.equal(((await e.next()).value as { type: string }).type, 'columns');
  t.equal(await code(e.next()), 'RELAY_ERR_QUERY');
  t.equal(e.state, StreamState.Closed);
  peer.session.close();
});

t.test('read half: Reset while the peer may still send (frames dropped, session credit returned), Closed on its ERROR', async (t) => {
  const peer = await rawPeer({ role: 'server', streamWindow: 4096, sessionWindow: 8192 });
  const s = peer.session.openStream({ statement: 'x' });
  peer.send({ type: 'COLUMNS', streamId: s.id, columns: [{ name: 'a' }] });
  await settle();
  s.cancel('enough');
  t.equal(s.state, StreamState.Reset);
  t.ok(s.finished);
  t.equal(await code(s.next()), 'PROTO_ERR_CANCELLED');
  await settle();
  t.ok(peer.frames.some((f) => f.type === 'CANCEL' && f.streamId === s.id), 'CANCEL was sent');
  const before = peer.frames.length;
  peer.send({ type: 'ROWS', streamId: s.id, rows: [['y'.repeat(2100)]] });
  await settle();
  const credits = peer.frames.slice(before).filter((f) => f.type === 'CREDIT');
  t.same(
    credits.map((f) => f.streamId),
    [0],
    'a frame crossing the CANCEL is dropped: its session credit comes back at once, no stream credit',
  );
  t.equal(peer.session.stats().bufferedBytes, 0, 'nothing is held for it');
  t.equal(peer.session.stats().streams, 1, 'still registered until the peer answers');
  s.cancel('again');
  t.equal(s.state, StreamState.Reset, 'cancel is idempotent');
  peer.send({ type: 'ERROR', streamId: s.id, error: { code: 'PROTO_ERR_CANCELLED', message: 'cancelled by the peer' } });
  await settle();
  t.equal(s.state, StreamState.Closed);
  t.equal(peer.session.stats().streams, 0);
  t.equal(peer.session.state, 'open');

  // refused by the peer's GOAWAY: Reset at once (retryable), Closed when the refusal arrives
  const late = peer.session.openStream({ statement: 'late' });
  peer.send({ type: 'GOAWAY', streamId: 0, goaway: { lastStreamId: late.id - 2 } });
  await settle();
  t.equal(late.state, StreamState.Reset);
  t.equal(await code(late.next()), 'PROTO_ERR_GOAWAY');
  peer.send({ type: 'ERROR', streamId: late.id, error: { code: 'PROTO_ERR_GOAWAY', message: 'session is draining', retryable: true } });
  await settle();
  t.equal(late.state, StreamState.Closed);
  peer.session.close();
});

t.test('read half: the session closing queues its error behind the buffered events', async (t) => {
  const peer = await rawPeer({ role: 'server' });
  const s = peer.session.openStream({ statement: 'x' });
  const reset = peer.session.openStream({ statement: 'y' });
  peer.send({ type: 'COLUMNS', streamId: s.id, columns: [] });
  await settle();
  reset.cancel();
  peer.session.close();
  t.equal(s.state, StreamState.RemoteClosed);
  t.equal(reset.state, StreamState.Closed, 'a reset stream needs nothing more');
  t.equal(((await s.next()).value as { type: string }).type, 'columns');
  t.equal(await code(s.next()), 'PROTO_ERR_SESSION_CLOSED');
  t.equal(s.state, StreamState.Closed);
  t.same(await s.return(), { done: true, value: undefined });
  t.same(await s.next(), { done: true, value: undefined }, 'after return() the iterator is simply done');
});

t.test('write half: Open, LocalClosed while END waits for credit, Closed once it is on the wire', async (t) => {
  const peer = await rawPeer({ role: 'client' }, { streamWindow: 2048 });
  let q!: IncomingQuery;
  peer.session.onStream((x) => {
    q = x;
  });
  peer.send({ type: 'OPEN', streamId: 1, open: { statement: 'x' } });
  await settle();
  t.equal(q.state, StreamState.Open);
  const row: Row = ['y'.repeat(900)];
  void q.sendColumns([{ name: 'a' }]);
  const rows = q.sendRows([row, row, row]);
  const end = q.end();
  t.equal(q.state, StreamState.LocalClosed, 'END is queued: nothing more may be written');
  t.notOk(q.isOpen);
  t.equal(await code(q.sendRows([row])), 'PROTO_ERR_STREAM_STATE');
  await settle();
  t.equal(peer.frames.filter((f) => f.type === 'ROWS').length, 2, 'the third ROWS waits for credit');
  t.equal(q.state, StreamState.LocalClosed);
  peer.send({ type: 'CREDIT', streamId: 1, increment: 1000 });
  await rows;
  await end;
  t.equal(q.state, StreamState.Closed);
  t.ok(peer.frames.some((f) => f.type === 'END' && f.streamId === 1));
  t.notOk(q.signal.aborted, 'a normal end aborts nothing');
  t.equal(peer.session.stats().streams, 0);

  // failing, or the peer's CANCEL, closes it from any state, rejecting what waits
  let c!: IncomingQuery;
  peer.session.onStream((x) => {
    c = x;
  });
  peer.send({ type: 'OPEN', streamId: 3, open: { statement: 'y' } });
  await settle();
  void c.sendColumns([{ name: 'a' }]);
  const waiting = c.sendRows([row, row, row]);
  await settle();
  peer.send({ type: 'CANCEL', streamId: 3 });
  t.equal(await code(waiting), 'PROTO_ERR_CANCELLED');
  t.equal(c.state, StreamState.Closed);
  t.equal((c.signal.reason as ProtocolError).code, 'PROTO_ERR_CANCELLED');
  c.fail('X', 'ignored');
  t.equal(c.state, StreamState.Closed, 'fail after close is a no-op');
  t.equal(peer.session.stats().queuedBytes, 0, 'its queued bytes were dropped');
  peer.session.close();
});
