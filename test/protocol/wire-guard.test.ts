/**
 * The wire guard (protocol/wire-guard.ts) on a real stream (a PassThrough standing in for the
 * socket): it follows PostgreSQL and MySQL message boundaries across arbitrary chunk splits,
 * hands every byte before a refused message to the driver's listener (and none of it after),
 * measures a DataRow by its value bytes, joins MySQL's 16 MB continuation packets, and turns a
 * driver listener that throws into a destroyed stream instead of an uncaught exception.
 */
import { PassThrough } from 'node:stream';
import t from 'tap';
import { guardWire, type WireGuardOptions } from '../../protocol/wire-guard.js';

function pgMessage(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeUInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}
function dataRow(values: string[]): Buffer {
  const parts: Buffer[] = [Buffer.from([values.length >> 8, values.length & 0xff])];
  for (const v of values) {
    const len = Buffer.alloc(4);
    len.writeInt32BE(Buffer.byteLength(v));
    parts.push(len, Buffer.from(v));
  }
  return pgMessage('D', Buffer.concat(parts));
}
function rowDescription(columns: number): Buffer {
  return pgMessage('T', Buffer.concat([Buffer.from([columns >> 8, columns & 0xff]), Buffer.alloc(columns * 19)]));
}

/** feed `bytes` in chunks of `size`, returning what the driver's listener received */
async function feed(bytes: Buffer, size: number, o: Omit<WireGuardOptions, 'framing'> & { framing?: WireGuardOptions['framing'] }, listener?: (b: Buffer) => void) {
  const s = new PassThrough();
  const got: Buffer[] = [];
  s.on('data', listener ?? ((b: Buffer) => got.push(Buffer.from(b))));
  const closed = new Promise<void>((r) => s.on('close', () => r()));
  s.on('error', () => undefined);
  const g = guardWire(s, { framing: 'postgres', ...o });
  for (let i = 0; i < bytes.length && !s.destroyed; i += size) {
    s.write(bytes.subarray(i, i + size));
    await new Promise((r) => setImmediate(r));
  }
  if (!s.destroyed) s.end();
  await Promise.race([closed, new Promise((r) => setTimeout(r, 50))]);
  return { got: Buffer.concat(got), guard: g, destroyed: s.destroyed };
}

t.test('postgres: everything passes under the budget, whatever the chunking', async (t) => {
  const wire = Buffer.concat([rowDescription(2), dataRow(['a', 'bb']), dataRow(['ccc', 'd']), pgMessage('C', Buffer.from('SELECT 2\0')), pgMessage('Z', Buffer.from('I'))]);
  for (const size of [1, 2, 3, 5, 7, 64]) {
    const r = await feed(wire, size, { rowBudget: () => 1000 });
    t.same(r.got, wire, `chunks of ${size}`);
    t.equal(r.guard.tripped, null);
    t.equal(r.guard.rowBytes, 3 + 4, 'value bytes only (2 + 4 bytes a column are framing)');
  }
});

t.test('postgres: a DataRow over the budget is refused before its body, the bytes before it pass', async (t) => {
  const before = Buffer.concat([rowDescription(1), dataRow(['small'])]);
  const huge = dataRow(['x'.repeat(5000)]);
  const wire = Buffer.concat([before, huge, dataRow(['after'])]);
  for (const size of [1, 4, 9, 100, 100_000]) {
    let trips = 0;
    const r = await feed(wire, size, { rowBudget: () => 1000, onTrip: () => trips++ });
    t.same(r.got.subarray(0, before.length), before, `chunks of ${size}: the rows before pass`);
    t.ok(r.got.length < before.length + 5, `chunks of ${size}: at most the refused header's first bytes pass (${r.got.length - before.length})`);
    t.match(r.guard.tripped, { declared: 5000, budget: 1000, kind: 'row' });
    t.equal(trips, 1);
    t.ok(r.destroyed, 'the stream is closed');
  }
});

t.test('postgres: the budget is asked after the earlier messages reached the driver', async (t) => {
  let delivered = 0;
  const budgets: number[] = [];
  const wire = Buffer.concat([rowDescription(1), dataRow(['aaaa']), dataRow(['bbbb']), dataRow(['cccc'])]);
  await feed(wire, wire.length, { rowBudget: () => (budgets.push(delivered), 100) }, (b) => (delivered += b.length));
  t.same(budgets, [rowDescription(1).length, rowDescription(1).length + 15, rowDescription(1).length + 30], 'one chunk, yet each row is judged with the rows before it already parsed');
});

t.test('postgres: a non-row message over the fixed ceiling is refused', async (t) => {
  const r = await feed(pgMessage('E', Buffer.alloc(3000)), 512, { rowBudget: () => 10, maxOtherBytes: 2048 });
  t.match(r.guard.tripped, { kind: 'other', declared: 3000 });
});

t.test('a driver listener that throws destroys the stream instead of the process', async (t) => {
  const r = await feed(dataRow(['x']), 100, { rowBudget: () => 100 }, () => {
    throw new RangeError('Cannot create a string longer than 0x1fffffe8 characters');
  });
  t.ok(r.destroyed);
});

t.test('mysql: packets and 16 MB continuations are measured before the driver sees them', async (t) => {
  const packet = (len: number, seq: number, fill = 0x61): Buffer => Buffer.concat([Buffer.from([len & 0xff, (len >> 8) & 0xff, (len >> 16) & 0xff, seq]), Buffer.alloc(len, fill)]);
  const small = Buffer.concat([packet(10, 1), packet(20, 2)]);
  const ok = await feed(small, 3, { framing: 'mysql', rowBudget: () => 100 });
  t.same(ok.got, small);
  t.equal(ok.guard.tripped, null);

  const big = Buffer.concat([packet(10, 1), packet(2000, 2)]);
  const r = await feed(big, 7, { framing: 'mysql', rowBudget: () => 1000 });
  t.same(r.got.subarray(0, 14), packet(10, 1));
  t.ok(r.got.length < 14 + 4);
  t.match(r.guard.tripped, { declared: 2000, kind: 'row' });

  // a logical packet of 0xffffff + 5 bytes: the second piece is judged with the first
  let asked = 0;
  const first = packet(0xffffff, 1, 0x62);
  const cont = Buffer.concat([first, packet(5, 2)]);
  const c = await feed(cont, 1 << 20, { framing: 'mysql', rowBudget: () => (++asked === 1 ? 0x1000000 : 0xffffff) });
  t.match(c.guard.tripped, { declared: 0xffffff + 5 });
});
