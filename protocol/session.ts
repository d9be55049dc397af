/**
 * The tunnel session over a `Transport`: HELLO negotiation, stream multiplexing, credit-based
 * flow control (per stream and per session), cancellation, ping-based dead-peer detection,
 * flood limits and graceful drain (GOAWAY). Rules in protocol/README.md.
 *
 * The opener of a stream calls `openStream(open)` and reads a `QueryStream` (async iterable of
 * columns / rows / end). The other side gets an `IncomingQuery` in its `onStream` handler and
 * writes columns, rows and end to it; every write waits for credit, and credit comes back only
 * when the opener's application has read what was sent.
 *
 * The session routes frames and owns what is session-wide (the stream table, the session
 * windows, liveness, drain). Each stream keeps its own state and window (stream-read.ts,
 * stream-write.ts); the session reaches them only through their methods.
 */
import { realClock, type Clock, type TimerHandle } from './clock.js';
import { FrameDecoder, encodeFrame, encodeRowsFrames } from './codec.js';
import { CloseCode, ProtocolError, closeCodeFor, isProtoErrorCode, protoError, type ProtoErrorCode } from './errors.js';
import { RecvWindow } from './flow-control.js';
import { HEADER_SIZE, MAX_STREAM_ID, type DecodedFrame, type Frame, type GoawayInfo, type Hello, type QueryOpen, type Role, type Row } from './frames.js';
import { FloodLimit, Keepalive } from './keepalive.js';
import { SendQueue } from './send-queue.js';
import { helloFor, negotiate, resolveOptions, type Negotiated, type ResolvedOptions, type SessionOptions } from './session-options.js';
import { QueryStream, type ReadHost } from './stream-read.js';
import { IncomingQuery, quiet, type WriteHost } from './stream-write.js';
import type { Transport } from './transport.js';

export type { Negotiated, SessionOptions } from './session-options.js';
export { QueryStream, type StreamEvent, type StreamResult } from './stream-read.js';
export { IncomingQuery } from './stream-write.js';

export interface SessionCloseInfo {
  code: number;
  reason: string;
  /** null for a graceful close or drain */
  error: ProtocolError | null;
}

export type StreamHandler = (query: IncomingQuery) => void | Promise<void>;

export interface SessionStats {
  state: 'hello' | 'open' | 'closed';
  streams: number;
  /** flow-controlled bytes received and not yet read past by the application (memory held in stream buffers) */
  bufferedBytes: number;
  /** bytes read by the application whose session credit has not been sent back yet (batched) */
  unreturnedBytes: number;
  /** encoded bytes waiting for credit on this side */
  queuedBytes: number;
  sendWindow: number;
  recvWindow: number;
  rttMs: number | null;
  draining: boolean;
  peerDraining: boolean;
}

function errorCodeOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.length > 0 && code.length <= 128 ? code : 'PROTO_ERR_HANDLER';
}

function errorMessageOf(err: unknown): string {
  const m = (err as { message?: unknown } | null)?.message;
  return typeof m === 'string' ? m.slice(0, 4096) : String(err).slice(0, 4096);
}

type State = 'hello' | 'open' | 'closed';

/** the frames the acceptor sends on a stream this side opened */
type ReadFrame = Extract<DecodedFrame, { type: 'COLUMNS' | 'ROWS' | 'END' | 'ERROR' }>;

export class Session {
  readonly role: Role;
  /** resolves with the negotiated version and features; rejects if the session fails first */
  readonly ready: Promise<Negotiated>;
  /** resolves when the session is closed, however that happened (never rejects) */
  readonly closed: Promise<SessionCloseInfo>;
  readonly #t: Transport;
  readonly #o: ResolvedOptions;
  readonly #clock: Clock;
  readonly #decoder: FrameDecoder;
  #state: State = 'hello';
  #negotiated: Negotiated | null = null;
  #resolveReady!: (n: Negotiated) => void;
  #rejectReady!: (e: unknown) => void;
  #resolveClosed!: (i: SessionCloseInfo) => void;
  #closeInfo: SessionCloseInfo | null = null;
  readonly #closeListeners: ((info: SessionCloseInfo) => void)[] = [];
  readonly #goawayListeners: ((g: GoawayInfo) => void)[] = [];
  #handler: StreamHandler | null = null;

  // streams
  readonly #streams = new Map<number, QueryStream | IncomingQuery>();
  readonly #readHost: ReadHost;
  readonly #writeHost: WriteHost;
  #nextLocalId: number;
  #lastPeerId = 0;
  #localOpen = 0;
  #peerOpen = 0;

  // flow control: receiving (what the peer may send over all streams)
  readonly #recv: RecvWindow;
  /** below this much credit left, a window's credit goes back at once (the sender may lack room for its next frame) */
  readonly #creditBound: number;
  // flow control: sending
  readonly #out: SendQueue;
  #peerStreamWindow = 0;
  #maxDataWire = 0;

  // timers and limits
  #helloTimer: TimerHandle | null = null;
  readonly #keepalive: Keepalive;
  readonly #flood: FloodLimit;

  // drain
  #draining = false;
  #goawayLastId = 0;
  #peerGoaway: GoawayInfo | null = null;
  readonly #drainWaiters: (() => void)[] = [];
  #drainTimer: TimerHandle | null = null;

  constructor(transport: Transport, options: SessionOptions) {
    this.#o = resolveOptions(options);
    this.role = this.#o.role;
    this.#t = transport;
    this.#clock = options.clock ?? realClock;
    this.#decoder = new FrameDecoder({ maxFrameSize: this.#o.maxFrameSize });
    this.#nextLocalId = this.role === 'server' ? 1 : 2;
    this.#creditBound = Math.min(this.#o.maxFrameSize + HEADER_SIZE, Math.floor(this.#o.streamWindow / 2), Math.floor(this.#o.sessionWindow / 2));
    this.#recv = new RecvWindow(this.#o.sessionWindow, this.#creditBound);
    this.#out = new SendQueue(this.#o.maxQueuedBytes, (bytes) => this.#send(bytes));
    this.#flood = new FloodLimit(this.#clock, this.#o.maxControlFrames, this.#o.floodWindowMs);
    this.#keepalive = new Keepalive({
      clock: this.#clock,
      intervalMs: this.#o.pingIntervalMs,
      maxMissedPongs: this.#o.maxMissedPongs,
      sendPing: (data) => this.#sendFrame({ type: 'PING', streamId: 0, data }),
      onDead: (err) => this.#fail(err, true),
    });
    this.#readHost = {
      released: (s, cost) => this.#released(s, cost),
      sendCancel: (s, reason) => {
        if (this.#state !== 'open') return;
        this.#sendFrame(reason === undefined ? { type: 'CANCEL', streamId: s.id } : { type: 'CANCEL', streamId: s.id, reason: reason.slice(0, 4096) });
      },
    };
    this.#writeHost = {
      encodeData: (frame) => this.#encodeData(frame),
      encodeRows: (streamId, rows) => this.#encodeRows(streamId, rows),
      refuseQueued: (bytes) => this.#out.refuse(bytes),
      queued: (q, bytes) => this.#out.queued(q, bytes),
      dropped: (q, bytes) => this.#out.dropped(q, bytes),
      sendError: (q, error) => {
        if (this.#state === 'open') this.#sendFrame({ type: 'ERROR', streamId: q.id, error });
      },
      closed: (q) => this.#unregister(q),
    };
    this.ready = quiet(
      new Promise<Negotiated>((resolve, reject) => {
        this.#resolveReady = resolve;
        this.#rejectReady = reject;
      }),
    );
    this.closed = new Promise<SessionCloseInfo>((resolve) => {
      this.#resolveClosed = resolve;
    });
    transport.onMessage((bytes) => this.#onMessage(bytes));
    transport.onClose((code, reason) => this.#onTransportClose(code, reason));
    this.#helloTimer = this.#clock.setTimeout(() => {
      this.#helloTimer = null;
      if (this.#state === 'hello') this.#fail(protoError('PROTO_ERR_HELLO_TIMEOUT', `no HELLO from the peer within ${this.#o.helloTimeoutMs} ms`), true);
    }, this.#o.helloTimeoutMs);
    this.#send(encodeFrame({ type: 'HELLO', streamId: 0, hello: helloFor(this.#o) }));
  }

  get state(): State {
    return this.#state;
  }

  get negotiated(): Negotiated | null {
    return this.#negotiated;
  }

  /** the reason the session closed, once it has */
  get closeInfo(): SessionCloseInfo | null {
    return this.#closeInfo;
  }

  /** Registers the handler for streams the peer opens (one handler; a later call replaces it). */
  onStream(handler: StreamHandler): void {
    this.#handler = handler;
  }

  onClose(cb: (info: SessionCloseInfo) => void): void {
    if (this.#closeInfo) queueMicrotask(() => cb(this.#closeInfo as SessionCloseInfo));
    else this.#closeListeners.push(cb);
  }

  /** called when the peer announces a drain: open no new streams here */
  onGoaway(cb: (goaway: GoawayInfo) => void): void {
    this.#goawayListeners.push(cb);
  }

  stats(): SessionStats {
    return {
      state: this.#state,
      streams: this.#streams.size,
      bufferedBytes: this.#recv.buffered,
      unreturnedBytes: this.#recv.unreturned,
      queuedBytes: this.#out.queuedBytes,
      sendWindow: this.#out.window,
      recvWindow: this.#recv.available,
      rttMs: this.#keepalive.rttMs,
      draining: this.#draining,
      peerDraining: this.#peerGoaway !== null,
    };
  }

  /**
   * Opens a stream (sends OPEN). Throws PROTO_ERR_NOT_READY before HELLO completes,
   * PROTO_ERR_GOAWAY when either side is draining, PROTO_ERR_STREAM_LIMIT at the peer's
   * concurrency limit, PROTO_ERR_SESSION_CLOSED after close.
   */
  openStream(open: QueryOpen): QueryStream {
    if (this.#state === 'closed') throw protoError('PROTO_ERR_SESSION_CLOSED');
    if (this.#state !== 'open' || !this.#negotiated) throw protoError('PROTO_ERR_NOT_READY');
    if (this.#draining) throw protoError('PROTO_ERR_GOAWAY', 'this session is draining');
    if (this.#peerGoaway) throw protoError('PROTO_ERR_GOAWAY', 'the peer is draining');
    if (open === null || typeof open !== 'object' || typeof open.statement !== 'string') throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'open.statement must be a string');
    if (this.#localOpen >= this.#negotiated.peer.maxConcurrentStreams) {
      throw protoError('PROTO_ERR_STREAM_LIMIT', `the peer accepts ${this.#negotiated.peer.maxConcurrentStreams} concurrent streams`);
    }
    const id = this.#nextLocalId;
    if (id > MAX_STREAM_ID) throw protoError('PROTO_ERR_STREAM_LIMIT', 'stream ids are exhausted: open a new session');
    const bytes = encodeFrame({ type: 'OPEN', streamId: id, open }, { maxFrameSize: this.#negotiated.peer.maxFrameSize });
    this.#nextLocalId += 2;
    const s = new QueryStream(this.#readHost, id, open, this.#o.streamWindow, this.#creditBound);
    this.#streams.set(id, s);
    this.#localOpen++;
    this.#send(bytes);
    return s;
  }

  /**
   * Graceful drain: sends GOAWAY (the peer opens nothing new; streams it opened above the
   * last one seen here are refused with PROTO_ERR_GOAWAY), lets the open streams finish, then
   * closes with 1000. With `timeoutMs`, closes anyway when it runs out.
   */
  drain(opts: { timeoutMs?: number; message?: string } = {}): Promise<void> {
    if (this.#state === 'closed') return Promise.resolve();
    if (this.#state === 'hello') {
      this.close();
      return Promise.resolve();
    }
    const p = new Promise<void>((resolve) => this.#drainWaiters.push(resolve));
    if (!this.#draining) {
      this.#draining = true;
      this.#goawayLastId = this.#lastPeerId;
      const goaway: GoawayInfo = { lastStreamId: this.#goawayLastId, code: 'PROTO_ERR_GOAWAY' };
      if (opts.message !== undefined) goaway.message = opts.message.slice(0, 4096);
      this.#sendFrame({ type: 'GOAWAY', streamId: 0, goaway });
    }
    if (opts.timeoutMs !== undefined && this.#drainTimer === null) {
      this.#drainTimer = this.#clock.setTimeout(() => {
        this.#drainTimer = null;
        this.close(CloseCode.NORMAL, 'drain timeout');
      }, opts.timeoutMs);
    }
    this.#checkDrained();
    return p;
  }

  /** Closes now: every open stream fails with PROTO_ERR_SESSION_CLOSED. */
  close(code: number = CloseCode.NORMAL, reason = 'closed'): void {
    this.#shutdown({ code, reason, error: null }, protoError('PROTO_ERR_SESSION_CLOSED', `session closed: ${reason}`), false);
  }

  // ------------------------------------------------------------ serving the streams

  #encodeData(frame: Frame): Buffer {
    const bytes = encodeFrame(frame, { maxFrameSize: this.#negotiated?.peer.maxFrameSize ?? 0 });
    if (bytes.length > this.#maxDataWire) throw protoError('PROTO_ERR_FRAME_TOO_LARGE', `${frame.type} frame of ${bytes.length} bytes is larger than half the peer's window`);
    return bytes;
  }

  #encodeRows(streamId: number, rows: Row[]): Buffer[] {
    const max = this.#maxDataWire - HEADER_SIZE;
    return encodeRowsFrames(streamId, rows, { targetPayload: Math.min(this.#o.dataFrameSize, max), maxPayload: max });
  }

  /** the application read past `cost` bytes of stream `s` (or they were dropped): return credit, session-wide and to the stream */
  #released(s: QueryStream, cost: number): void {
    if (this.#state !== 'open') return;
    const inc = this.#recv.release(cost);
    if (inc > 0) this.#sendFrame({ type: 'CREDIT', streamId: 0, increment: inc });
    const streamInc = s.releaseCredit(cost);
    if (streamInc > 0) this.#sendFrame({ type: 'CREDIT', streamId: s.id, increment: streamInc });
  }

  #unregister(s: QueryStream | IncomingQuery): void {
    if (this.#streams.get(s.id) !== s) return;
    this.#streams.delete(s.id);
    if (s instanceof QueryStream) {
      this.#localOpen--;
    } else {
      this.#peerOpen--;
      this.#out.forget(s);
    }
    this.#checkDrained();
  }

  // ------------------------------------------------------------ sending

  #send(bytes: Uint8Array): void {
    if (this.#state === 'closed') return;
    try {
      this.#t.send(bytes);
    } catch (err) {
      const e = protoError('PROTO_ERR_TRANSPORT_CLOSED', `transport refused a send: ${errorMessageOf(err)}`, { cause: err });
      this.#shutdown({ code: CloseCode.PROTOCOL_ERROR, reason: e.code, error: e }, e, false);
    }
  }

  #sendFrame(frame: Frame): void {
    this.#send(encodeFrame(frame));
  }

  // ------------------------------------------------------------ receiving

  #onMessage(bytes: Uint8Array): void {
    if (this.#state === 'closed') return;
    try {
      this.#decoder.write(bytes, (f) => this.#onFrame(f));
    } catch (err) {
      if ((this.#state as State) === 'closed') return;
      const e = err instanceof ProtocolError ? err : protoError('PROTO_ERR_INTERNAL', `unexpected error handling a frame: ${errorMessageOf(err)}`, { cause: err });
      this.#fail(e, true);
    }
  }

  #onFrame(f: DecodedFrame): void {
    if (this.#state === 'closed') return;
    if (this.#state === 'hello') {
      if (f.type !== 'HELLO') {
        if (f.type === 'ERROR' && f.streamId === 0) return this.#remoteFatal(f.error.code, f.error.message);
        throw protoError('PROTO_ERR_BAD_HELLO', `expected HELLO first, got ${f.type}`);
      }
      return this.#onHello(f.hello);
    }
    switch (f.type) {
      case 'HELLO':
        throw protoError('PROTO_ERR_BAD_HELLO', 'HELLO received twice');
      case 'PING':
        this.#flood.count();
        this.#sendFrame({ type: 'PONG', streamId: 0, data: f.data });
        return;
      case 'PONG':
        this.#flood.count();
        this.#keepalive.pong(f.data);
        return;
      case 'GOAWAY':
        this.#flood.count();
        return this.#onGoaway(f.goaway);
      case 'ERROR':
        if (f.streamId === 0) return this.#remoteFatal(f.error.code, f.error.message);
        return this.#onStreamFrame(f);
      case 'CREDIT':
        if (f.streamId === 0) {
          this.#flood.count();
          this.#out.grant(f.increment);
          return;
        }
        return this.#onStreamFrame(f);
      default:
        return this.#onStreamFrame(f);
    }
  }

  #isLocalId(id: number): boolean {
    return (id % 2 === 1) === (this.role === 'server');
  }

  #onStreamFrame(f: DecodedFrame): void {
    const id = f.streamId;
    const local = this.#isLocalId(id);
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
      const s = this.#streams.get(id);
      if (!s) {
        if (id >= this.#nextLocalId) throw protoError('PROTO_ERR_STREAM_ID', `${f.type} on stream ${id}, which was never opened`);
        throw protoError('PROTO_ERR_STREAM_CLOSED', `${f.type} on stream ${id} after its END or ERROR`);
      }
      return this.#onReadFrame(s as QueryStream, f);
    }
    // a stream the peer opened: it sends CANCEL / CREDIT
    if (f.type !== 'CANCEL' && f.type !== 'CREDIT') throw protoError('PROTO_ERR_UNEXPECTED_FRAME', `${f.type} on stream ${id}, which the peer opened`);
    if (id > this.#lastPeerId) throw protoError('PROTO_ERR_STREAM_ID', `${f.type} on stream ${id}, which was never opened`);
    this.#flood.count();
    const q = this.#streams.get(id) as IncomingQuery | undefined;
    // after this side's END or ERROR, a CANCEL or CREDIT may still cross it on the wire
    if (!q) return;
    if (f.type === 'CANCEL') {
      const err = protoError('PROTO_ERR_CANCELLED', f.reason === undefined ? 'cancelled by the peer' : `cancelled by the peer: ${f.reason}`);
      this.#sendFrame({ type: 'ERROR', streamId: id, error: { code: 'PROTO_ERR_CANCELLED', message: err.message } });
      q.abort(err);
      return;
    }
    q.grant(f.increment);
    this.#out.pump();
  }

  #onReadFrame(s: QueryStream, f: ReadFrame): void {
    if (f.type === 'ERROR') {
      this.#unregister(s);
      s.receiveError(f.error);
      return;
    }
    // flow-controlled: charge the windows (and check the order) before anything else
    const cost = HEADER_SIZE + f.payloadLength;
    s.admit(f.type, cost, this.#recv);
    if (f.type === 'ROWS' && f.rows.length === 0) this.#flood.count();
    if (f.type === 'END') this.#unregister(s);
    // a reset stream drops it and returns the credit: charged to the windows, so bounded, and not counted as a control frame
    s.receive(f, cost);
  }

  #accept(id: number, open: QueryOpen): void {
    const refuse = (code: ProtoErrorCode, message: string, retryable?: boolean): void => {
      const error: { code: string; message: string; retryable?: boolean } = { code, message };
      if (retryable !== undefined) error.retryable = retryable;
      // refusals cost this side a frame each: count them against the flood limit
      this.#flood.count();
      this.#sendFrame({ type: 'ERROR', streamId: id, error });
    };
    if (this.#draining && id > this.#goawayLastId) return refuse('PROTO_ERR_GOAWAY', 'session is draining', true);
    if (this.#peerOpen >= this.#o.maxConcurrentStreams) return refuse('PROTO_ERR_STREAM_LIMIT', `at most ${this.#o.maxConcurrentStreams} concurrent streams`, true);
    const handler = this.#handler;
    if (!handler) return refuse('PROTO_ERR_NO_HANDLER', 'no stream handler is registered');
    const q = new IncomingQuery(this.#writeHost, id, open, this.#peerStreamWindow);
    this.#streams.set(id, q);
    this.#peerOpen++;
    if (open.timeoutMs !== undefined) q.startDeadline(this.#clock, open.timeoutMs);
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

  #onHello(h: Hello): void {
    this.#negotiated = negotiate(this.#o, h);
    this.#peerStreamWindow = h.streamWindow;
    this.#out.open(h.sessionWindow);
    this.#maxDataWire = Math.min(h.maxFrameSize + HEADER_SIZE, Math.floor(h.streamWindow / 2), Math.floor(h.sessionWindow / 2));
    this.#state = 'open';
    if (this.#helloTimer !== null) this.#clock.clearTimeout(this.#helloTimer);
    this.#helloTimer = null;
    this.#keepalive.start();
    this.#resolveReady(this.#negotiated);
  }

  #onGoaway(g: GoawayInfo): void {
    if (this.#peerGoaway) {
      // a second GOAWAY may only lower the limit
      if (g.lastStreamId > this.#peerGoaway.lastStreamId) throw protoError('PROTO_ERR_UNEXPECTED_FRAME', 'GOAWAY raised lastStreamId');
    }
    this.#peerGoaway = g;
    // streams this side opened that the peer will not serve: fail them now (retryable), and
    // keep them registered until the peer's refusal arrives
    for (const s of this.#streams.values()) {
      if (s instanceof QueryStream && s.id > g.lastStreamId && !s.finished) {
        s.reset(protoError('PROTO_ERR_GOAWAY', 'the peer is draining and did not accept this stream', { retryable: true }));
      }
    }
    for (const cb of this.#goawayListeners) {
      try {
        cb(g);
      } catch {
        // a listener's failure is not the peer's
      }
    }
  }

  #checkDrained(): void {
    if (!this.#draining || this.#state !== 'open') return;
    if (this.#streams.size > 0) return;
    this.close(CloseCode.NORMAL, 'drained');
  }

  #remoteFatal(code: string, message: string): void {
    const err = new ProtocolError(code, `peer closed the session: ${message}`, { remote: true });
    this.#shutdown({ code: closeCodeFor(code), reason: code, error: err }, err, false);
  }

  #onTransportClose(code: number, reason: string): void {
    if (this.#state === 'closed') return;
    let err: ProtocolError;
    if (isProtoErrorCode(reason) && reason !== 'PROTO_ERR_SESSION_CLOSED') err = new ProtocolError(reason, `peer closed the session (${code} ${reason})`, { remote: true });
    else if (code === CloseCode.NORMAL) err = protoError('PROTO_ERR_SESSION_CLOSED', `peer closed the session: ${reason}`, { remote: true });
    else err = protoError('PROTO_ERR_TRANSPORT_CLOSED', `transport closed (${code} ${reason})`);
    this.#shutdown({ code, reason, error: err.code === 'PROTO_ERR_SESSION_CLOSED' ? null : err }, err, true);
  }

  #fail(err: ProtocolError, notifyPeer: boolean): void {
    if (this.#state === 'closed') return;
    if (notifyPeer && this.#t) {
      try {
        this.#t.send(encodeFrame({ type: 'ERROR', streamId: 0, error: { code: err.code, message: err.message.slice(0, 4096) } }));
      } catch {
        // the transport may already be gone
      }
    }
    this.#shutdown({ code: closeCodeFor(err.code), reason: err.code, error: err }, err, false);
  }

  #shutdown(info: SessionCloseInfo, streamError: ProtocolError, transportGone: boolean): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#closeInfo = info;
    for (const h of [this.#helloTimer, this.#drainTimer]) if (h !== null) this.#clock.clearTimeout(h);
    this.#helloTimer = this.#drainTimer = null;
    this.#keepalive.stop();
    if (!transportGone) {
      try {
        this.#t.close(info.code, info.reason.slice(0, 123));
      } catch {
        // already closed
      }
    }
    const streams = [...this.#streams.values()];
    this.#streams.clear();
    this.#out.close();
    for (const s of streams) {
      if (s instanceof QueryStream) s.sessionClosed(streamError);
      else s.abort(streamError);
    }
    this.#rejectReady(streamError);
    for (const w of this.#drainWaiters.splice(0)) w();
    this.#resolveClosed(info);
    for (const cb of this.#closeListeners.splice(0)) cb(info);
  }
}
