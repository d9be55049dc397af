/**
 * Payload decoding: `decodePayload` turns the payload of a frame whose header was already
 * checked into a frame, validating every field (protocol/README.md, "Frames"); anything wrong is
 * PROTO_ERR_BAD_PAYLOAD. Used by `FrameDecoder` (codec.ts), which re-exports it.
 */
import { ProtocolError, protoError } from './errors.js';
import {
  MAX_U32,
  type Column,
  type DecodedFrame,
  type EndInfo,
  type ErrorInfo,
  type FrameTypeName,
  type GoawayInfo,
  type Hello,
  type JsonValue,
  type QueryLimits,
  type QueryOpen,
  type Row,
} from './frames.js';
import { ByteReader } from './values.js';

/** a payload that does not parse or fails validation */
export function bad(message: string): ProtocolError {
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
