/**
 * The tunnel session over a `Transport`: HELLO negotiation, stream multiplexing, credit-based
 * flow control (per stream and per session), cancellation, ping-based dead-peer detection,
 * flood limits and graceful drain (GOAWAY). Rules in protocol/README.md.
 *
 * The opener of a stream calls `openStream(open)` and reads a `QueryStream` (async iterable of
 * columns / rows / end). The other side gets an `IncomingQuery` in its `onStream` handler and
 * writes columns, rows and end to it; every write waits for credit, and credit comes back only
 * when the opener's application has read what was sent.
 */
import { realClock, type Clock, type TimerHandle } from './clock.js';
import { DEFAULT_MAX_FRAME_SIZE, FrameDecoder, encodeFrame, encodeRowsFrames } from './codec.js';
import { CloseCode, ProtocolError, closeCodeFor, isProtoErrorCode, protoError, type ProtoErrorCode } from './errors.js';
import {
  HEADER_SIZE,
  MAX_MAX_FRAME_SIZE,
  MAX_STREAM_ID,
  MAX_WINDOW,
  MIN_MAX_FRAME_SIZE,
  SUPPORTED_VERSIONS,
  type Column,
  type DecodedFrame,
  type EndInfo,
  type Frame,
  type GoawayInfo,
  type Hello,
  type JsonValue,
  type QueryOpen,
  type Role,
  type Row,
} from './frames.js';
import type { Transport } from './transport.js';

export interface SessionOptions {
  /** `server` (the control plane) opens odd stream ids, `client` (the relay) even ones */
  role: Role;
  /** protocol versions offered in HELLO (default [1]) */
  versions?: number[];
  /** features offered in HELLO; the session uses the intersection */
  features?: string[];
  /** software identification sent in HELLO */
  agent?: string;
  /** largest payload this side accepts (default 1 MiB) */
  maxFrameSize?: number;
  /** bytes this side buffers per stream before the sender must wait (default 1 MiB) */
  streamWindow?: number;
  /** bytes this side buffers over all streams (default 16 MiB) */
  sessionWindow?: number;
  /** streams the peer may have open towards this side at once (default 256) */
  maxConcurrentStreams?: number;
  /** target payload size of ROWS frames this side sends (default 64 KiB) */
  dataFrameSize?: number;
  /** bytes this side queues waiting for credit before sends fail with PROTO_ERR_QUEUE_FULL (default 16 MiB) */
  maxQueuedBytes?: number;
  /** the peer must complete HELLO within this (default 10 000 ms) */
  helloTimeoutMs?: number;
  /** ping interval; 0 disables pings (default 15 000 ms) */
  pingIntervalMs?: number;
  /** intervals without a pong before the peer is declared dead (default 2) */
  maxMissedPongs?: number;
  /** control frames (PING, PONG, CREDIT, CANCEL, GOAWAY, empty ROWS, frames for cancelled streams) allowed per flood window (default 10 000) */
  maxControlFrames?: number;
  /** the flood window (default 1000 ms) */
  floodWindowMs?: number;
  /** injectable time source (default: the real clock) */
  clock?: Clock;
}

export interface Negotiated {
  version: number;
  features: string[];
  peer: Hello;
}

export interface SessionCloseInfo {
  code: number;
  reason: string;
  /** null for a graceful close or drain */
  error: ProtocolError | null;
}

export type StreamEvent =
  | { type: 'columns'; columns: Column[] }
  | { type: 'rows'; rows: Row[] }
  | { type: 'end'; end: EndInfo };

export interface StreamResult {
  columns: Column[];
  rows: Row[];
  end: EndInfo;
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

function positiveInt(name: string, v: number | undefined, def: number, min: number, max: number): number {
  const x = v ?? def;
  if (!Number.isInteger(x) || x < min || x > max) throw protoError('PROTO_ERR_INVALID_ARGUMENT', `${name} must be an integer in ${min}..${max}, got ${String(v)}`);
  return x;
}

interface Resolved {
  role: Role;
  versions: number[];
  features: string[];
  agent: string | undefined;
  maxFrameSize: number;
  streamWindow: number;
  sessionWindow: number;
  maxConcurrentStreams: number;
  dataFrameSize: number;
  maxQueuedBytes: number;
  helloTimeoutMs: number;
  pingIntervalMs: number;
  maxMissedPongs: number;
  maxControlFrames: number;
  floodWindowMs: number;
}

function resolveOptions(o: SessionOptions): Resolved {
  if (o.role !== 'client' && o.role !== 'server') throw protoError('PROTO_ERR_INVALID_ARGUMENT', `role must be "client" or "server", got ${String(o.role)}`);
  const versions = o.versions ?? [...SUPPORTED_VERSIONS];
  if (!Array.isArray(versions) || versions.length === 0 || versions.length > 16 || !versions.every((v) => Number.isInteger(v) && v >= 1 && v <= 255)) {
    throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'versions must be 1..16 integers in 1..255');
  }
  const features = o.features ?? [];
  if (!Array.isArray(features) || features.length > 64 || !features.every((f) => typeof f === 'string' && f.length <= 64)) {
    throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'features must be at most 64 strings of at most 64 characters');
  }
  if (o.agent !== undefined && (typeof o.agent !== 'string' || o.agent.length > 256)) throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'agent must be a string of at most 256 characters');
  const streamWindow = positiveInt('streamWindow', o.streamWindow, 1024 * 1024, 1024, MAX_WINDOW);
  return {
    role: o.role,
    versions,
    features,
    agent: o.agent,
    maxFrameSize: positiveInt('maxFrameSize', o.maxFrameSize, DEFAULT_MAX_FRAME_SIZE, MIN_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE),
    streamWindow,
    sessionWindow: positiveInt('sessionWindow', o.sessionWindow, Math.max(16 * 1024 * 1024, streamWindow), 1024, MAX_WINDOW),
    maxConcurrentStreams: positiveInt('maxConcurrentStreams', o.maxConcurrentStreams, 256, 0, 0x7fff_ffff),
    dataFrameSize: positiveInt('dataFrameSize', o.dataFrameSize, 64 * 1024, 64, MAX_MAX_FRAME_SIZE),
    maxQueuedBytes: positiveInt('maxQueuedBytes', o.maxQueuedBytes, 16 * 1024 * 1024, 0, Number.MAX_SAFE_INTEGER),
    helloTimeoutMs: positiveInt('helloTimeoutMs', o.helloTimeoutMs, 10_000, 1, 0x7fff_ffff),
    pingIntervalMs: positiveInt('pingIntervalMs', o.pingIntervalMs, 15_000, 0, 0x7fff_ffff),
    maxMissedPongs: positiveInt('maxMissedPongs', o.maxMissedPongs, 2, 1, 1000),
    maxControlFrames: positiveInt('maxControlFrames', o.maxControlFrames, 10_000, 1, 0x7fff_ffff),
    floodWindowMs: positiveInt('floodWindowMs', o.floodWindowMs, 1000, 1, 0x7fff_ffff),
  };
}

function errorCodeOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.length > 0 && code.length <= 128 ? code : 'PROTO_ERR_HANDLER';
}

function errorMessageOf(err: unknown): string {
  const m = (err as { message?: unknown } | null)?.message;
  return typeof m === 'string' ? m.slice(0, 4096) : String(err).slice(0, 4096);
}

/** a promise whose rejection is never reported as unhandled (callers may still await it) */
function quiet<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

// ------------------------------------------------------------------ reading side

type Item = { event: StreamEvent; cost: number } | { error: ProtocolError; cost: 0 };

/**
 * A stream this side opened: an async iterable of `columns`, `rows` batches and `end`. A
 * remote ERROR (or a session failure) is thrown by the iterator after the events received
 * before it. Credit for an event goes back to the sender when the iterator moves past it, so
 * a consumer that stops reading stops the sender after one window. Read it to the end, or
 * `cancel()` it (breaking out of `for await` cancels it).
 */
export class QueryStream implements AsyncIterableIterator<StreamEvent> {
  readonly id: number;
  readonly open: QueryOpen;
  /** @internal */ _recvWindow: number;
  /** @internal */ _unreturned = 0;
  /** @internal still registered in the session (no END/ERROR received yet) */ _live = true;
  /** @internal received frames are dropped (cancelled or refused by GOAWAY) */ _discarding = false;
  /** @internal */ _columnsSeen = false;
  /** @internal */ _rowsSeen = false;
  readonly #session: Session;
  readonly #items: Item[] = [];
  #queued = 0;
  #held = 0;
  #waiter: { resolve: (r: IteratorResult<StreamEvent>) => void; reject: (e: unknown) => void } | null = null;
  #error: ProtocolError | null = null;
  #done = false;
  /** END or an error is already queued: nothing may follow it */
  #terminal = false;

  /** @internal */
  constructor(session: Session, id: number, open: QueryOpen, window: number) {
    this.#session = session;
    this.id = id;
    this.open = open;
    this._recvWindow = window;
  }

  /** flow-controlled bytes received and not yet read past (what this stream holds in memory) */
  get bufferedBytes(): number {
    return this.#queued + this.#held;
  }

  /** true once the stream has ended, failed or been cancelled */
  get finished(): boolean {
    return this.#done || this.#error !== null;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<StreamEvent>> {
    this.#releaseHeld();
    if (this.#error) return Promise.reject(this.#error);
    const item = this.#items.shift();
    if (item) return this.#deliver(item);
    if (this.#done) return Promise.resolve({ done: true, value: undefined });
    if (this.#waiter) return Promise.reject(protoError('PROTO_ERR_STREAM_STATE', 'next() called while a previous next() is pending'));
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  /** stops reading: cancels the stream if it has not finished */
  return(): Promise<IteratorResult<StreamEvent>> {
    this.#releaseHeld();
    if (!this.finished) this.cancel('consumer stopped reading');
    this.#done = true;
    this.#error = null;
    return Promise.resolve({ done: true, value: undefined });
  }

  /**
   * Cancels the stream: sends CANCEL (if the peer has not finished it), drops what is buffered
   * (returning its credit), and makes the iterator throw PROTO_ERR_CANCELLED. Idempotent.
   */
  cancel(reason?: string): void {
    if (this.finished) return;
    const err = protoError('PROTO_ERR_CANCELLED', reason === undefined ? 'stream was cancelled' : `stream was cancelled: ${reason}`);
    if (this._live && !this._discarding) this.#session._sendCancel(this, reason);
    this._fail(err, true);
  }

  /** reads the whole stream */
  async collect(): Promise<StreamResult> {
    const out: StreamResult = { columns: [], rows: [], end: { rowCount: 0, byteCount: 0 } };
    for await (const ev of this) {
      if (ev.type === 'columns') out.columns = ev.columns;
      else if (ev.type === 'rows') for (const r of ev.rows) out.rows.push(r);
      else out.end = ev.end;
    }
    return out;
  }

  #releaseHeld(): void {
    if (this.#held > 0) {
      const c = this.#held;
      this.#held = 0;
      this.#session._consumed(this, c);
    }
  }

  #deliver(item: Item): Promise<IteratorResult<StreamEvent>> {
    if ('error' in item) {
      this.#error = item.error;
      return Promise.reject(item.error);
    }
    this.#queued -= item.cost;
    this.#held = item.cost;
    if (item.event.type === 'end') this.#done = true;
    return Promise.resolve({ done: false, value: item.event });
  }

  #push(item: Item): void {
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = null;
      if ('error' in item) {
        this.#error = item.error;
        w.reject(item.error);
        return;
      }
      this.#held = item.cost;
      if (item.event.type === 'end') this.#done = true;
      w.resolve({ done: false, value: item.event });
      return;
    }
    if (!('error' in item)) this.#queued += item.cost;
    this.#items.push(item);
  }

  /** @internal an event arrived (windows already charged) */
  _event(event: StreamEvent, cost: number): void {
    if (this.#terminal) {
      this.#session._consumed(this, cost);
      return;
    }
    if (event.type === 'end') this.#terminal = true;
    this.#push({ event, cost });
  }

  /** @internal the stream failed remotely or with the session; events received before stay readable unless `discard` */
  _fail(err: ProtocolError, discard: boolean): void {
    if (this.finished) return;
    if (discard) {
      this._discarding = true;
      this.#terminal = true;
      let c = this.#held;
      this.#held = 0;
      for (const it of this.#items) c += it.cost;
      this.#items.length = 0;
      this.#queued = 0;
      if (c > 0) this.#session._consumed(this, c);
      if (this.#waiter) {
        const w = this.#waiter;
        this.#waiter = null;
        this.#error = err;
        w.reject(err);
        return;
      }
      this.#error = err;
      return;
    }
    if (this.#terminal) return;
    this.#terminal = true;
    this.#push({ error: err, cost: 0 });
  }
}

// ------------------------------------------------------------------ writing side

interface Pending {
  bytes: Buffer;
  cost: number;
  isEnd: boolean;
  done?: { resolve: () => void; reject: (e: unknown) => void };
}

/**
 * A stream the peer opened, handed to the `onStream` handler. Write `sendColumns`, then
 * `sendRows` batches, then `end()`; each returns a promise that settles when the frames are on
 * the wire, i.e. after credit allowed them (await it: that is the backpressure). `signal`
 * aborts when the peer cancels, the deadline passes or the session closes.
 */
export class IncomingQuery {
  readonly id: number;
  readonly open: QueryOpen;
  readonly signal: AbortSignal;
  /** @internal */ _sendWindow: number;
  /** @internal */ _queue: Pending[] = [];
  readonly #session: Session;
  readonly #abort = new AbortController();
  #state: 'open' | 'ending' | 'closed' = 'open';
  #columnsSent = false;
  #rowCount = 0;
  #byteCount = 0;
  #deadline: TimerHandle | null = null;

  /** @internal */
  constructor(session: Session, id: number, open: QueryOpen, window: number) {
    this.#session = session;
    this.id = id;
    this.open = open;
    this.signal = this.#abort.signal;
    this._sendWindow = window;
  }

  /** rows handed to sendRows so far */
  get rowCount(): number {
    return this.#rowCount;
  }

  /** true until end() or an error closes it */
  get isOpen(): boolean {
    return this.#state === 'open';
  }

  sendColumns(columns: Column[]): Promise<void> {
    return quiet(
      this.#guard(() => {
        if (this.#columnsSent) throw protoError('PROTO_ERR_STREAM_STATE', 'columns were already sent');
        if (!Array.isArray(columns)) throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'columns must be an array');
        const bytes = this.#session._encodeData({ type: 'COLUMNS', streamId: this.id, columns });
        this.#columnsSent = true;
        return this.#session._enqueue(this, [bytes], false);
      }),
    );
  }

  /** Sends a batch (split into frames of the negotiated size); resolves when all of it is on the wire. */
  sendRows(rows: Row[]): Promise<void> {
    return quiet(
      this.#guard(() => {
        if (!this.#columnsSent) throw protoError('PROTO_ERR_STREAM_STATE', 'send columns before rows');
        if (!Array.isArray(rows)) throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'rows must be an array of rows');
        if (rows.length === 0) return Promise.resolve();
        const frames = this.#session._encodeRows(this.id, rows);
        const p = this.#session._enqueue(this, frames, false);
        this.#rowCount += rows.length;
        for (const f of frames) this.#byteCount += f.length - HEADER_SIZE;
        return p;
      }),
    );
  }

  /** Ends the stream with its counts (defaults: the rows and ROWS payload bytes sent). */
  end(info: Partial<EndInfo> = {}): Promise<void> {
    return quiet(
      this.#guard(() => {
        const end: EndInfo = { rowCount: info.rowCount ?? this.#rowCount, byteCount: info.byteCount ?? this.#byteCount };
        if (info.truncated !== undefined) end.truncated = info.truncated;
        if (info.command !== undefined) end.command = info.command;
        const bytes = this.#session._encodeData({ type: 'END', streamId: this.id, end });
        this.#state = 'ending';
        return this.#session._enqueue(this, [bytes], true);
      }),
    );
  }

  /**
   * Ends the stream with an error (sent at once, not subject to credit; anything still queued
   * is dropped). No-op when the stream is already closed.
   */
  fail(code: string, message: string, opts: { retryable?: boolean; detail?: JsonValue } = {}): void {
    if (this.#state === 'closed') return;
    const c = code.length > 0 && code.length <= 128 ? code : 'PROTO_ERR_HANDLER';
    const err = new ProtocolError(c, message);
    this.#session._sendStreamError(this, { code: c, message: message.slice(0, 64 * 1024), ...(opts.retryable === undefined ? {} : { retryable: opts.retryable }), ...(opts.detail === undefined ? {} : { detail: opts.detail }) });
    this._close(err);
  }

  #guard(fn: () => Promise<void>): Promise<void> {
    if (this.#state !== 'open') {
      return Promise.reject(this.signal.aborted ? (this.signal.reason as Error) : protoError('PROTO_ERR_STREAM_STATE', 'stream has ended'));
    }
    try {
      return fn();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** @internal */
  _setDeadline(handle: TimerHandle): void {
    this.#deadline = handle;
  }

  /** @internal the END frame went out */
  _ended(): void {
    this._close(null);
  }

  /** @internal closes locally: rejects queued writes, aborts the signal (unless it ended normally), unregisters */
  _close(err: ProtocolError | null): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    if (this.#deadline !== null) this.#session._clearTimer(this.#deadline);
    this.#deadline = null;
    const queued = this._queue;
    this._queue = [];
    this.#session._dropQueued(this, queued);
    if (queued.length > 0) {
      // (built only when a write is waiting: an Error's stack costs microseconds on every stream)
      const reason = err ?? protoError('PROTO_ERR_STREAM_STATE', 'stream has ended');
      for (const p of queued) p.done?.reject(reason);
    }
    if (err && !this.signal.aborted) this.#abort.abort(err);
    this.#session._unregister(this.id);
  }
}

// ------------------------------------------------------------------ the session

type State = 'hello' | 'open' | 'closed';

export class Session {
  readonly role: Role;
  /** resolves with the negotiated version and features; rejects if the session fails first */
  readonly ready: Promise<Negotiated>;
  /** resolves when the session is closed, however that happened (never rejects) */
  readonly closed: Promise<SessionCloseInfo>;
  readonly #t: Transport;
  readonly #o: Resolved;
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
  #nextLocalId: number;
  #lastPeerId = 0;
  #localOpen = 0;
  #peerOpen = 0;

  // flow control: receiving
  #recvWindow: number;
  #unreturned = 0;
  readonly #recvBound: number;
  // flow control: sending
  #sendWindow = 0;
  #peerStreamWindow = 0;
  #peerSessionWindow = 0;
  #maxDataWire = 0;
  #queuedBytes = 0;
  readonly #sendable = new Set<IncomingQuery>();

  // timers
  #helloTimer: TimerHandle | null = null;
  #pingTimer: TimerHandle | null = null;
  #pingSeq = 0;
  #pongSeq = 0;
  #pingSentAt = new Map<number, number>();
  #missed = 0;
  #rtt: number | null = null;
  #floodStart = 0;
  #floodCount = 0;

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
    this.#recvWindow = this.#o.sessionWindow;
    this.#recvBound = Math.min(this.#o.maxFrameSize + HEADER_SIZE, Math.floor(this.#o.streamWindow / 2), Math.floor(this.#o.sessionWindow / 2));
    this.#floodStart = this.#clock.now();
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
    const hello: Hello = {
      versions: this.#o.versions,
      features: this.#o.features,
      role: this.role,
      maxFrameSize: this.#o.maxFrameSize,
      streamWindow: this.#o.streamWindow,
      sessionWindow: this.#o.sessionWindow,
      maxConcurrentStreams: this.#o.maxConcurrentStreams,
    };
    if (this.#o.agent !== undefined) hello.agent = this.#o.agent;
    this.#helloTimer = this.#clock.setTimeout(() => {
      this.#helloTimer = null;
      if (this.#state === 'hello') this.#fail(protoError('PROTO_ERR_HELLO_TIMEOUT', `no HELLO from the peer within ${this.#o.helloTimeoutMs} ms`), true);
    }, this.#o.helloTimeoutMs);
    this.#send(encodeFrame({ type: 'HELLO', streamId: 0, hello }));
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
      bufferedBytes: this.#o.sessionWindow - this.#recvWindow - this.#unreturned,
      unreturnedBytes: this.#unreturned,
      queuedBytes: this.#queuedBytes,
      sendWindow: this.#sendWindow,
      recvWindow: this.#recvWindow,
      rttMs: this.#rtt,
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
    const s = new QueryStream(this, id, open, this.#o.streamWindow);
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

  // ------------------------------------------------------------ internals used by streams

  /** @internal */
  _encodeData(frame: Frame): Buffer {
    const bytes = encodeFrame(frame, { maxFrameSize: this.#negotiated?.peer.maxFrameSize ?? 0 });
    if (bytes.length > this.#maxDataWire) throw protoError('PROTO_ERR_FRAME_TOO_LARGE', `${frame.type} frame of ${bytes.length} bytes is larger than half the peer's window`);
    return bytes;
  }

  /** @internal */
  _encodeRows(streamId: number, rows: Row[]): Buffer[] {
    const max = this.#maxDataWire - HEADER_SIZE;
    return encodeRowsFrames(streamId, rows, { targetPayload: Math.min(this.#o.dataFrameSize, max), maxPayload: max });
  }

  /** @internal queue frames for credit; resolves when the last is sent */
  _enqueue(q: IncomingQuery, frames: Buffer[], isEnd: boolean): Promise<void> {
    if (this.#state === 'closed') return Promise.reject(protoError('PROTO_ERR_SESSION_CLOSED'));
    let total = 0;
    for (const f of frames) total += f.length;
    if (this.#queuedBytes > 0 && this.#queuedBytes + total > this.#o.maxQueuedBytes) {
      return Promise.reject(protoError('PROTO_ERR_QUEUE_FULL', `${this.#queuedBytes} bytes already wait for credit (limit ${this.#o.maxQueuedBytes}); await each send`));
    }
    return new Promise<void>((resolve, reject) => {
      frames.forEach((bytes, i) => {
        const p: Pending = { bytes, cost: bytes.length, isEnd: isEnd && i === frames.length - 1 };
        if (i === frames.length - 1) p.done = { resolve, reject };
        q._queue.push(p);
      });
      this.#queuedBytes += total;
      this.#sendable.add(q);
      this.#pump();
    });
  }

  /** @internal */
  _dropQueued(q: IncomingQuery, queued: Pending[]): void {
    if (this.#state === 'closed') return;
    for (const p of queued) this.#queuedBytes -= p.cost;
    this.#sendable.delete(q);
  }

  /** @internal */
  _sendStreamError(q: IncomingQuery, error: { code: string; message: string; retryable?: boolean; detail?: JsonValue }): void {
    if (this.#state !== 'open') return;
    this.#sendFrame({ type: 'ERROR', streamId: q.id, error });
  }

  /** @internal */
  _sendCancel(s: QueryStream, reason: string | undefined): void {
    if (this.#state !== 'open') return;
    this.#sendFrame(reason === undefined ? { type: 'CANCEL', streamId: s.id } : { type: 'CANCEL', streamId: s.id, reason: reason.slice(0, 4096) });
  }

  /** @internal */
  _clearTimer(h: TimerHandle): void {
    this.#clock.clearTimeout(h);
  }

  /** @internal the application read past `cost` bytes of stream `s`: return credit */
  _consumed(s: QueryStream, cost: number): void {
    if (this.#state !== 'open') return;
    this.#unreturned += cost;
    // return in batches, but at once when the sender may be short of room for its next frame
    if (this.#unreturned >= this.#o.sessionWindow / 4 || this.#recvWindow < this.#recvBound) {
      const inc = this.#unreturned;
      this.#unreturned = 0;
      this.#recvWindow += inc;
      this.#sendFrame({ type: 'CREDIT', streamId: 0, increment: inc });
    }
    if (s._live && !s._discarding) {
      s._unreturned += cost;
      if (s._unreturned >= this.#o.streamWindow / 4 || s._recvWindow < this.#recvBound) {
        const inc = s._unreturned;
        s._unreturned = 0;
        s._recvWindow += inc;
        this.#sendFrame({ type: 'CREDIT', streamId: s.id, increment: inc });
      }
    }
  }

  /** @internal */
  _unregister(id: number): void {
    const s = this.#streams.get(id);
    if (!s) return;
    this.#streams.delete(id);
    if (s instanceof QueryStream) {
      this.#localOpen--;
      s._live = false;
    } else {
      this.#peerOpen--;
      this.#sendable.delete(s);
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

  #pump(): void {
    let progress = true;
    while (progress && this.#sendable.size > 0 && this.#state === 'open') {
      progress = false;
      // round robin: one frame per stream per pass
      for (const q of this.#sendable) {
        const head = q._queue[0];
        if (!head) {
          this.#sendable.delete(q);
          continue;
        }
        if (head.cost > q._sendWindow || head.cost > this.#sendWindow) continue;
        q._queue.shift();
        q._sendWindow -= head.cost;
        this.#sendWindow -= head.cost;
        this.#queuedBytes -= head.cost;
        this.#send(head.bytes);
        progress = true;
        if (q._queue.length === 0) this.#sendable.delete(q);
        head.done?.resolve();
        if (head.isEnd) q._ended();
      }
    }
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

  #control(): void {
    const now = this.#clock.now();
    if (now - this.#floodStart >= this.#o.floodWindowMs) {
      this.#floodStart = now;
      this.#floodCount = 0;
    }
    if (++this.#floodCount > this.#o.maxControlFrames) {
      throw protoError('PROTO_ERR_FLOOD', `more than ${this.#o.maxControlFrames} control frames within ${this.#o.floodWindowMs} ms`);
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
        this.#control();
        this.#sendFrame({ type: 'PONG', streamId: 0, data: f.data });
        return;
      case 'PONG': {
        this.#control();
        const seq = Buffer.from(f.data).readUInt32BE(4);
        if (seq > this.#pongSeq && seq <= this.#pingSeq) {
          this.#pongSeq = seq;
          this.#missed = 0;
          const at = this.#pingSentAt.get(seq);
          if (at !== undefined) this.#rtt = this.#clock.now() - at;
          for (const k of this.#pingSentAt.keys()) if (k <= seq) this.#pingSentAt.delete(k);
        }
        return;
      }
      case 'GOAWAY':
        this.#control();
        return this.#onGoaway(f.goaway);
      case 'ERROR':
        if (f.streamId === 0) return this.#remoteFatal(f.error.code, f.error.message);
        return this.#onStreamFrame(f);
      case 'CREDIT':
        if (f.streamId === 0) {
          this.#control();
          this.#sendWindow = this.#credit(this.#sendWindow, f.increment, this.#peerSessionWindow, 'session');
          this.#pump();
          return;
        }
        return this.#onStreamFrame(f);
      default:
        return this.#onStreamFrame(f);
    }
  }

  #credit(window: number, inc: number, limit: number, what: string): number {
    if (inc === 0) throw protoError('PROTO_ERR_WINDOW_OVERFLOW', `zero ${what} credit increment`);
    const next = window + inc;
    if (next > limit) throw protoError('PROTO_ERR_WINDOW_OVERFLOW', `${what} credit of ${inc} raises the window to ${next}, above the advertised ${limit}`);
    return next;
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
    this.#control();
    const q = this.#streams.get(id) as IncomingQuery | undefined;
    // after this side's END or ERROR, a CANCEL or CREDIT may still cross it on the wire
    if (!q) return;
    if (f.type === 'CANCEL') {
      const err = protoError('PROTO_ERR_CANCELLED', f.reason === undefined ? 'cancelled by the peer' : `cancelled by the peer: ${f.reason}`);
      this.#sendFrame({ type: 'ERROR', streamId: id, error: { code: 'PROTO_ERR_CANCELLED', message: err.message } });
      q._close(err);
      return;
    }
    q._sendWindow = this.#credit(q._sendWindow, f.increment, this.#peerStreamWindow, `stream ${id}`);
    this.#pump();
  }

  #onReadFrame(s: QueryStream, f: DecodedFrame): void {
    if (f.type === 'ERROR') {
      this.#unregisterRead(s);
      if (!s._discarding) {
        s._fail(new ProtocolError(f.error.code, f.error.message, { remote: true, retryable: f.error.retryable ?? f.error.code === 'PROTO_ERR_GOAWAY', detail: f.error.detail }), false);
      }
      return;
    }
    // flow-controlled: charge the windows before anything else
    const cost = HEADER_SIZE + f.payloadLength;
    if (cost > s._recvWindow) throw protoError('PROTO_ERR_WINDOW_EXCEEDED', `${cost} bytes on stream ${s.id} with ${s._recvWindow} bytes of credit`);
    if (cost > this.#recvWindow) throw protoError('PROTO_ERR_WINDOW_EXCEEDED', `${cost} bytes with ${this.#recvWindow} bytes of session credit`);
    s._recvWindow -= cost;
    this.#recvWindow -= cost;
    if (f.type === 'COLUMNS') {
      if (s._columnsSeen || s._rowsSeen) throw protoError('PROTO_ERR_UNEXPECTED_FRAME', `COLUMNS on stream ${s.id} after columns or rows`);
      s._columnsSeen = true;
    } else if (f.type === 'ROWS') {
      if (!s._columnsSeen) throw protoError('PROTO_ERR_UNEXPECTED_FRAME', `ROWS on stream ${s.id} before COLUMNS`);
      s._rowsSeen = true;
      if (f.rows.length === 0) this.#control();
    }
    if (s._discarding) {
      // already charged to the windows, so bounded: not counted as control frames
      if (f.type === 'END') this.#unregisterRead(s);
      this._consumed(s, cost);
      return;
    }
    if (f.type === 'COLUMNS') s._event({ type: 'columns', columns: f.columns }, cost);
    else if (f.type === 'ROWS') s._event({ type: 'rows', rows: f.rows }, cost);
    else if (f.type === 'END') {
      this.#unregisterRead(s);
      s._event({ type: 'end', end: f.end }, cost);
    }
  }

  #unregisterRead(s: QueryStream): void {
    this._unregister(s.id);
  }

  #accept(id: number, open: QueryOpen): void {
    const refuse = (code: ProtoErrorCode, message: string, retryable?: boolean): void => {
      const error: { code: string; message: string; retryable?: boolean } = { code, message };
      if (retryable !== undefined) error.retryable = retryable;
      // refusals cost this side a frame each: count them against the flood limit
      this.#control();
      this.#sendFrame({ type: 'ERROR', streamId: id, error });
    };
    if (this.#draining && id > this.#goawayLastId) return refuse('PROTO_ERR_GOAWAY', 'session is draining', true);
    if (this.#peerOpen >= this.#o.maxConcurrentStreams) return refuse('PROTO_ERR_STREAM_LIMIT', `at most ${this.#o.maxConcurrentStreams} concurrent streams`, true);
    const handler = this.#handler;
    if (!handler) return refuse('PROTO_ERR_NO_HANDLER', 'no stream handler is registered');
    const q = new IncomingQuery(this, id, open, this.#peerStreamWindow);
    this.#streams.set(id, q);
    this.#peerOpen++;
    if (open.timeoutMs !== undefined) {
      const ms = open.timeoutMs;
      q._setDeadline(
        this.#clock.setTimeout(() => {
          if (q.isOpen || this.#streams.get(id) === q) q.fail('PROTO_ERR_DEADLINE', `stream ran past its deadline of ${ms} ms`);
        }, ms),
      );
    }
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
    const badHello = (m: string): ProtocolError => protoError('PROTO_ERR_BAD_HELLO', m);
    if (h.role === this.role) throw badHello(`both sides claim the role "${h.role}"`);
    if (h.maxFrameSize < MIN_MAX_FRAME_SIZE || h.maxFrameSize > MAX_MAX_FRAME_SIZE) throw badHello(`maxFrameSize ${h.maxFrameSize} is outside ${MIN_MAX_FRAME_SIZE}..${MAX_MAX_FRAME_SIZE}`);
    if (h.streamWindow < 1024 || h.streamWindow > MAX_WINDOW) throw badHello(`streamWindow ${h.streamWindow} is outside 1024..${MAX_WINDOW}`);
    if (h.sessionWindow < 1024 || h.sessionWindow > MAX_WINDOW) throw badHello(`sessionWindow ${h.sessionWindow} is outside 1024..${MAX_WINDOW}`);
    const common = h.versions.filter((v) => this.#o.versions.includes(v));
    if (common.length === 0) {
      throw protoError('PROTO_ERR_VERSION_MISMATCH', `peer speaks versions [${h.versions.join(', ')}], this side [${this.#o.versions.join(', ')}]`);
    }
    const version = Math.max(...common);
    const features = this.#o.features.filter((f) => h.features.includes(f));
    this.#negotiated = { version, features, peer: h };
    this.#peerStreamWindow = h.streamWindow;
    this.#peerSessionWindow = h.sessionWindow;
    this.#sendWindow = h.sessionWindow;
    this.#maxDataWire = Math.min(h.maxFrameSize + HEADER_SIZE, Math.floor(h.streamWindow / 2), Math.floor(h.sessionWindow / 2));
    this.#state = 'open';
    if (this.#helloTimer !== null) this.#clock.clearTimeout(this.#helloTimer);
    this.#helloTimer = null;
    this.#schedulePing();
    this.#resolveReady(this.#negotiated);
  }

  #schedulePing(): void {
    if (this.#o.pingIntervalMs === 0 || this.#state !== 'open') return;
    this.#pingTimer = this.#clock.setTimeout(() => this.#pingTick(), this.#o.pingIntervalMs);
  }

  #pingTick(): void {
    this.#pingTimer = null;
    if (this.#state !== 'open') return;
    if (this.#pongSeq < this.#pingSeq) {
      this.#missed++;
      if (this.#missed >= this.#o.maxMissedPongs) {
        this.#fail(protoError('PROTO_ERR_PEER_DEAD', `no pong for ${this.#missed} ping intervals of ${this.#o.pingIntervalMs} ms`), true);
        return;
      }
    }
    const seq = ++this.#pingSeq;
    const data = Buffer.alloc(8);
    data.writeUInt32BE(seq, 4);
    this.#pingSentAt.set(seq, this.#clock.now());
    // keep the map small even if pongs never come
    if (this.#pingSentAt.size > this.#o.maxMissedPongs + 2) {
      const oldest = this.#pingSentAt.keys().next().value;
      if (oldest !== undefined) this.#pingSentAt.delete(oldest);
    }
    this.#sendFrame({ type: 'PING', streamId: 0, data });
    this.#schedulePing();
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
        s._fail(protoError('PROTO_ERR_GOAWAY', 'the peer is draining and did not accept this stream', { retryable: true }), true);
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
    for (const h of [this.#helloTimer, this.#pingTimer, this.#drainTimer]) if (h !== null) this.#clock.clearTimeout(h);
    this.#helloTimer = this.#pingTimer = this.#drainTimer = null;
    if (!transportGone) {
      try {
        this.#t.close(info.code, info.reason.slice(0, 123));
      } catch {
        // already closed
      }
    }
    const streams = [...this.#streams.values()];
    this.#streams.clear();
    this.#sendable.clear();
    this.#queuedBytes = 0;
    for (const s of streams) {
      if (s instanceof QueryStream) {
        s._live = false;
        s._fail(streamError, false);
      } else {
        s._close(streamError);
      }
    }
    this.#rejectReady(streamError);
    for (const w of this.#drainWaiters.splice(0)) w();
    this.#resolveClosed(info);
    for (const cb of this.#closeListeners.splice(0)) cb(info);
  }
}
