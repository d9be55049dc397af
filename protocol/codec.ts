/**
 * Frame codec: `encodeFrame` (frame → bytes), `encodeRowsFrames` (a batch of rows → ROWS frames
 * of bounded size), both in encode.ts, and `FrameDecoder`, a pure state machine (bytes in any
 * chunking → frames) that checks each header here and decodes each payload with
 * decode-payload.ts. Nothing here touches a socket or a timer.
 */
import { bad, decodePayload } from './decode-payload.js';
import { ProtocolError, protoError } from './errors.js';
import {
  FIXED_PAYLOAD,
  FRAME_TYPE_NAMES,
  FRAME_VERSION,
  HEADER_SIZE,
  MAX_MAX_FRAME_SIZE,
  STREAM_NONZERO_ONLY,
  STREAM_ZERO_ONLY,
  type DecodedFrame,
  type FrameTypeName,
} from './frames.js';

export { decodePayload } from './decode-payload.js';
export { encodeFrame, encodeRowsFrames, type RowsEncodeOptions } from './encode.js';

/** default largest payload the decoder accepts */
export const DEFAULT_MAX_FRAME_SIZE = 1024 * 1024;

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
