/**
 * Credit windows (protocol/README.md, "Flow control"). Pure arithmetic: no frames, no I/O. The
 * session keeps one pair for itself; each stream keeps the window of its own direction (a read
 * half a `RecvWindow`, a write half a `SendWindow`), as hashicorp/yamux keeps window updates
 * inside its stream.
 */
import { protoError } from './errors.js';
import { HEADER_SIZE } from './frames.js';

/**
 * The largest flow-controlled frame (header included) a side accepts, given what it advertised in
 * HELLO: its maxFrameSize, and never more than half of either of its windows.
 */
export function largestDataFrame(h: { maxFrameSize: number; streamWindow: number; sessionWindow: number }): number {
  return Math.min(h.maxFrameSize + HEADER_SIZE, Math.floor(h.streamWindow / 2), Math.floor(h.sessionWindow / 2));
}

/**
 * What this side may still send: the peer advertised `limit` in HELLO, sends deduct their cost,
 * CREDIT frames give it back. A grant may never raise the window above `limit`.
 */
export class SendWindow {
  readonly limit: number;
  #available: number;

  constructor(limit: number) {
    this.limit = limit;
    this.#available = limit;
  }

  /** bytes that may be sent now */
  get available(): number {
    return this.#available;
  }

  fits(cost: number): boolean {
    return cost <= this.#available;
  }

  /** deducts a frame's cost; the caller checked `fits` */
  consume(cost: number): void {
    this.#available -= cost;
  }

  /**
   * Applies a CREDIT increment. Zero, or one that raises the window above the advertised size,
   * throws PROTO_ERR_WINDOW_OVERFLOW; `what` names the window in the message ("session", "stream 3").
   */
  grant(increment: number, what: string): void {
    if (increment === 0) throw protoError('PROTO_ERR_WINDOW_OVERFLOW', `zero ${what} credit increment`);
    const next = this.#available + increment;
    if (next > this.limit) throw protoError('PROTO_ERR_WINDOW_OVERFLOW', `${what} credit of ${increment} raises the window to ${next}, above the advertised ${this.limit}`);
    this.#available = next;
  }
}

/**
 * What the peer may still send to this side (`size`, advertised in HELLO). Received frames are
 * charged; bytes the application has read are released, and credit goes back in batches: once a
 * quarter of the window is owed, or at once when what is left drops below `bound` (the sender may
 * then lack room for its next frame: pass `largestDataFrame` of this side's HELLO).
 */
export class RecvWindow {
  readonly size: number;
  readonly #bound: number;
  readonly #batch: number;
  #available: number;
  #unreturned = 0;

  constructor(size: number, bound: number) {
    this.size = size;
    this.#bound = bound;
    this.#batch = size / 4;
    this.#available = size;
  }

  /** credit the peer still has */
  get available(): number {
    return this.#available;
  }

  /** bytes read by the application whose credit has not been sent back yet */
  get unreturned(): number {
    return this.#unreturned;
  }

  /** bytes received and not yet read past (held in buffers) */
  get buffered(): number {
    return this.size - this.#available - this.#unreturned;
  }

  fits(cost: number): boolean {
    return cost <= this.#available;
  }

  /** deducts a received frame's cost; the caller checked `fits` */
  charge(cost: number): void {
    this.#available -= cost;
  }

  /** `cost` bytes were read: returns the increment to send back in a CREDIT now, or 0 to keep batching */
  release(cost: number): number {
    this.#unreturned += cost;
    if (this.#unreturned < this.#batch && this.#available >= this.#bound) return 0;
    const inc = this.#unreturned;
    this.#unreturned = 0;
    this.#available += inc;
    return inc;
  }
}

/**
 * Charges a received flow-controlled frame to its stream's window and the session's: either one
 * too small throws PROTO_ERR_WINDOW_EXCEEDED (the stream's is checked first), and then neither is charged.
 */
export function chargeReceived(stream: RecvWindow, session: RecvWindow, cost: number, streamId: number): void {
  if (!stream.fits(cost)) throw protoError('PROTO_ERR_WINDOW_EXCEEDED', `${cost} bytes on stream ${streamId} with ${stream.available} bytes of credit`);
  if (!session.fits(cost)) throw protoError('PROTO_ERR_WINDOW_EXCEEDED', `${cost} bytes with ${session.available} bytes of session credit`);
  stream.charge(cost);
  session.charge(cost);
}
