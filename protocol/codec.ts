/**
 * Frame codec: `encodeFrame` (frame → bytes), `encodeRowsFrames` (a batch of rows → ROWS frames
 * of bounded size) and `FrameDecoder`, a pure state machine (bytes in any chunking → frames).
 * Nothing here touches a socket or a timer.
 */
import { ProtocolError, protoError } from './errors.js';
import {
  FIXED_PAYLOAD,
  FRAME_TYPE_NAMES,
  FRAME_VERSION,
  FrameType,
  HEADER_SIZE,
  MAX_MAX_FRAME_SIZE,
  STREAM_NONZERO_ONLY,
  STREAM_ZERO_ONLY,
  type Column,
  type DecodedFrame,
  type EndInfo,
  type ErrorInfo,
  type Frame,
  type FrameTypeName,
  type GoawayInfo,
  type Hello,
  type JsonValue,
  type QueryLimits,
  type QueryOpen,
  type Row,
} from './frames.js';
import { ByteReader, ByteWriter, varintSize } from './values.js';

/** default largest payload the decoder accepts */
export const DEFAULT_MAX_FRAME_SIZE = 1024 * 1024;

const MAX_U32 = 0xffff_ffff;

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

// ---------------------------------------------------------------- decoding

function bad(message: string): ProtocolError {
  return protoError('PROTO_ERR_BAD_PAYLOAD', message);
}

type Obj = Record<string, unknown>;

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

function parseJson(payload: Buffer, what: string): Obj {
  let text: string;
  try {
    text = fatalUtf8.decode(payload);
  } catch {
    throw bad(`${what}: invalid UTF-8`);
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw bad(`${what}: not valid JSON`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad(`${what}: payload must be a JSON object`);
  return v as Obj;
}

function str(o: Obj, key: string, what: string, max = 1 << 24): string {
  const v = o[key];
  if (typeof v !== 'string') throw bad(`${what}.${key} must be a string`);
  if (v.length > max) throw bad(`${what}.${key} is longer than ${max}`);
  return v;
}

function optStr(o: Obj, key: string, what: string, max = 1 << 24): string | undefined {
  return o[key] === undefined ? undefined : str(o, key, what, max);
}

function int(o: Obj, key: string, what: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw bad(`${what}.${key} must be an integer in ${min}..${max}`);
  return v;
}

function optInt(o: Obj, key: string, what: string, min = 0, max = Number.MAX_SAFE_INTEGER): number | undefined {
  return o[key] === undefined ? undefined : int(o, key, what, min, max);
}

function optBool(o: Obj, key: string, what: string): boolean | undefined {
  const v = o[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw bad(`${what}.${key} must be a boolean`);
  return v;
}

function decodeHello(o: Obj): Hello {
  const versions = o['versions'];
  if (!Array.isArray(versions) || versions.length === 0 || versions.length > 16 || !versions.every((v) => Number.isInteger(v) && v >= 1 && v <= 255)) {
    throw bad('HELLO.versions must be 1..16 integers in 1..255');
  }
  const features = o['features'];
  if (!Array.isArray(features) || features.length > 64 || !features.every((f) => typeof f === 'string' && f.length <= 64)) {
    throw bad('HELLO.features must be at most 64 strings of at most 64 characters');
  }
  const role = o['role'];
  if (role !== 'client' && role !== 'server') throw bad('HELLO.role must be "client" or "server"');
  const hello: Hello = {
    versions: versions as number[],
    features: features as string[],
    role,
    maxFrameSize: int(o, 'maxFrameSize', 'HELLO', 0, MAX_U32),
    streamWindow: int(o, 'streamWindow', 'HELLO', 0, MAX_U32),
    sessionWindow: int(o, 'sessionWindow', 'HELLO', 0, MAX_U32),
    maxConcurrentStreams: int(o, 'maxConcurrentStreams', 'HELLO', 0, MAX_U32),
  };
  const agent = optStr(o, 'agent', 'HELLO', 256);
  if (agent !== undefined) hello.agent = agent;
  return hello;
}

function decodeOpen(payload: Buffer): QueryOpen {
  const r = new ByteReader(payload);
  const text = r.strictString('OPEN header');
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch {
    throw bad('OPEN: header is not valid JSON');
  }
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw bad('OPEN: header must be a JSON object');
  const h = o as Obj;
  const open: QueryOpen = { statement: str(h, 'statement', 'OPEN') };
  const limits = h['limits'];
  if (limits !== undefined) {
    if (limits === null || typeof limits !== 'object' || Array.isArray(limits)) throw bad('OPEN.limits must be an object');
    const l: QueryLimits = {};
    const maxRows = optInt(limits as Obj, 'maxRows', 'OPEN.limits');
    const maxBytes = optInt(limits as Obj, 'maxBytes', 'OPEN.limits');
    if (maxRows !== undefined) l.maxRows = maxRows;
    if (maxBytes !== undefined) l.maxBytes = maxBytes;
    open.limits = l;
  }
  const timeoutMs = optInt(h, 'timeoutMs', 'OPEN', 0, 0x7fff_ffff);
  if (timeoutMs !== undefined) open.timeoutMs = timeoutMs;
  const tag = optStr(h, 'tag', 'OPEN', 256);
  if (tag !== undefined) open.tag = tag;
  const params = r.row();
  if (params.length > 0) open.params = params;
  if (r.remaining !== 0) throw bad(`OPEN: ${r.remaining} trailing bytes`);
  return open;
}

function decodeColumns(o: Obj): Column[] {
  const cols = o['columns'];
  if (!Array.isArray(cols)) throw bad('COLUMNS.columns must be an array');
  return cols.map((c: unknown, i) => {
    if (c === null || typeof c !== 'object' || Array.isArray(c)) throw bad(`COLUMNS.columns[${i}] must be an object`);
    const co = c as Obj;
    const col: Column = { name: str(co, 'name', `COLUMNS.columns[${i}]`) };
    const typeOid = optInt(co, 'typeOid', `COLUMNS.columns[${i}]`, 0, MAX_U32);
    if (typeOid !== undefined) col.typeOid = typeOid;
    const type = optStr(co, 'type', `COLUMNS.columns[${i}]`, 256);
    if (type !== undefined) col.type = type;
    return col;
  });
}

function decodeRows(payload: Buffer): Row[] {
  const r = new ByteReader(payload);
  const n = r.varint('row count');
  // every row takes at least one byte (its cell count)
  if (n > r.remaining) throw bad(`ROWS claims ${n} rows, payload has ${r.remaining} bytes left`);
  const rows: Row[] = new Array<Row>(n);
  for (let i = 0; i < n; i++) rows[i] = r.row();
  if (r.remaining !== 0) throw bad(`ROWS: ${r.remaining} trailing bytes`);
  return rows;
}

function decodeEnd(o: Obj): EndInfo {
  const end: EndInfo = { rowCount: int(o, 'rowCount', 'END'), byteCount: int(o, 'byteCount', 'END') };
  const truncated = optBool(o, 'truncated', 'END');
  if (truncated !== undefined) end.truncated = truncated;
  const command = optStr(o, 'command', 'END', 256);
  if (command !== undefined) end.command = command;
  return end;
}

function decodeError(o: Obj): ErrorInfo {
  const code = str(o, 'code', 'ERROR', 128);
  if (code.length === 0) throw bad('ERROR.code must not be empty');
  const error: ErrorInfo = { code, message: str(o, 'message', 'ERROR', 64 * 1024) };
  const retryable = optBool(o, 'retryable', 'ERROR');
  if (retryable !== undefined) error.retryable = retryable;
  if (o['detail'] !== undefined) error.detail = o['detail'] as JsonValue;
  return error;
}

function decodeGoaway(o: Obj): GoawayInfo {
  const g: GoawayInfo = { lastStreamId: int(o, 'lastStreamId', 'GOAWAY', 0, MAX_U32) };
  const code = optStr(o, 'code', 'GOAWAY', 128);
  if (code !== undefined) g.code = code;
  const message = optStr(o, 'message', 'GOAWAY', 4096);
  if (message !== undefined) g.message = message;
  return g;
}

/** Decodes a payload whose header has already been validated. */
export function decodePayload(type: FrameTypeName, streamId: number, flags: number, payload: Buffer): DecodedFrame {
  const base = { streamId, flags, payloadLength: payload.length };
  switch (type) {
    case 'HELLO':
      return { type, ...base, hello: decodeHello(parseJson(payload, type)) };
    case 'OPEN':
      return { type, ...base, open: decodeOpen(payload) };
    case 'COLUMNS':
      return { type, ...base, columns: decodeColumns(parseJson(payload, type)) };
    case 'ROWS':
      return { type, ...base, rows: decodeRows(payload) };
    case 'END':
      return { type, ...base, end: decodeEnd(parseJson(payload, type)) };
    case 'ERROR':
      return { type, ...base, error: decodeError(parseJson(payload, type)) };
    case 'CANCEL': {
      const reason = optStr(parseJson(payload, type), 'reason', 'CANCEL', 4096);
      return reason === undefined ? { type, ...base } : { type, ...base, reason };
    }
    case 'CREDIT':
      return { type, ...base, increment: payload.readUInt32BE(0) };
    case 'PING':
    case 'PONG':
      return { type, ...base, data: Buffer.from(payload) };
    case 'GOAWAY':
      return { type, ...base, goaway: decodeGoaway(parseJson(payload, type)) };
    default: {
      const never: never = type;
      throw protoError('PROTO_ERR_UNKNOWN_TYPE', `unknown frame type ${String(never)}`);
    }
  }
}

export interface DecoderOptions {
  /** largest payload accepted; larger lengths fail before any allocation (default 1 MiB) */
  maxFrameSize?: number;
  /** header version bytes accepted (default [1]) */
  versions?: readonly number[];
}

function toBuffer(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/**
 * Bytes in, frames out, whatever the chunking. Holds at most one header and one partial
 * payload, and the payload buffer grows only with bytes actually received (never to a declared
 * length up front). After an error the decoder stays failed and rethrows it.
 */
export class FrameDecoder {
  maxFrameSize: number;
  readonly #versions: ReadonlySet<number>;
  readonly #header = Buffer.alloc(HEADER_SIZE);
  #headerFilled = 0;
  #inPayload = false;
  #type: FrameTypeName = 'HELLO';
  #flags = 0;
  #streamId = 0;
  #length = 0;
  #payload: Buffer | null = null;
  #payloadFilled = 0;
  #error: Error | null = null;

  constructor(opts: DecoderOptions = {}) {
    const max = opts.maxFrameSize ?? DEFAULT_MAX_FRAME_SIZE;
    if (!Number.isInteger(max) || max < 0 || max > MAX_MAX_FRAME_SIZE) {
      throw protoError('PROTO_ERR_INVALID_ARGUMENT', `maxFrameSize must be an integer in 0..${MAX_MAX_FRAME_SIZE}, got ${max}`);
    }
    this.maxFrameSize = max;
    this.#versions = new Set(opts.versions ?? [FRAME_VERSION]);
  }

  /** bytes held for a frame not yet complete */
  get bufferedBytes(): number {
    return this.#headerFilled + this.#payloadFilled;
  }

  /** true when no partial frame is held */
  get idle(): boolean {
    return !this.#inPayload && this.#headerFilled === 0;
  }

  get failed(): Error | null {
    return this.#error;
  }

  /** Decodes what `chunk` completes; returns the frames in order. */
  push(chunk: Uint8Array): DecodedFrame[] {
    const out: DecodedFrame[] = [];
    this.write(chunk, (f) => out.push(f));
    return out;
  }

  /**
   * Like push, but hands each frame to `onFrame` as soon as it is decoded; an exception from
   * `onFrame` stops decoding (the rest of the chunk is dropped) and fails the decoder.
   */
  write(chunk: Uint8Array, onFrame: (frame: DecodedFrame) => void): void {
    if (this.#error) throw this.#error;
    try {
      this.#write(toBuffer(chunk), onFrame);
    } catch (err) {
      // decoding errors are ProtocolErrors already; an error thrown by onFrame passes through as is
      this.#error = err instanceof Error ? err : new Error(String(err));
      this.#headerFilled = 0;
      this.#payload = null;
      this.#payloadFilled = 0;
      throw this.#error;
    }
  }

  /** Declares the end of input: throws PROTO_ERR_TRUNCATED if a frame was left incomplete. */
  finish(): void {
    if (this.#error) throw this.#error;
    if (!this.idle) {
      throw (this.#error = protoError('PROTO_ERR_TRUNCATED', `input ended ${this.#inPayload ? `${this.#payloadFilled} bytes into a ${this.#length}-byte ${this.#type} payload` : `${this.#headerFilled} bytes into a frame header`}`));
    }
  }

  #write(buf: Buffer, onFrame: (frame: DecodedFrame) => void): void {
    let off = 0;
    const len = buf.length;
    while (off < len) {
      if (!this.#inPayload) {
        if (this.#headerFilled === 0 && len - off >= HEADER_SIZE) {
          this.#readHeader(buf, off);
          off += HEADER_SIZE;
        } else {
          const n = Math.min(HEADER_SIZE - this.#headerFilled, len - off);
          buf.copy(this.#header, this.#headerFilled, off, off + n);
          this.#headerFilled += n;
          off += n;
          if (this.#headerFilled < HEADER_SIZE) return;
          this.#headerFilled = 0;
          this.#readHeader(this.#header, 0);
        }
        if (this.#length === 0) {
          this.#emit(Buffer.alloc(0), onFrame);
          continue;
        }
        this.#inPayload = true;
        this.#payloadFilled = 0;
      }
      // payload
      const want = this.#length - this.#payloadFilled;
      if (this.#payloadFilled === 0 && len - off >= want) {
        const payload = buf.subarray(off, off + want);
        off += want;
        this.#inPayload = false;
        this.#emit(payload, onFrame);
        continue;
      }
      const n = Math.min(want, len - off);
      this.#reserve(this.#payloadFilled + n);
      buf.copy(this.#payload as Buffer, this.#payloadFilled, off, off + n);
      this.#payloadFilled += n;
      off += n;
      if (this.#payloadFilled === this.#length) {
        const payload = (this.#payload as Buffer).subarray(0, this.#length);
        this.#payload = null;
        this.#payloadFilled = 0;
        this.#inPayload = false;
        this.#emit(payload, onFrame);
      }
    }
  }

  /** grow the partial-payload buffer with the bytes received, capped at the declared length */
  #reserve(need: number): void {
    const cur = this.#payload;
    if (cur && cur.length >= need) return;
    const size = Math.min(this.#length, Math.max(need, (cur?.length ?? 0) * 2, 4096));
    const next = Buffer.allocUnsafe(size);
    if (cur) cur.copy(next, 0, 0, this.#payloadFilled);
    this.#payload = next;
  }

  #readHeader(b: Buffer, at: number): void {
    const version = b[at] as number;
    const typeCode = b[at + 1] as number;
    const flags = b.readUInt16BE(at + 2);
    const streamId = b.readUInt32BE(at + 4);
    const length = b.readUInt32BE(at + 8);
    if (!this.#versions.has(version)) throw protoError('PROTO_ERR_BAD_VERSION', `frame version ${version} is not supported`);
    const type = FRAME_TYPE_NAMES.get(typeCode);
    if (type === undefined) throw protoError('PROTO_ERR_UNKNOWN_TYPE', `frame type 0x${typeCode.toString(16).padStart(2, '0')} is unknown`);
    if (length > this.maxFrameSize) throw protoError('PROTO_ERR_FRAME_TOO_LARGE', `${type} payload of ${length} bytes exceeds the maximum of ${this.maxFrameSize}`);
    if (STREAM_ZERO_ONLY.has(type) && streamId !== 0) throw protoError('PROTO_ERR_UNEXPECTED_FRAME', `${type} on stream ${streamId}; it travels on stream 0`);
    if (STREAM_NONZERO_ONLY.has(type) && streamId === 0) throw protoError('PROTO_ERR_UNEXPECTED_FRAME', `${type} on stream 0`);
    const fixed = FIXED_PAYLOAD.get(type);
    if (fixed !== undefined && length !== fixed) throw bad(`${type} payload must be ${fixed} bytes, got ${length}`);
    this.#type = type;
    this.#flags = flags;
    this.#streamId = streamId;
    this.#length = length;
  }

  #emit(payload: Buffer, onFrame: (frame: DecodedFrame) => void): void {
    let frame: DecodedFrame;
    try {
      frame = decodePayload(this.#type, this.#streamId, this.#flags, payload);
    } catch (err) {
      if (err instanceof ProtocolError) throw err;
      throw bad(`${this.#type}: ${(err as Error).message}`);
    }
    onFrame(frame);
  }
}
