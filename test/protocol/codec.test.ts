import t, { type Test } from 'tap';
import {
  FrameDecoder,
  HEADER_SIZE,
  MAX_MAX_FRAME_SIZE,
  ProtocolError,
  encodeFrame,
  encodeRowsFrames,
  type DecodedFrame,
  type Frame,
  type Row,
} from '../../protocol/index.js';

/** the frame without the decoder's header facts, for comparing with what was encoded */
function strip(f: DecodedFrame): Frame {
  const { payloadLength, ...rest } = f;
  void payloadLength;
  if (rest.flags === 0) delete (rest as { flags?: number }).flags;
  return rest as Frame;
}

function hex(s: string): Buffer {
  return Buffer.from(s, 'hex');
}

function header(version: number, type: number, flags: number, stream: number, length: number): Buffer {
  const b = Buffer.alloc(HEADER_SIZE);
  b[0] = version;
  b[1] = type;
  b.writeUInt16BE(flags, 2);
  b.writeUInt32BE(stream, 4);
  b.writeUInt32BE(length, 8);
  return b;
}

function expectCode(t: Test, fn: () => unknown, code: string, msg?: string): void {
  try {
    fn();
    t.fail(`${msg ?? 'call'}: expected ${code}, nothing thrown`);
  } catch (err) {
    t.ok(err instanceof ProtocolError, `${msg ?? code}: a ProtocolError`);
    t.equal((err as ProtocolError).code, code, msg ?? code);
  }
}

// Golden vectors, written independently of the encoder (see protocol/README.md for the layout).
const GOLDEN: [string, Frame, string][] = [
  [
    'HELLO',
    { type: 'HELLO', streamId: 0, hello: { versions: [1], features: ['rows-v1'], role: 'server', maxFrameSize: 1048576, streamWindow: 1048576, sessionWindow: 16777216, maxConcurrentStreams: 256 } },
    '0101000000000000000000997b2276657273696f6e73223a5b315d2c226665617475726573223a5b22726f77732d7631225d2c22726f6c65223a22736572766572222c226d61784672616d6553697a65223a313034383537362c2273747265616d57696e646f77223a313034383537362c2273657373696f6e57696e646f77223a31363737373231362c226d6178436f6e63757272656e7453747265616d73223a3235367d',
  ],
  [
    'OPEN',
    { type: 'OPEN', streamId: 1, open: { statement: 'SELECT $1', timeoutMs: 5000, tag: 't1', params: [42] } },
    '01020000000000010000003c357b2273746174656d656e74223a2253454c454354202431222c2274696d656f75744d73223a353030302c22746167223a227431227d01030000002a',
  ],
  [
    'COLUMNS',
    { type: 'COLUMNS', streamId: 1, columns: [{ name: 'id', typeOid: 23 }, { name: 'v', type: 'text' }] },
    '0103000000000001000000437b22636f6c756d6e73223a5b7b226e616d65223a226964222c22747970654f6964223a32337d2c7b226e616d65223a2276222c2274797065223a2274657874227d5d7d',
  ],
  [
    'ROWS (int, string, null, true / float, bytes, false, bigint)',
    { type: 'ROWS', streamId: 1, rows: [[1, 'a', null, true], [-1.5, Buffer.from([0xde, 0xad]), false, 10n]] },
    '0104000000000001000000240204030000000105016100020404bff80000000000000602dead0107000000000000000a',
  ],
  [
    'ROWS (bigint at the i64 minimum, bigint beyond 64 bits as decimal text)',
    { type: 'ROWS', streamId: 5, rows: [[-(2n ** 63n), 2n ** 64n]] },
    '01040000000000050000002101020780000000000000000a143138343436373434303733373039353531363136',
  ],
  [
    'ROWS (date, json, utf-8 string)',
    { type: 'ROWS', streamId: 3, rows: [[new Date(0), { a: 1 }, 'é€']] },
    '01040000000000030000001b010308000000000000000009077b2261223a317d0505c3a9e282ac',
  ],
  ['END', { type: 'END', streamId: 1, end: { rowCount: 2, byteCount: 40, command: 'SELECT 2' } }, '0105000000000001000000327b22726f77436f756e74223a322c2262797465436f756e74223a34302c22636f6d6d616e64223a2253454c4543542032227d'],
  ['ERROR', { type: 'ERROR', streamId: 1, error: { code: 'E1', message: 'boom', retryable: false } }, '0106000000000001000000307b22636f6465223a224531222c226d657373616765223a22626f6f6d222c22726574727961626c65223a66616c73657d'],
  ['CANCEL with reason', { type: 'CANCEL', streamId: 1, reason: 'user' }, '0107000000000001000000117b22726561736f6e223a2275736572227d'],
  ['CANCEL', { type: 'CANCEL', streamId: 5 }, '0107000000000005000000027b7d'],
  ['CREDIT (session)', { type: 'CREDIT', streamId: 0, increment: 65536 }, '01080000000000000000000400010000'],
  ['CREDIT (stream)', { type: 'CREDIT', streamId: 1, increment: 4096 }, '01080000000000010000000400001000'],
  ['PING', { type: 'PING', streamId: 0, data: Buffer.from([0, 0, 0, 0, 0, 0, 0, 1]) }, '0109000000000000000000080000000000000001'],
  ['PONG', { type: 'PONG', streamId: 0, data: Buffer.from([0, 0, 0, 0, 0, 0, 0, 1]) }, '010a000000000000000000080000000000000001'],
  ['GOAWAY', { type: 'GOAWAY', streamId: 0, goaway: { lastStreamId: 7, code: 'PROTO_ERR_GOAWAY' } }, '010b0000000000000000002c7b226c61737453747265616d4964223a372c22636f6465223a2250524f544f5f4552525f474f41574159227d'],
];

t.test('golden vectors: every frame type encodes to the documented bytes and decodes back', async (t) => {
  const types = new Set<string>();
  for (const [name, frame, bytes] of GOLDEN) {
    types.add(frame.type);
    t.equal(encodeFrame(frame).toString('hex'), bytes, `${name}: encode`);
    const d = new FrameDecoder();
    const out = d.push(hex(bytes));
    t.equal(out.length, 1, `${name}: one frame`);
    t.same(strip(out[0] as DecodedFrame), frame, `${name}: decode`);
    t.equal(out[0]?.payloadLength, bytes.length / 2 - HEADER_SIZE, `${name}: payload length`);
    t.ok(d.idle, `${name}: nothing left over`);
  }
  t.equal(types.size, 11, 'all 11 frame types have a golden vector');
});

const UNICODE = 'ascii, é, €, 𝄞, 中文, \u0000';
const VALUES: Row = [
  null,
  true,
  false,
  0,
  -0,
  1,
  -1,
  2147483647,
  -2147483648,
  2147483648,
  -2147483649,
  Number.MAX_SAFE_INTEGER,
  0.1,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  '',
  'x',
  UNICODE,
  'a'.repeat(48),
  'é'.repeat(40), // 40 chars, 80 bytes: a 1-byte length at the short path
  'b'.repeat(127),
  'c'.repeat(128),
  'é'.repeat(100), // 100 chars (1-byte length guess) but 200 bytes: the length prefix grows after writing
  '€'.repeat(6000), // 18000 bytes: 2-byte guess, 3-byte length
  'z'.repeat(70_000),
  123456789012345678901234567890n,
  -123456789012345678901234567890n,
  2n ** 63n - 1n,
  2n ** 63n,
  -5n,
  0n,
  new Date('2024-02-29T12:34:56.789Z'),
  new Date(Number.NaN),
  Buffer.alloc(0),
  Buffer.from([0, 1, 2, 255]),
  { nested: { list: [1, 'two', null, true] } },
  [1, [2, [3]]],
  {},
];

t.test('round trip: every kind of value, one per row and all in one row', async (t) => {
  const rows: Row[] = VALUES.map((v) => [v]);
  rows.push(VALUES);
  rows.push([]);
  const frame: Frame = { type: 'ROWS', streamId: 9, rows };
  const out = new FrameDecoder().push(encodeFrame(frame));
  t.equal(out.length, 1);
  const got = out[0] as DecodedFrame & { type: 'ROWS' };
  t.equal(got.rows.length, rows.length);
  for (let i = 0; i < VALUES.length; i++) {
    const want = VALUES[i];
    const have = got.rows[i]?.[0];
    if (typeof want === 'number' && Number.isNaN(want)) t.ok(Number.isNaN(have), 'NaN');
    else if (want instanceof Date) t.ok(have instanceof Date && Object.is(have.getTime(), want.getTime()), `date ${String(want.getTime())}`);
    else if (typeof want === 'number' && Object.is(want, -0)) t.ok(Object.is(have, -0), '-0 keeps its sign');
    else t.same(have, want, `value ${i} (${typeof want})`);
  }
  t.equal(got.rows[VALUES.length]?.length, VALUES.length);
  t.same(got.rows[VALUES.length + 1], []);
  t.equal(got.rows[0]?.[0], null);
  t.equal(typeof got.rows[VALUES.indexOf(2147483648)]?.[0], 'number');
  t.equal(typeof got.rows[VALUES.indexOf(-5n)]?.[0], 'bigint');
  const bytesAt = VALUES.findIndex((v) => Buffer.isBuffer(v) && v.length === 4);
  t.ok(Buffer.isBuffer(got.rows[bytesAt]?.[0]), 'bytes come back as a Buffer');
});

t.test('round trip: OPEN with parameters, limits and deadline; undefined cells become null', async (t) => {
  const open = { statement: 'SELECT * FROM t WHERE a = $1 AND b = $2', params: [7n, new Date(1_700_000_000_000), Buffer.from('x'), { k: [1] }, 'é'], limits: { maxRows: 1000, maxBytes: 1 << 20 }, timeoutMs: 30_000, tag: 'q_1' };
  const [f] = new FrameDecoder().push(encodeFrame({ type: 'OPEN', streamId: 11, open }));
  t.same(f && strip(f), { type: 'OPEN', streamId: 11, open });
  const [g] = new FrameDecoder().push(encodeFrame({ type: 'ROWS', streamId: 1, rows: [[undefined as unknown as null, 1]] }));
  t.same(g && g.type === 'ROWS' && g.rows, [[null, 1]]);
  const [h] = new FrameDecoder().push(encodeFrame({ type: 'OPEN', streamId: 1, open: { statement: 'SELECT 1' } }));
  t.same(h && strip(h), { type: 'OPEN', streamId: 1, open: { statement: 'SELECT 1' } }, 'no params: no params key');
});

t.test('values that cannot be encoded are refused with PROTO_ERR_INVALID_ARGUMENT', async (t) => {
  const bad: unknown[] = [() => 1, Symbol('s'), new Float32Array(2), { big: 1n }];
  for (const v of bad) {
    expectCode(t, () => encodeFrame({ type: 'ROWS', streamId: 1, rows: [[v as null]] }), 'PROTO_ERR_INVALID_ARGUMENT', `refuses ${typeof v} ${String((v as object)?.constructor?.name ?? '')}`);
  }
  expectCode(t, () => encodeFrame({ type: 'PING', streamId: 1, data: Buffer.alloc(8) }), 'PROTO_ERR_INVALID_ARGUMENT', 'PING off stream 0');
  expectCode(t, () => encodeFrame({ type: 'ROWS', streamId: 0, rows: [] }), 'PROTO_ERR_INVALID_ARGUMENT', 'ROWS on stream 0');
  expectCode(t, () => encodeFrame({ type: 'CREDIT', streamId: 0, increment: -1 }), 'PROTO_ERR_INVALID_ARGUMENT', 'negative credit');
  expectCode(t, () => encodeFrame({ type: 'CREDIT', streamId: 2 ** 32, increment: 1 }), 'PROTO_ERR_INVALID_ARGUMENT', 'stream id past u32');
  expectCode(t, () => encodeFrame({ type: 'PONG', streamId: 0, data: Buffer.alloc(4) }), 'PROTO_ERR_INVALID_ARGUMENT', 'short pong');
  expectCode(t, () => encodeFrame({ type: 'END', streamId: 1, end: { rowCount: 1, byteCount: 1 } }, { maxFrameSize: 10 }), 'PROTO_ERR_FRAME_TOO_LARGE', 'payload above the peer maximum');
});

function allGolden(): Buffer {
  return Buffer.concat(GOLDEN.map(([, , b]) => hex(b)));
}

function decodeChunks(chunks: Uint8Array[], opts?: ConstructorParameters<typeof FrameDecoder>[0]): Frame[] {
  const d = new FrameDecoder(opts);
  const out: Frame[] = [];
  for (const c of chunks) for (const f of d.push(c)) out.push(strip(f));
  d.finish();
  return out;
}

t.test('decoding with the input split at every byte offset, byte by byte, and in random chunks', async (t) => {
  const all = allGolden();
  const want = GOLDEN.map(([, f]) => f);
  let ok = 0;
  for (let i = 0; i <= all.length; i++) {
    const got = decodeChunks([all.subarray(0, i), all.subarray(i)]);
    if (JSON.stringify(got, replacer) === JSON.stringify(want, replacer)) ok++;
    else t.fail(`split at ${i} differs`);
  }
  t.equal(ok, all.length + 1, `all ${all.length + 1} single splits decode the same ${want.length} frames`);
  // every pair of split points over the first three frames (header/payload boundaries on both sides)
  const small = Buffer.concat(GOLDEN.slice(1, 4).map(([, , b]) => hex(b)));
  const smallWant = JSON.stringify(GOLDEN.slice(1, 4).map(([, f]) => f), replacer);
  let pairs = 0;
  for (let i = 0; i <= small.length; i++) {
    for (let j = i; j <= small.length; j++) {
      const got = decodeChunks([small.subarray(0, i), small.subarray(i, j), small.subarray(j)]);
      if (JSON.stringify(got, replacer) !== smallWant) t.fail(`split at ${i}/${j} differs`);
      else pairs++;
    }
  }
  t.ok(pairs > 10_000, `${pairs} double splits agree`);
  const bytes: Uint8Array[] = [];
  for (let i = 0; i < all.length; i++) bytes.push(new Uint8Array(all.subarray(i, i + 1)));
  t.equal(JSON.stringify(decodeChunks(bytes), replacer), JSON.stringify(want, replacer), 'byte by byte (plain Uint8Arrays, not Buffers)');
  // random chunking of a large frame (payload spans many chunks: the growing buffer path)
  const rows: Row[] = [];
  for (let i = 0; i < 3000; i++) rows.push([i, `row ${i} ${'x'.repeat(i % 97)}`, i % 3 === 0 ? null : i * 1.5]);
  const big = encodeFrame({ type: 'ROWS', streamId: 5, rows });
  let seed = 42;
  const rand = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let round = 0; round < 20; round++) {
    const chunks: Buffer[] = [];
    for (let p = 0; p < big.length; ) {
      const n = 1 + Math.floor(rand() * 5000);
      chunks.push(big.subarray(p, p + n));
      p += n;
    }
    const [f] = decodeChunks(chunks);
    if (!f || f.type !== 'ROWS' || JSON.stringify(f.rows) !== JSON.stringify(rows)) t.fail(`random chunking round ${round}`);
  }
  t.pass('a 3000-row frame decodes the same under 20 random chunkings');
});

function replacer(_k: string, v: unknown): unknown {
  if (typeof v === 'bigint') return `${v}n`;
  if (v && typeof v === 'object' && (v as { type?: string }).type === 'Buffer') return `buf:${JSON.stringify(v)}`;
  return v;
}

t.test('encodeRowsFrames packs rows into frames no larger than the target, in order', async (t) => {
  const rows: Row[] = [];
  for (let i = 0; i < 5000; i++) rows.push([i, 'v'.repeat(i % 50), i % 7 === 0]);
  const frames = encodeRowsFrames(3, rows, { targetPayload: 4096 });
  t.ok(frames.length > 10, `${frames.length} frames`);
  const d = new FrameDecoder();
  const back: Row[] = [];
  for (const f of frames) {
    t.ok(f.length - HEADER_SIZE <= 4096, 'payload within the target');
    for (const fr of d.push(f)) if (fr.type === 'ROWS') back.push(...fr.rows);
  }
  t.same(back, rows, 'all rows, in order');
  t.same(encodeRowsFrames(3, []), [], 'no rows, no frames');
  const one = encodeRowsFrames(3, [['y'.repeat(10_000)]], { targetPayload: 4096, maxPayload: 20_000 });
  t.equal(one.length, 1, 'a single row larger than the target but within the max gets its own frame');
  expectCode(t, () => encodeRowsFrames(3, [['y'.repeat(30_000)]], { targetPayload: 4096, maxPayload: 20_000 }), 'PROTO_ERR_ROW_TOO_LARGE');
  // a big row in the middle: the frames around it still hold the other rows
  const mixed = encodeRowsFrames(3, [[1], ['y'.repeat(10_000)], [2]], { targetPayload: 4096, maxPayload: 20_000 });
  t.equal(mixed.length, 3);
});

t.test('malformed: oversized length fails on the header, before any allocation', async (t) => {
  const d = new FrameDecoder({ maxFrameSize: 1024 * 1024 });
  const before = process.memoryUsage().arrayBuffers;
  expectCode(t, () => d.push(header(1, 0x04, 0, 1, 0xffff_ffff)), 'PROTO_ERR_FRAME_TOO_LARGE', '4 GiB declared');
  t.ok(process.memoryUsage().arrayBuffers - before < 1024 * 1024, 'no big buffer was allocated');
  expectCode(t, () => d.push(Buffer.alloc(10)), 'PROTO_ERR_FRAME_TOO_LARGE', 'the decoder stays failed');
  expectCode(t, () => new FrameDecoder({ maxFrameSize: 100 }).push(header(1, 0x05, 0, 1, 101)), 'PROTO_ERR_FRAME_TOO_LARGE', 'one byte over the limit');
  t.same(new FrameDecoder({ maxFrameSize: 2 }).push(Buffer.concat([header(1, 0x07, 0, 1, 2), Buffer.from('{}')])).length, 1, 'exactly at the limit is fine');
  // within the limit but never completed: memory grows with bytes received, not with the declared length
  const big = new FrameDecoder({ maxFrameSize: MAX_MAX_FRAME_SIZE });
  const b2 = process.memoryUsage().arrayBuffers;
  big.push(header(1, 0x04, 0, 1, MAX_MAX_FRAME_SIZE));
  for (let i = 0; i < 10; i++) big.push(Buffer.alloc(100));
  t.equal(big.bufferedBytes, 1000, '1000 bytes held');
  t.ok(process.memoryUsage().arrayBuffers - b2 < 4 * 1024 * 1024, 'a 64 MiB declaration did not allocate 64 MiB');
  expectCode(t, () => big.finish(), 'PROTO_ERR_TRUNCATED', 'and ending there is a truncation');
});

t.test('malformed: every class gives its code', async (t) => {
  const cases: [string, Buffer, string][] = [
    ['version 0', header(0, 0x09, 0, 0, 8), 'PROTO_ERR_BAD_VERSION'],
    ['version 2', header(2, 0x09, 0, 0, 8), 'PROTO_ERR_BAD_VERSION'],
    ['type 0x00', header(1, 0x00, 0, 0, 0), 'PROTO_ERR_UNKNOWN_TYPE'],
    ['type 0x0c', header(1, 0x0c, 0, 0, 0), 'PROTO_ERR_UNKNOWN_TYPE'],
    ['type 0xff', header(1, 0xff, 0, 0, 0), 'PROTO_ERR_UNKNOWN_TYPE'],
    ['PING on stream 3', header(1, 0x09, 0, 3, 8), 'PROTO_ERR_UNEXPECTED_FRAME'],
    ['HELLO on stream 1', header(1, 0x01, 0, 1, 2), 'PROTO_ERR_UNEXPECTED_FRAME'],
    ['OPEN on stream 0', header(1, 0x02, 0, 0, 2), 'PROTO_ERR_UNEXPECTED_FRAME'],
    ['ROWS on stream 0', header(1, 0x04, 0, 0, 1), 'PROTO_ERR_UNEXPECTED_FRAME'],
    ['CREDIT of 3 bytes', header(1, 0x08, 0, 0, 3), 'PROTO_ERR_BAD_PAYLOAD'],
    ['PING of 7 bytes', header(1, 0x09, 0, 0, 7), 'PROTO_ERR_BAD_PAYLOAD'],
    ['HELLO not JSON', Buffer.concat([header(1, 0x01, 0, 0, 3), Buffer.from('{x}')]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['HELLO a JSON array', Buffer.concat([header(1, 0x01, 0, 0, 2), Buffer.from('[]')]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['HELLO missing fields', Buffer.concat([header(1, 0x01, 0, 0, 2), Buffer.from('{}')]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['END invalid UTF-8', Buffer.concat([header(1, 0x05, 0, 1, 4), Buffer.from([0x7b, 0xff, 0xfe, 0x7d])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['END negative count', Buffer.concat([header(1, 0x05, 0, 1, 28), Buffer.from('{"rowCount":-1,"byteCount":0}'.slice(0, 28))]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ERROR without code', Buffer.concat([header(1, 0x06, 0, 1, 15), Buffer.from('{"message":"x"}')]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['COLUMNS not an array', Buffer.concat([header(1, 0x03, 0, 1, 13), Buffer.from('{"columns":1}')]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS claiming 10^9 rows', Buffer.concat([header(1, 0x04, 0, 1, 5), Buffer.from([0x80, 0x94, 0xeb, 0xdc, 0x03])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS row claiming 2^31 cells', Buffer.concat([header(1, 0x04, 0, 1, 6), Buffer.from([0x01, 0x80, 0x80, 0x80, 0x80, 0x08])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS varint of 6 bytes', Buffer.concat([header(1, 0x04, 0, 1, 6), Buffer.from([0x81, 0x80, 0x80, 0x80, 0x80, 0x00])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS varint above 2^32', Buffer.concat([header(1, 0x04, 0, 1, 5), Buffer.from([0xff, 0xff, 0xff, 0xff, 0x7f])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS unknown value tag', Buffer.concat([header(1, 0x04, 0, 1, 3), Buffer.from([0x01, 0x01, 0x42])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS string past the end', Buffer.concat([header(1, 0x04, 0, 1, 5), Buffer.from([0x01, 0x01, 0x05, 0x10, 0x61])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS int32 cut short', Buffer.concat([header(1, 0x04, 0, 1, 5), Buffer.from([0x01, 0x01, 0x03, 0x00, 0x00])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS trailing bytes', Buffer.concat([header(1, 0x04, 0, 1, 3), Buffer.from([0x01, 0x00, 0x00])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS bad bigint text', Buffer.concat([header(1, 0x04, 0, 1, 6), Buffer.from([0x01, 0x01, 0x0a, 0x02, 0x31, 0x78])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS bigint cut short', Buffer.concat([header(1, 0x04, 0, 1, 7), Buffer.from([0x01, 0x01, 0x07, 0, 0, 0, 1])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS bad json cell', Buffer.concat([header(1, 0x04, 0, 1, 5), Buffer.from([0x01, 0x01, 0x09, 0x01, 0x7b])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['ROWS empty payload', header(1, 0x04, 0, 1, 0), 'PROTO_ERR_BAD_PAYLOAD'],
    ['OPEN params missing', Buffer.concat([header(1, 0x02, 0, 1, 3), Buffer.from([0x02, 0x7b, 0x7d])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['OPEN without statement', Buffer.concat([header(1, 0x02, 0, 1, 4), Buffer.from([0x02, 0x7b, 0x7d, 0x00])]), 'PROTO_ERR_BAD_PAYLOAD'],
    ['GOAWAY id not a number', Buffer.concat([header(1, 0x0b, 0, 0, 20), Buffer.from('{"lastStreamId":"1"}')]), 'PROTO_ERR_BAD_PAYLOAD'],
  ];
  for (const [name, bytes, code] of cases) {
    expectCode(t, () => new FrameDecoder().push(bytes), code, name);
    // the same frame fed byte by byte fails the same way
    const d = new FrameDecoder();
    expectCode(
      t,
      () => {
        for (const b of bytes) d.push(Buffer.from([b]));
      },
      code,
      `${name} (byte by byte)`,
    );
  }
  const trunc = new FrameDecoder();
  trunc.push(hex(GOLDEN[9]?.[2] ?? '').subarray(0, 5));
  expectCode(t, () => trunc.finish(), 'PROTO_ERR_TRUNCATED', 'input ending inside a header');
  const trunc2 = new FrameDecoder();
  trunc2.push(hex(GOLDEN[0]?.[2] ?? '').subarray(0, 40));
  expectCode(t, () => trunc2.finish(), 'PROTO_ERR_TRUNCATED', 'input ending inside a payload');
  const fine = new FrameDecoder();
  fine.push(allGolden());
  fine.finish();
  t.pass('finish() after whole frames is fine');
  // unknown flag bits are ignored (reserved for later versions)
  const flagged = Buffer.concat([header(1, 0x07, 0x8001, 1, 2), Buffer.from('{}')]);
  t.same(new FrameDecoder().push(flagged)[0]?.flags, 0x8001, 'flags are reported, not refused');
});

t.test('a flood of tiny frames: the callback API stops at the first refusal, memory stays flat', async (t) => {
  const one = hex('0109000000000000000000080000000000000001');
  const flood = Buffer.concat(Array.from({ length: 100_000 }, () => one));
  const d = new FrameDecoder();
  let seen = 0;
  const before = process.memoryUsage().heapUsed;
  try {
    d.write(flood, () => {
      if (++seen > 1000) throw new ProtocolError('PROTO_ERR_FLOOD');
    });
  } catch (err) {
    t.equal((err as ProtocolError).code, 'PROTO_ERR_FLOOD');
  }
  t.equal(seen, 1001, 'decoding stopped at the limit, not after 100 000 frames');
  t.ok(process.memoryUsage().heapUsed - before < 8 * 1024 * 1024, 'heap stayed flat');
  t.equal(d.failed?.message, new ProtocolError('PROTO_ERR_FLOOD').message, 'the decoder stays failed');
});
