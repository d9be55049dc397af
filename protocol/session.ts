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
 * The session owns what is session-wide: HELLO, the session windows (flow-control.ts,
 * send-queue.ts), liveness and floods (keepalive.ts), drain and close. Stream frames go to the
 * stream table (streams.ts), which hands them to each stream's read or write half
 * (stream-read.ts, stream-write.ts); each half keeps its own state and window.
 */
import { realClock, type Clock, type TimerHandle } from './clock.js';
import { FrameDecoder, encodeFrame } from './codec.js';
import { CloseCode, ProtocolError, closeCodeFor, isProtoErrorCode, protoError } from './errors.js';
import { RecvWindow, largestDataFrame } from './flow-control.js';
import type { DecodedFrame, Frame, GoawayInfo, Hello, QueryOpen, Role } from './frames.js';
import { FloodLimit, Keepalive } from './keepalive.js';
import { SendQueue } from './send-queue.js';
import { helloFor, negotiate, resolveOptions, type Negotiated, type ResolvedOptions, type SessionOptions } from './session-options.js';
import type { QueryStream } from './stream-read.js';
import { quiet } from './stream-write.js';
import { Streams, errorMessageOf, type StreamHandler } from './streams.js';
import type { Transport } from './transport.js';

export type { Negotiated, SessionOptions } from './session-options.js';
export { QueryStream, type StreamEvent, type StreamResult } from './stream-read.js';
export { IncomingQuery } from './stream-write.js';
export type { StreamHandler } from './streams.js';

export interface SessionCloseInfo {
  code: number;
  reason: string;
  /** null for a graceful close or drain */
  error: ProtocolError | null;
}

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

type State = 'hello' | 'open' | 'closed';

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
  readonly #streams: Streams;
  /** what the peer may still send over all streams */
  readonly #recv: RecvWindow;
  /** what this side may still send over all streams, and the frames waiting for it */
  readonly #out: SendQueue;

  // timers and limits
  #helloTimer: TimerHandle | null = null;
  readonly #keepalive: Keepalive;
  readonly #flood: FloodLimit;

  // drain
  #draining = false;
  #peerGoaway: GoawayInfo | null = null;
  readonly #drainWaiters: (() => void)[] = [];
  #drainTimer: TimerHandle | null = null;

  constructor(transport: Transport, options: SessionOptions) {
    this.#o = resolveOptions(options);
    this.role = this.#o.role;
    this.#t = transport;
    this.#clock = options.clock ?? realClock;
    this.#decoder = new FrameDecoder({ maxFrameSize: this.#o.maxFrameSize });
    this.#recv = new RecvWindow(this.#o.sessionWindow, largestDataFrame(this.#o));
    this.#out = new SendQueue(this.#o.maxQueuedBytes, (bytes) => this.#send(bytes));
    this.#flood = new FloodLimit(this.#clock, this.#o.maxControlFrames, this.#o.floodWindowMs);
    this.#keepalive = new Keepalive({
      clock: this.#clock,
      intervalMs: this.#o.pingIntervalMs,
      maxMissedPongs: this.#o.maxMissedPongs,
      sendPing: (data) => this.#sendFrame({ type: 'PING', streamId: 0, data }),
      onDead: (err) => this.#fail(err, true),
    });
    this.#streams = new Streams(this.role, {
      options: this.#o,
      clock: this.#clock,
      recv: this.#recv,
      out: this.#out,
      flood: this.#flood,
      isOpen: () => this.#state === 'open',
      send: (bytes) => this.#send(bytes),
      removed: () => this.#checkDrained(),
    });
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
    this.#streams.handler = handler;
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
    return this.#streams.open(open);
  }

  /**
   * Graceful drain: sends GOAWAY (the peer opens nothing new; streams it opened above the
   * last one seen here are refused with PROTO_ERR_GOAWAY), lets the open streams finish, then
   * closes with 1000. With `timeoutMs`, closes anyway when it runs out. `code` tells the peer why
   * (default PROTO_ERR_GOAWAY).
   */
  drain(opts: { timeoutMs?: number; message?: string; code?: string } = {}): Promise<void> {
    if (this.#state === 'closed') return Promise.resolve();
    if (this.#state === 'hello') {
      this.close();
      return Promise.resolve();
    }
    const p = new Promise<void>((resolve) => this.#drainWaiters.push(resolve));
    if (!this.#draining) {
      this.#draining = true;
      const goaway: GoawayInfo = { lastStreamId: this.#streams.stopAccepting(), code: (opts.code ?? 'PROTO_ERR_GOAWAY').slice(0, 128) };
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
        return this.#streams.onFrame(f);
      case 'CREDIT':
        if (f.streamId === 0) {
          this.#flood.count();
          this.#out.grant(f.increment);
          return;
        }
        return this.#streams.onFrame(f);
      default:
        return this.#streams.onFrame(f);
    }
  }

  #onHello(h: Hello): void {
    this.#negotiated = negotiate(this.#o, h);
    this.#streams.start(h);
    this.#out.open(h.sessionWindow);
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
    this.#streams.peerGoaway(g.lastStreamId);
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
    this.#out.close();
    this.#streams.closeAll(streamError);
    this.#rejectReady(streamError);
    for (const w of this.#drainWaiters.splice(0)) w();
    this.#resolveClosed(info);
    for (const cb of this.#closeListeners.splice(0)) cb(info);
  }
}
