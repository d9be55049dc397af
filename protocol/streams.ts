/**
 * The session's streams: the table of open streams, stream ids, concurrency limits, and the
 * routing of stream frames (OPEN; COLUMNS, ROWS, END, ERROR; CANCEL; CREDIT on a stream) to the
 * read and write halves (stream-read.ts, stream-write.ts). Session-wide matters (HELLO, ping,
 * GOAWAY, drain, close) stay in session.ts. Rules in protocol/README.md.
 */
import type { Clock } from './clock.js';
import { encodeFrame, encodeRowsFrames } from './codec.js';
import { protoError, type ProtoErrorCode, type ProtocolError } from './errors.js';
import { largestDataFrame, type RecvWindow } from './flow-control.js';
import { HEADER_SIZE, MAX_STREAM_ID, type DecodedFrame, type Frame, type Hello, type QueryOpen, type Role, type Row } from './frames.js';
import type { FloodLimit } from './keepalive.js';
import type { SendQueue } from './send-queue.js';
import type { ResolvedOptions } from './session-options.js';
import { QueryStream, type ReadHost } from './stream-read.js';
import { IncomingQuery, type WriteHost } from './stream-write.js';

export type StreamHandler = (query: IncomingQuery) => void | Promise<void>;

/** what the stream table uses of its session */
export interface StreamsContext {
  options: ResolvedOptions;
  clock: Clock;
  /** the session's receive window */
  recv: RecvWindow;
  /** the session's send window and queue */
  out: SendQueue;
  flood: FloodLimit;
  /** true while the session is open (after HELLO, before close) */
  isOpen(): boolean;
  send(bytes: Buffer): void;
  /** a stream left the table */
  removed(): void;
}

function errorCodeOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.length > 0 && code.length <= 128 ? code : 'PROTO_ERR_HANDLER';
}

export function errorMessageOf(err: unknown): string {
  const m = (err as { message?: unknown } | null)?.message;
  return typeof m === 'string' ? m.slice(0, 4096) : String(err).slice(0, 4096);
}

/** the frames the acceptor sends on a stream this side opened */
type ReadFrame = Extract<DecodedFrame, { type: 'COLUMNS' | 'ROWS' | 'END' | 'ERROR' }>;

export class Streams {
  /** the handler for streams the peer opens */
  handler: StreamHandler | null = null;
  readonly #c: StreamsContext;
  readonly #map = new Map<number, QueryStream | IncomingQuery>();
  readonly #role: Role;
  readonly #readHost: ReadHost;
  readonly #writeHost: WriteHost;
  /** below this much credit left, a window's credit goes back at once */
  readonly #creditBound: number;
  #nextLocalId: number;
  #lastPeerId = 0;
  #localOpen = 0;
  #peerOpen = 0;
  /** while draining: the peer's streams above this id are refused */
  #refuseAbove: number | null = null;
  // from the peer's HELLO
  #peerMaxFrameSize = 0;
  #peerMaxStreams = 0;
  #peerStreamWindow = 0;
  /** largest data frame on the wire: the peer's maximum, and never more than half of either of its windows */
  #maxDataWire = 0;

  constructor(role: Role, c: StreamsContext) {
    this.#role = role;
    this.#c = c;
    this.#nextLocalId = role === 'server' ? 1 : 2;
    this.#creditBound = largestDataFrame(c.options);
    this.#readHost = {
      released: (s, cost) => this.#released(s, cost),
      sendCancel: (s, reason) => {
        if (!c.isOpen()) return;
        this.#sendFrame(reason === undefined ? { type: 'CANCEL', streamId: s.id } : { type: 'CANCEL', streamId: s.id, reason: reason.slice(0, 4096) });
      },
    };
    this.#writeHost = {
      encodeData: (frame) => this.#encodeData(frame),
      encodeRows: (streamId, rows) => this.#encodeRows(streamId, rows),
      refuseQueued: (bytes) => c.out.refuse(bytes),
      queued: (q, bytes) => c.out.queued(q, bytes),
      dropped: (q, bytes) => c.out.dropped(q, bytes),
      sendError: (q, error) => {
        if (c.isOpen()) this.#sendFrame({ type: 'ERROR', streamId: q.id, error });
      },
      closed: (q) => this.#unregister(q),
    };
  }

  get size(): number {
    return this.#map.size;
  }

  /** the peer's HELLO arrived */
  start(peer: Hello): void {
    this.#peerMaxFrameSize = peer.maxFrameSize;
    this.#peerMaxStreams = peer.maxConcurrentStreams;
    this.#peerStreamWindow = peer.streamWindow;
    this.#maxDataWire = largestDataFrame(peer);
  }

  /** drain: the peer's streams from now on are refused; returns the last id that will be served */
  stopAccepting(): number {
    this.#refuseAbove = this.#lastPeerId;
    return this.#refuseAbove;
  }

  /** opens a stream (sends OPEN); the session checked its own state first */
  open(open: QueryOpen): QueryStream {
    if (open === null || typeof open !== 'object' || typeof open.statement !== 'string') throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'open.statement must be a string');
    if (this.#localOpen >= this.#peerMaxStreams) {
      throw protoError('PROTO_ERR_STREAM_LIMIT', `the peer accepts ${this.#peerMaxStreams} concurrent streams`);
    }
    const id = this.#nextLocalId;
    if (id > MAX_STREAM_ID) throw protoError('PROTO_ERR_STREAM_LIMIT', 'stream ids are exhausted: open a new session');
    const bytes = encodeFrame({ type: 'OPEN', streamId: id, open }, { maxFrameSize: this.#peerMaxFrameSize });
    this.#nextLocalId += 2;
    const s = new QueryStream(this.#readHost, id, open, this.#c.options.streamWindow, this.#creditBound);
    this.#map.set(id, s);
    this.#localOpen++;
    this.#c.send(bytes);
    return s;
  }

  /**
   * The peer is draining: streams this side opened above `lastStreamId` will not be served.
   * They fail now (retryable) and stay registered until the peer's refusal arrives.
   */
  peerGoaway(lastStreamId: number): void {
    for (const s of this.#map.values()) {
      if (s instanceof QueryStream && s.id > lastStreamId && !s.finished) {
        s._reset(protoError('PROTO_ERR_GOAWAY', 'the peer is draining and did not accept this stream', { retryable: true }));
      }
    }
  }

  /** the session closed: every stream fails with `err` */
  closeAll(err: ProtocolError): void {
    const streams = [...this.#map.values()];
    this.#map.clear();
    for (const s of streams) {
      if (s instanceof QueryStream) s._sessionClosed(err);
      else s._abort(err);
    }
  }

  /** a frame on a stream other than 0; throws a session error when the peer broke the rules */
  onFrame(f: DecodedFrame): void {
    const id = f.streamId;
    const local = (id % 2 === 1) === (this.#role === 'server');
    if (f.type === 'OPEN') {
      if (local) throw protoError('PROTO_ERR_STREAM_ID', `OPEN with stream id ${id}, which has this side's parity`);
      if (id <= this.#lastPeerId) throw protoError('PROTO_ERR_STREAM_ID', `OPEN with stream id ${id}, not above the last one (${this.#lastPeerId}): reused or out of order`);
      this.#lastPeerId = id;
      return this.#accept(id, f.open);
    }
    if (local) {
      // a stream this side opened: the peer sends COLUMNS / ROWS / END / ERROR
      if (f.type !== 'COLUMNS' && f.type !== 'ROWS' && f.type !== 'END' && f.type !== 'ERROR') {
        throw protoError('PROTO_ERR_UNEXPECTED_FRAME', `${f.type} on stream ${id}, which this side opened`);
      }
      const s = this.#map.get(id);
      if (!s) {
        if (id >= this.#nextLocalId) throw protoError('PROTO_ERR_STREAM_ID', `${f.type} on stream ${id}, which was never opened`);
        throw protoError('PROTO_ERR_STREAM_CLOSED', `${f.type} on stream ${id} after its END or ERROR`);
      }
      return this.#onReadFrame(s as QueryStream, f);
    }
    // a stream the peer opened: it sends CANCEL / CREDIT
    if (f.type !== 'CANCEL' && f.type !== 'CREDIT') throw protoError('PROTO_ERR_UNEXPECTED_FRAME', `${f.type} on stream ${id}, which the peer opened`);
    if (id > this.#lastPeerId) throw protoError('PROTO_ERR_STREAM_ID', `${f.type} on stream ${id}, which was never opened`);
    this.#c.flood.count();
    const q = this.#map.get(id) as IncomingQuery | undefined;
    // after this side's END or ERROR, a CANCEL or CREDIT may still cross it on the wire
    if (!q) return;
    if (f.type === 'CANCEL') {
      const err = protoError('PROTO_ERR_CANCELLED', f.reason === undefined ? 'cancelled by the peer' : `cancelled by the peer: ${f.reason}`);
      this.#sendFrame({ type: 'ERROR', streamId: id, error: { code: 'PROTO_ERR_CANCELLED', message: err.message } });
      q._abort(err);
      return;
    }
    q._grant(f.increment);
    this.#c.out.pump();
  }

  // ------------------------------------------------------------ internals

  #sendFrame(frame: Frame): void {
    this.#c.send(encodeFrame(frame));
  }

  #onReadFrame(s: QueryStream, f: ReadFrame): void {
    if (f.type === 'ERROR') {
      this.#unregister(s);
      s._receiveError(f.error);
      return;
    }
    // flow-controlled: charge the windows (and check the order) before anything else
    const cost = HEADER_SIZE + f.payloadLength;
    s._admit(f.type, cost, this.#c.recv);
    if (f.type === 'ROWS' && f.rows.length === 0) this.#c.flood.count();
    if (f.type === 'END') this.#unregister(s);
    // a reset stream drops it and returns the credit: charged to the windows, so bounded, and not counted as a control frame
    s._receive(f, cost);
  }

  #accept(id: number, open: QueryOpen): void {
    const refuse = (code: ProtoErrorCode, message: string, retryable?: boolean): void => {
      const error: { code: string; message: string; retryable?: boolean } = { code, message };
      if (retryable !== undefined) error.retryable = retryable;
      // refusals cost this side a frame each: count them against the flood limit
      this.#c.flood.count();
      this.#sendFrame({ type: 'ERROR', streamId: id, error });
    };
    if (this.#refuseAbove !== null && id > this.#refuseAbove) return refuse('PROTO_ERR_GOAWAY', 'session is draining', true);
    const max = this.#c.options.maxConcurrentStreams;
    if (this.#peerOpen >= max) return refuse('PROTO_ERR_STREAM_LIMIT', `at most ${max} concurrent streams`, true);
    const handler = this.handler;
    if (!handler) return refuse('PROTO_ERR_NO_HANDLER', 'no stream handler is registered');
    const q = new IncomingQuery(this.#writeHost, id, open, this.#peerStreamWindow);
    this.#map.set(id, q);
    this.#peerOpen++;
    if (open.timeoutMs !== undefined) q._startDeadline(this.#c.clock, open.timeoutMs);
    const onError = (err: unknown): void => {
      q.fail(errorCodeOf(err), errorMessageOf(err));
    };
    try {
      const r = handler(q);
      if (r && typeof (r as Promise<void>).then === 'function') {
        (r as Promise<void>).then(() => {
          if (q.isOpen) q.fail('PROTO_ERR_HANDLER', 'stream handler returned without ending the stream');
        }, onError);
      }
    } catch (err) {
      onError(err);
    }
  }

  #encodeData(frame: Frame): Buffer {
    const bytes = encodeFrame(frame, { maxFrameSize: this.#peerMaxFrameSize });
    if (bytes.length > this.#maxDataWire) throw protoError('PROTO_ERR_FRAME_TOO_LARGE', `${frame.type} frame of ${bytes.length} bytes is larger than half the peer's window`);
    return bytes;
  }

  #encodeRows(streamId: number, rows: Row[]): Buffer[] {
    const max = this.#maxDataWire - HEADER_SIZE;
    return encodeRowsFrames(streamId, rows, { targetPayload: Math.min(this.#c.options.dataFrameSize, max), maxPayload: max });
  }

  /** the application read past `cost` bytes of stream `s` (or they were dropped): return credit, session-wide and to the stream */
  #released(s: QueryStream, cost: number): void {
    if (!this.#c.isOpen()) return;
    const inc = this.#c.recv.release(cost);
    if (inc > 0) this.#sendFrame({ type: 'CREDIT', streamId: 0, increment: inc });
    const streamInc = s._releaseCredit(cost);
    if (streamInc > 0) this.#sendFrame({ type: 'CREDIT', streamId: s.id, increment: streamInc });
  }

  #unregister(s: QueryStream | IncomingQuery): void {
    if (this.#map.get(s.id) !== s) return;
    this.#map.delete(s.id);
    if (s instanceof QueryStream) {
      this.#localOpen--;
    } else {
      this.#peerOpen--;
      this.#c.out.forget(s);
    }
    this.#c.removed();
  }
}
