/**
 * Frame encoding: `encodeFrame` (frame → bytes) and `encodeRowsFrames` (a batch of rows → ROWS
 * frames of bounded size). Synchronous, no I/O. Re-exported by codec.ts.
 */
import { protoError } from './errors.js';
import { FRAME_VERSION, FrameType, HEADER_SIZE, MAX_U32, STREAM_NONZERO_ONLY, STREAM_ZERO_ONLY, type Frame, type Row } from './frames.js';
import { ByteWriter, varintSize } from './values.js';

// One scratch writer for all encoding: encoding is synchronous, so it is never shared mid-use.
let scratch = new ByteWriter(64 * 1024);
const SCRATCH_KEEP = 4 * 1024 * 1024;

function takeScratch(): ByteWriter {
  if (scratch.buf.length > SCRATCH_KEEP) scratch = new ByteWriter(64 * 1024);
  scratch.pos = 0;
  return scratch;
}

function writeHeader(out: Buffer, type: number, flags: number, streamId: number, length: number): void {
  out[0] = FRAME_VERSION;
  out[1] = type;
  out.writeUInt16BE(flags, 2);
  out.writeUInt32BE(streamId, 4);
  out.writeUInt32BE(length, 8);
}

function checkHeaderFields(frame: Frame): number {
  const flags = frame.flags ?? 0;
  if (!Number.isInteger(flags) || flags < 0 || flags > 0xffff) throw protoError('PROTO_ERR_INVALID_ARGUMENT', `flags must be a u16, got ${flags}`);
  if (!Number.isInteger(frame.streamId) || frame.streamId < 0 || frame.streamId > MAX_U32) {
    throw protoError('PROTO_ERR_INVALID_ARGUMENT', `stream id must be a u32, got ${frame.streamId}`);
  }
  if (STREAM_ZERO_ONLY.has(frame.type) && frame.streamId !== 0) throw protoError('PROTO_ERR_INVALID_ARGUMENT', `${frame.type} travels on stream 0`);
  if (STREAM_NONZERO_ONLY.has(frame.type) && frame.streamId === 0) throw protoError('PROTO_ERR_INVALID_ARGUMENT', `${frame.type} needs a stream id other than 0`);
  return flags;
}

function jsonText(w: ByteWriter, v: unknown): void {
  const text = JSON.stringify(v);
  w.ensure(text.length * 3);
  w.pos += w.buf.write(text, w.pos, 'utf8');
}

function writePayload(w: ByteWriter, frame: Frame): void {
  switch (frame.type) {
    case 'HELLO':
      return jsonText(w, frame.hello);
    case 'OPEN': {
      const { params, ...rest } = frame.open;
      w.json(rest);
      const ps = params ?? [];
      if (!Array.isArray(ps)) throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'params must be an array');
      w.row(ps);
      return;
    }
    case 'COLUMNS':
      return jsonText(w, { columns: frame.columns });
    case 'ROWS':
      w.varint(frame.rows.length);
      for (const row of frame.rows) w.row(row);
      return;
    case 'END':
      return jsonText(w, frame.end);
    case 'ERROR':
      return jsonText(w, frame.error);
    case 'CANCEL':
      return jsonText(w, frame.reason === undefined ? {} : { reason: frame.reason });
    case 'CREDIT':
      if (!Number.isInteger(frame.increment) || frame.increment < 0 || frame.increment > MAX_U32) {
        throw protoError('PROTO_ERR_INVALID_ARGUMENT', `credit increment must be a u32, got ${frame.increment}`);
      }
      w.ensure(4);
      w.buf.writeUInt32BE(frame.increment, w.pos);
      w.pos += 4;
      return;
    case 'PING':
    case 'PONG':
      if (frame.data.length !== 8) throw protoError('PROTO_ERR_INVALID_ARGUMENT', `${frame.type} data is 8 bytes`);
      w.ensure(8);
      w.buf.set(frame.data, w.pos);
      w.pos += 8;
      return;
    case 'GOAWAY':
      return jsonText(w, frame.goaway);
    default: {
      const never: never = frame;
      throw protoError('PROTO_ERR_INVALID_ARGUMENT', `unknown frame type ${(never as { type: string }).type}`);
    }
  }
}

/**
 * Encodes one frame. With `maxFrameSize`, a payload above it throws PROTO_ERR_FRAME_TOO_LARGE
 * (pass the peer's advertised maximum). The result is a fresh Buffer of the exact size.
 */
export function encodeFrame(frame: Frame, opts: { maxFrameSize?: number } = {}): Buffer {
  const flags = checkHeaderFields(frame);
  const w = takeScratch();
  w.ensure(HEADER_SIZE);
  w.pos = HEADER_SIZE;
  writePayload(w, frame);
  const length = w.pos - HEADER_SIZE;
  const max = Math.min(opts.maxFrameSize ?? MAX_U32, MAX_U32);
  if (length > max) throw protoError('PROTO_ERR_FRAME_TOO_LARGE', `${frame.type} payload is ${length} bytes, the maximum is ${max}`);
  writeHeader(w.buf, FrameType[frame.type], flags, frame.streamId, length);
  const out = Buffer.allocUnsafe(w.pos);
  w.buf.copy(out, 0, 0, w.pos);
  return out;
}

function assembleRows(w: ByteWriter, streamId: number, count: number, from: number, to: number): Buffer {
  const vs = varintSize(count);
  const length = vs + (to - from);
  const out = Buffer.allocUnsafe(HEADER_SIZE + length);
  writeHeader(out, FrameType.ROWS, 0, streamId, length);
  let p = HEADER_SIZE;
  let v = count;
  while (v >= 0x80) {
    out[p++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[p++] = v;
  w.buf.copy(out, p, from, to);
  return out;
}

export interface RowsEncodeOptions {
  /** a frame holding several rows stays at or below this payload size (default 64 KiB) */
  targetPayload?: number;
  /** hard limit on a payload, for a frame holding one large row (default: targetPayload) */
  maxPayload?: number;
}

/**
 * Encodes a batch of rows as ROWS frames: rows are packed until a frame would pass
 * `targetPayload`; one row larger than `maxPayload` throws PROTO_ERR_ROW_TOO_LARGE.
 * An empty batch gives no frames.
 */
export function encodeRowsFrames(streamId: number, rows: readonly Row[], opts: RowsEncodeOptions = {}): Buffer[] {
  if (!Number.isInteger(streamId) || streamId <= 0 || streamId > MAX_U32) throw protoError('PROTO_ERR_INVALID_ARGUMENT', `ROWS needs a stream id in 1..2^32-1, got ${streamId}`);
  const target = opts.targetPayload ?? 64 * 1024;
  const max = Math.max(opts.maxPayload ?? target, target);
  const w = takeScratch();
  const frames: Buffer[] = [];
  let count = 0;
  for (const row of rows) {
    const rowStart = w.pos;
    w.row(row);
    const rowLen = w.pos - rowStart;
    if (rowLen + varintSize(1) > max) {
      w.pos = rowStart;
      throw protoError('PROTO_ERR_ROW_TOO_LARGE', `a row of ${rowLen} bytes does not fit in a frame of at most ${max} bytes`);
    }
    if (count > 0 && w.pos + varintSize(count + 1) > target) {
      frames.push(assembleRows(w, streamId, count, 0, rowStart));
      // keep the scratch small: move the row that did not fit to the front
      w.buf.copyWithin(0, rowStart, w.pos);
      w.pos = rowLen;
      count = 1;
    } else {
      count++;
    }
  }
  if (count > 0) frames.push(assembleRows(w, streamId, count, 0, w.pos));
  return frames;
}
