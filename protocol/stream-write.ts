/**
 * The write half of a stream: the side that accepted it (got OPEN) and writes COLUMNS, ROWS and
 * END (or ERROR). It owns its send window, its queue of frames waiting for credit and its
 * lifecycle (stream-state.ts); the session's send queue (send-queue.ts) takes frames from it when
 * credit allows, through its `_` methods (@internal: not for applications), and it reaches the
 * session only through `WriteHost`.
 */
import type { Clock, TimerHandle } from './clock.js';
import { ProtocolError, protoError } from './errors.js';
import { SendWindow } from './flow-control.js';
import { HEADER_SIZE, type Column, type ColumnsFrame, type EndFrame, type EndInfo, type ErrorInfo, type JsonValue, type QueryOpen, type Row } from './frames.js';
import { StreamState, WRITE_TRANSITIONS, transition } from './stream-state.js';

/** a promise whose rejection is never reported as unhandled (callers may still await it) */
export function quiet<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

/** one encoded frame waiting for credit */
export interface Pending {
  bytes: Buffer;
  cost: number;
  isEnd: boolean;
  /** set on the last frame of a write: settles the write's promise */
  done?: { resolve: () => void; reject: (e: unknown) => void };
}

/** what a write half asks of its session */
export interface WriteHost {
  /** encodes COLUMNS or END for the peer; throws PROTO_ERR_FRAME_TOO_LARGE */
  encodeData(frame: ColumnsFrame | EndFrame): Buffer;
  /** encodes a batch as ROWS frames of the negotiated size; throws PROTO_ERR_ROW_TOO_LARGE */
  encodeRows(streamId: number, rows: Row[]): Buffer[];
  /** why `bytes` more may not wait for credit (session closed, queue full), or null */
  refuseQueued(bytes: number): ProtocolError | null;
  /** `bytes` were queued on `q`: schedule it for sending */
  queued(q: IncomingQuery, bytes: number): void;
  /** `bytes` queued on `q` were dropped unsent */
  dropped(q: IncomingQuery, bytes: number): void;
  /** sends ERROR on the stream (not subject to credit) */
  sendError(q: IncomingQuery, error: ErrorInfo): void;
  /** the stream is closed: unregister it */
  closed(q: IncomingQuery): void;
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
  readonly #host: WriteHost;
  readonly #abort = new AbortController();
  readonly #window: SendWindow;
  #queue: Pending[] = [];
  #state: StreamState = StreamState.Open;
  /** what this side has written (COLUMNS comes first), apart from the lifecycle */
  #columnsSent = false;
  #rowCount = 0;
  #byteCount = 0;
  #deadline: { clock: Clock; handle: TimerHandle } | null = null;

  /** @internal */
  constructor(host: WriteHost, id: number, open: QueryOpen, window: number) {
    this.#host = host;
    this.id = id;
    this.open = open;
    this.signal = this.#abort.signal;
    this.#window = new SendWindow(window);
  }

  get state(): StreamState {
    return this.#state;
  }

  /** rows handed to sendRows so far */
  get rowCount(): number {
    return this.#rowCount;
  }

  /** true until end() or an error closes it */
  get isOpen(): boolean {
    return this.#state === StreamState.Open;
  }

  sendColumns(columns: Column[]): Promise<void> {
    return quiet(
      this.#guard(() => {
        if (this.#columnsSent) throw protoError('PROTO_ERR_STREAM_STATE', 'columns were already sent');
        if (!Array.isArray(columns)) throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'columns must be an array');
        const bytes = this.#host.encodeData({ type: 'COLUMNS', streamId: this.id, columns });
        this.#columnsSent = true;
        return this.#enqueue([bytes], false);
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
        const frames = this.#host.encodeRows(this.id, rows);
        const p = this.#enqueue(frames, false);
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
        const bytes = this.#host.encodeData({ type: 'END', streamId: this.id, end });
        this.#to(StreamState.LocalClosed);
        return this.#enqueue([bytes], true);
      }),
    );
  }

  /**
   * Ends the stream with an error (sent at once, not subject to credit; anything still queued
   * is dropped). No-op when the stream is already closed.
   */
  fail(code: string, message: string, opts: { retryable?: boolean; detail?: JsonValue } = {}): void {
    if (this.#state === StreamState.Closed) return;
    const c = code.length > 0 && code.length <= 128 ? code : 'PROTO_ERR_HANDLER';
    const err = new ProtocolError(c, message);
    this.#host.sendError(this, { code: c, message: message.slice(0, 64 * 1024), ...(opts.retryable === undefined ? {} : { retryable: opts.retryable }), ...(opts.detail === undefined ? {} : { detail: opts.detail }) });
    this.#close(err);
  }

  // ------------------------------------------------------------ called by the session

  /** @internal fails the stream with PROTO_ERR_DEADLINE after `ms` */
  _startDeadline(clock: Clock, ms: number): void {
    const handle = clock.setTimeout(() => this.fail('PROTO_ERR_DEADLINE', `stream ran past its deadline of ${ms} ms`), ms);
    this.#deadline = { clock, handle };
  }

  /** @internal a CREDIT frame for this stream; throws PROTO_ERR_WINDOW_OVERFLOW */
  _grant(increment: number): void {
    this.#window.grant(increment, `stream ${this.id}`);
  }

  /** @internal true while frames wait for credit */
  get _hasQueued(): boolean {
    return this.#queue.length > 0;
  }

  /**
   * @internal the next queued frame if both this stream's window and the session's admit it,
   * charged to both and taken off the queue; null when either lacks the credit.
   */
  _takeSendable(session: SendWindow): Pending | null {
    const head = this.#queue[0];
    if (!head || !this.#window.fits(head.cost) || !session.fits(head.cost)) return null;
    this.#queue.shift();
    this.#window.consume(head.cost);
    session.consume(head.cost);
    return head;
  }

  /** @internal a frame from `_takeSendable` is on the wire */
  _sent(p: Pending): void {
    p.done?.resolve();
    if (p.isEnd) this.#close(null);
  }

  /** @internal the peer cancelled the stream, or the session closed: rejects queued writes, aborts the signal */
  _abort(err: ProtocolError): void {
    this.#close(err);
  }

  // ------------------------------------------------------------ internals

  #to(next: StreamState): void {
    this.#state = transition(WRITE_TRANSITIONS, this.id, this.#state, next);
  }

  #guard(fn: () => Promise<void>): Promise<void> {
    if (this.#state !== StreamState.Open) {
      return Promise.reject(this.signal.aborted ? (this.signal.reason as Error) : protoError('PROTO_ERR_STREAM_STATE', 'stream has ended'));
    }
    try {
      return fn();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** queues frames for credit; resolves when the last one is sent */
  #enqueue(frames: Buffer[], isEnd: boolean): Promise<void> {
    let total = 0;
    for (const f of frames) total += f.length;
    const refused = this.#host.refuseQueued(total);
    if (refused) return Promise.reject(refused);
    return new Promise<void>((resolve, reject) => {
      frames.forEach((bytes, i) => {
        const p: Pending = { bytes, cost: bytes.length, isEnd: isEnd && i === frames.length - 1 };
        if (i === frames.length - 1) p.done = { resolve, reject };
        this.#queue.push(p);
      });
      this.#host.queued(this, total);
    });
  }

  /** closes locally: rejects queued writes, aborts the signal (unless it ended normally), unregisters */
  #close(err: ProtocolError | null): void {
    if (this.#state === StreamState.Closed) return;
    this.#to(StreamState.Closed);
    if (this.#deadline !== null) this.#deadline.clock.clearTimeout(this.#deadline.handle);
    this.#deadline = null;
    const queued = this.#queue;
    this.#queue = [];
    let bytes = 0;
    for (const p of queued) bytes += p.cost;
    this.#host.dropped(this, bytes);
    if (queued.length > 0) {
      // (built only when a write is waiting: an Error's stack costs microseconds on every stream)
      const reason = err ?? protoError('PROTO_ERR_STREAM_STATE', 'stream has ended');
      for (const p of queued) p.done?.reject(reason);
    }
    if (err && !this.signal.aborted) this.#abort.abort(err);
    this.#host.closed(this);
  }
}
