/**
 * The binary value encoding used by ROWS payloads and OPEN parameters, plus the byte
 * writer/reader the codec builds on. Layout in protocol/README.md ("Values").
 */
import { ProtocolError, protoError } from './errors.js';
import type { JsonValue, Row, Value } from './frames.js';

export const ValueTag = {
  NULL: 0x00,
  FALSE: 0x01,
  TRUE: 0x02,
  INT32: 0x03,
  FLOAT64: 0x04,
  STRING: 0x05,
  BYTES: 0x06,
  BIGINT: 0x07,
  DATE: 0x08,
  JSON: 0x09,
  BIGINT_TEXT: 0x0a,
} as const;

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
// bigint → 8 bytes through a typed array: several times faster than Buffer#writeBigInt64BE
const i64 = new BigInt64Array(1);
const i64Bytes = new Uint8Array(i64.buffer);
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

export function varintSize(v: number): number {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x20_0000 ? 3 : v < 0x1000_0000 ? 4 : 5;
}

/** A growable output buffer. `buf` may be replaced when it grows. */
export class ByteWriter {
  buf: Buffer;
  pos = 0;

  constructor(initial = 4096) {
    this.buf = Buffer.allocUnsafe(initial);
  }

  ensure(n: number): void {
    const need = this.pos + n;
    if (need <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < need) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }

  /** unsigned LEB128, at most 5 bytes, v < 2^32 */
  varint(v: number): void {
    this.ensure(5);
    const b = this.buf;
    let p = this.pos;
    while (v >= 0x80) {
      b[p++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    b[p++] = v;
    this.pos = p;
  }

  bytes(src: Uint8Array): void {
    this.varint(src.length);
    this.ensure(src.length);
    this.buf.set(src, this.pos);
    this.pos += src.length;
  }

  /** varint byte length + UTF-8 bytes */
  string(s: string): void {
    const n = s.length;
    // UTF-8 needs at least one byte per UTF-16 unit, so the length prefix is at least this long
    const reserve = varintSize(n);
    this.ensure(5 + n * 3);
    const b = this.buf;
    const start = this.pos + reserve;
    let written: number;
    if (n <= 48) {
      // short strings: an ASCII loop beats a call into C++
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        b[start + i] = c;
      }
      written = i === n ? n : b.write(s, start, 'utf8');
    } else {
      written = b.write(s, start, 'utf8');
    }
    const need = varintSize(written);
    if (need > reserve) b.copyWithin(this.pos + need, start, start + written);
    this.varint(written);
    this.pos += written;
  }

  json(v: unknown): void {
    let text: string | undefined;
    try {
      text = JSON.stringify(v);
    } catch (err) {
      throw protoError('PROTO_ERR_INVALID_ARGUMENT', `value is not JSON-serialisable: ${(err as Error).message}`);
    }
    if (text === undefined) throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'value is not JSON-serialisable');
    this.string(text);
  }

  value(v: Value | undefined): void {
    if (v === null || v === undefined) return this.u8(ValueTag.NULL);
    switch (typeof v) {
      case 'string':
        this.u8(ValueTag.STRING);
        return this.string(v);
      case 'number':
        if ((v | 0) === v && !(v === 0 && 1 / v < 0)) {
          this.ensure(5);
          this.buf[this.pos] = ValueTag.INT32;
          this.buf.writeInt32BE(v, this.pos + 1);
          this.pos += 5;
        } else {
          this.ensure(9);
          this.buf[this.pos] = ValueTag.FLOAT64;
          this.buf.writeDoubleBE(v, this.pos + 1);
          this.pos += 9;
        }
        return;
      case 'boolean':
        return this.u8(v ? ValueTag.TRUE : ValueTag.FALSE);
      case 'bigint':
        if (v >= I64_MIN && v <= I64_MAX) {
          this.ensure(9);
          const b = this.buf;
          const p = this.pos;
          b[p] = ValueTag.BIGINT;
          i64[0] = v;
          if (littleEndian) for (let i = 0; i < 8; i++) b[p + 1 + i] = i64Bytes[7 - i] as number;
          else b.set(i64Bytes, p + 1);
          this.pos = p + 9;
          return;
        }
        this.u8(ValueTag.BIGINT_TEXT);
        return this.string(v.toString());
      case 'object':
        if (v instanceof Uint8Array) {
          this.u8(ValueTag.BYTES);
          return this.bytes(v);
        }
        if (v instanceof Date) {
          this.ensure(9);
          this.buf[this.pos] = ValueTag.DATE;
          this.buf.writeDoubleBE(v.getTime(), this.pos + 1);
          this.pos += 9;
          return;
        }
        if (ArrayBuffer.isView(v)) throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'typed arrays other than Uint8Array cannot be encoded');
        this.u8(ValueTag.JSON);
        return this.json(v);
      default:
        throw protoError('PROTO_ERR_INVALID_ARGUMENT', `a ${typeof v} cannot be encoded as a value`);
    }
  }

  row(row: Row): void {
    if (!Array.isArray(row)) throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'a row must be an array of values');
    this.varint(row.length);
    for (let i = 0; i < row.length; i++) this.value(row[i]);
  }
}

function bad(message: string): ProtocolError {
  return protoError('PROTO_ERR_BAD_PAYLOAD', message);
}

/** Reads a payload; every read is bounds-checked and fails with PROTO_ERR_BAD_PAYLOAD. */
export class ByteReader {
  pos: number;
  #view: DataView | null = null;

  constructor(
    readonly buf: Buffer,
    start = 0,
    readonly end = buf.length,
  ) {
    this.pos = start;
  }

  get remaining(): number {
    return this.end - this.pos;
  }

  need(n: number, what: string): void {
    if (n > this.end - this.pos) throw bad(`${what}: needs ${n} bytes, ${this.end - this.pos} left`);
  }

  u8(what = 'byte'): number {
    this.need(1, what);
    return this.buf[this.pos++] as number;
  }

  varint(what = 'length'): number {
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 5; i++) {
      if (this.pos >= this.end) throw bad(`${what}: truncated varint`);
      const b = this.buf[this.pos++] as number;
      result += (b & 0x7f) * mul;
      if (b < 0x80) {
        if (result > 0xffff_ffff) throw bad(`${what}: varint above 2^32-1`);
        return result;
      }
      mul *= 0x80;
    }
    throw bad(`${what}: varint longer than 5 bytes`);
  }

  string(what = 'string'): string {
    const n = this.varint(what);
    this.need(n, what);
    const s = this.pos;
    this.pos += n;
    // lenient: invalid sequences become U+FFFD (row text passes through; control payloads use strictString)
    return this.buf.toString('utf8', s, s + n);
  }

  /** UTF-8 text that must be valid (JSON and control payloads) */
  strictString(what = 'text'): string {
    const n = this.varint(what);
    this.need(n, what);
    const s = this.pos;
    this.pos += n;
    try {
      return fatalUtf8.decode(this.buf.subarray(s, s + n));
    } catch {
      throw bad(`${what}: invalid UTF-8`);
    }
  }

  value(): Value {
    const tag = this.u8('value tag');
    switch (tag) {
      case ValueTag.NULL:
        return null;
      case ValueTag.FALSE:
        return false;
      case ValueTag.TRUE:
        return true;
      case ValueTag.INT32: {
        this.need(4, 'int32');
        const v = this.buf.readInt32BE(this.pos);
        this.pos += 4;
        return v;
      }
      case ValueTag.FLOAT64: {
        this.need(8, 'float64');
        const v = this.buf.readDoubleBE(this.pos);
        this.pos += 8;
        return v;
      }
      case ValueTag.STRING:
        return this.string();
      case ValueTag.BYTES: {
        const n = this.varint('bytes');
        this.need(n, 'bytes');
        // a copy, so a kept value never pins the whole frame in memory
        const v = Buffer.from(this.buf.subarray(this.pos, this.pos + n));
        this.pos += n;
        return v;
      }
      case ValueTag.BIGINT: {
        this.need(8, 'bigint');
        this.#view ??= new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
        const v = this.#view.getBigInt64(this.pos);
        this.pos += 8;
        return v;
      }
      case ValueTag.BIGINT_TEXT: {
        const s = this.string('bigint');
        if (!/^-?\d{1,4096}$/.test(s)) throw bad('bigint: not a decimal integer');
        return BigInt(s);
      }
      case ValueTag.DATE: {
        this.need(8, 'date');
        const v = this.buf.readDoubleBE(this.pos);
        this.pos += 8;
        return new Date(v);
      }
      case ValueTag.JSON: {
        const text = this.strictString('json');
        try {
          return JSON.parse(text) as JsonValue as Value;
        } catch {
          throw bad('json value: not valid JSON');
        }
      }
      default:
        throw bad(`unknown value tag 0x${tag.toString(16)}`);
    }
  }

  row(): Row {
    const n = this.varint('cell count');
    // every cell takes at least one byte: never trust a count the payload cannot hold
    if (n > this.remaining) throw bad(`row claims ${n} cells, payload has ${this.remaining} bytes left`);
    const row: Row = new Array<Value>(n);
    for (let i = 0; i < n; i++) row[i] = this.value();
    return row;
  }
}
