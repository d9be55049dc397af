import t from 'tap';
import { ProtocolError } from '../../protocol/index.js';
import { RecvWindow, SendWindow, chargeReceived, largestDataFrame } from '../../protocol/flow-control.js';

function thrown(fn: () => unknown): ProtocolError | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err as ProtocolError;
  }
}

t.test('SendWindow: sends consume it, grants give it back up to the advertised size', async (t) => {
  const w = new SendWindow(1000);
  t.equal(w.available, 1000);
  t.ok(w.fits(1000));
  t.notOk(w.fits(1001));
  w.consume(600);
  t.equal(w.available, 400);
  t.notOk(w.fits(401), 'a frame larger than what is left waits');
  w.grant(600, 'stream 3');
  t.equal(w.available, 1000, 'credit back to the full window is fine');
  w.consume(10);
  const over = thrown(() => w.grant(11, 'stream 3'));
  t.equal(over?.code, 'PROTO_ERR_WINDOW_OVERFLOW', 'a grant above the advertised size overflows');
  t.equal(over?.message, 'stream 3 credit of 11 raises the window to 1001, above the advertised 1000');
  t.equal(w.available, 990, 'and leaves the window as it was');
  const zero = thrown(() => w.grant(0, 'session'));
  t.equal(zero?.code, 'PROTO_ERR_WINDOW_OVERFLOW');
  t.equal(zero?.message, 'zero session credit increment');
  t.equal(new SendWindow(0).available, 0, 'before HELLO the session may send nothing');
});

t.test('RecvWindow: charges, then returns credit in batches of a quarter window', async (t) => {
  const w = new RecvWindow(4000, 100);
  w.charge(1500);
  t.equal(w.available, 2500);
  t.equal(w.buffered, 1500);
  t.equal(w.release(500), 0, 'below a quarter owed: keep batching');
  t.equal(w.unreturned, 500);
  t.equal(w.buffered, 1000, 'read bytes no longer count as buffered');
  t.equal(w.available, 2500, 'nor as credit until they are sent back');
  t.equal(w.release(499), 0);
  t.equal(w.release(1), 1000, 'a quarter owed: everything owed goes back at once');
  t.equal(w.unreturned, 0);
  t.equal(w.available, 3500);
  t.equal(w.buffered, 500);
});

t.test('RecvWindow: credit goes back at once when the sender may lack room for its next frame', async (t) => {
  const w = new RecvWindow(4000, 1000);
  w.charge(3100);
  t.equal(w.available, 900, 'below the bound');
  t.equal(w.release(13), 13, 'even a small amount is returned immediately');
  t.equal(w.available, 913);
  w.charge(913);
  t.notOk(w.fits(1));
  t.ok(w.fits(0));
});

t.test('chargeReceived: the stream window first, then the session window; on failure neither is charged', async (t) => {
  const stream = new RecvWindow(1000, 100);
  const session = new RecvWindow(1500, 100);
  chargeReceived(stream, session, 800, 5);
  t.same([stream.available, session.available], [200, 700]);
  const s = thrown(() => chargeReceived(stream, session, 201, 5));
  t.equal(s?.code, 'PROTO_ERR_WINDOW_EXCEEDED');
  t.equal(s?.message, '201 bytes on stream 5 with 200 bytes of credit');
  const other = new RecvWindow(1000, 100);
  const sess = thrown(() => chargeReceived(other, session, 701, 7));
  t.equal(sess?.code, 'PROTO_ERR_WINDOW_EXCEEDED');
  t.equal(sess?.message, '701 bytes with 700 bytes of session credit');
  t.same([stream.available, other.available, session.available], [200, 1000, 700], 'nothing was charged by the failures');
});

t.test('largestDataFrame: maxFrameSize plus the header, at most half of either window', async (t) => {
  t.equal(largestDataFrame({ maxFrameSize: 1024 * 1024, streamWindow: 1024 * 1024, sessionWindow: 16 * 1024 * 1024 }), 512 * 1024);
  t.equal(largestDataFrame({ maxFrameSize: 4096, streamWindow: 1024 * 1024, sessionWindow: 16 * 1024 * 1024 }), 4096 + 12);
  t.equal(largestDataFrame({ maxFrameSize: 4096, streamWindow: 1024 * 1024, sessionWindow: 6001 }), 3000);
});
