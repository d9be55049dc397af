/**
 * The read half of a stream: the side that opened it (sent OPEN) and reads COLUMNS, ROWS and END
 * (or ERROR). It owns its receive window and its lifecycle (stream-state.ts); the session hands it
 * frames and asks it for credit through its `_` methods (@internal: not for applications), and it
 * reaches the session only through `ReadHost`.
 */
import { ProtocolError, protoError } from './errors.js';
import { RecvWindow, chargeReceived } from './flow-control.js';
import type { Column, ColumnsFrame, EndFrame, EndInfo, ErrorInfo, FrameTypeName, QueryOpen, Row, RowsFrame } from './frames.js';
import { READ_TRANSITIONS, StreamState, transition } from './stream-state.js';

export type StreamEvent =
  | { type: 'columns'; columns: Column[] }
  | { type: 'rows'; rows: Row[] }
  | { type: 'end'; end: EndInfo };

export interface StreamResult {
  columns: Column[];
  rows: Row[];
  end: EndInfo;
}

/** what a read half asks of its session */
export interface ReadHost {
  /** the application read past `cost` bytes of `stream` (or they were dropped): return their credit */
  released(stream: QueryStream, cost: number): void;
  /** tell the peer the stream is cancelled (CANCEL) */
  sendCancel(stream: QueryStream, reason: string | undefined): void;
}

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
  readonly #host: ReadHost;
  readonly #window: RecvWindow;
  #state: StreamState = StreamState.Open;
  /** the peer's frame order (COLUMNS, then ROWS): what its frames say, apart from the lifecycle */
  #columnsSeen = false;
  readonly #items: Item[] = [];
  #queued = 0;
  #held = 0;
  #waiter: { resolve: (r: IteratorResult<StreamEvent>) => void; reject: (e: unknown) => void } | null = null;
  /** what `next()` throws once the stream is Reset or Closed by an error (`return()` clears it) */
  #error: ProtocolError | null = null;

  /** @internal */
  constructor(host: ReadHost, id: number, open: QueryOpen, window: number, creditBound: number) {
    this.#host = host;
    this.id = id;
    this.open = open;
    this.#window = new RecvWindow(window, creditBound);
  }

  get state(): StreamState {
    return this.#state;
  }

  /** flow-controlled bytes received and not yet read past (what this stream holds in memory) */
  get bufferedBytes(): number {
    return this.#queued + this.#held;
  }

  /** true once the stream has ended, failed or been cancelled */
  get finished(): boolean {
    return this.#state === StreamState.Reset || this.#state === StreamState.Closed;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<StreamEvent>> {
    this.#releaseHeld();
    if (this.#error) return Promise.reject(this.#error);
    const item = this.#items.shift();
    if (item) return this.#deliver(item);
    if (this.finished) return Promise.resolve({ done: true, value: undefined });
    if (this.#waiter) return Promise.reject(protoError('PROTO_ERR_STREAM_STATE', 'next() called while a previous next() is pending'));
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  /** stops reading: cancels the stream if it has not finished */
  return(): Promise<IteratorResult<StreamEvent>> {
    this.#releaseHeld();
    if (!this.finished) this.cancel('consumer stopped reading');
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
    if (this.#state === StreamState.Open) this.#host.sendCancel(this, reason);
    this._reset(err);
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

  // ------------------------------------------------------------ called by the session

  /**
   * @internal a COLUMNS, ROWS or END frame arrived: charges it to this stream's window and the
   * session's, and checks it against the frames before it. Throws (a session error) when it
   * does not fit or is out of order.
   */
  _admit(type: FrameTypeName, cost: number, session: RecvWindow): void {
    chargeReceived(this.#window, session, cost, this.id);
    if (type === 'COLUMNS') {
      if (this.#columnsSeen) throw protoError('PROTO_ERR_UNEXPECTED_FRAME', `COLUMNS on stream ${this.id} after columns or rows`);
      this.#columnsSeen = true;
    } else if (type === 'ROWS') {
      if (!this.#columnsSeen) throw protoError('PROTO_ERR_UNEXPECTED_FRAME', `ROWS on stream ${this.id} before COLUMNS`);
    }
  }

  /** @internal an admitted frame: queued for the application, or dropped (and credited) once the stream is reset */
  _receive(f: ColumnsFrame | RowsFrame | EndFrame, cost: number): void {
    if (this.#state !== StreamState.Open) {
      if (f.type === 'END' && this.#state === StreamState.Reset) this.#to(StreamState.Closed);
      this.#host.released(this, cost);
      return;
    }
    if (f.type === 'COLUMNS') this.#push({ event: { type: 'columns', columns: f.columns }, cost });
    else if (f.type === 'ROWS') this.#push({ event: { type: 'rows', rows: f.rows }, cost });
    else {
      this.#to(StreamState.RemoteClosed);
      this.#push({ event: { type: 'end', end: f.end }, cost });
    }
  }

  /** @internal the peer ended the stream with ERROR: the application reads it after what came before */
  _receiveError(error: ErrorInfo): void {
    if (this.#state !== StreamState.Open) return this.#peerGone();
    this.#to(StreamState.RemoteClosed);
    const err = new ProtocolError(error.code, error.message, { remote: true, retryable: error.retryable ?? error.code === 'PROTO_ERR_GOAWAY', detail: error.detail });
    this.#push({ error: err, cost: 0 });
  }

  /** @internal the session closed: like an ERROR from the peer, with the session's reason */
  _sessionClosed(err: ProtocolError): void {
    if (this.#state !== StreamState.Open) return this.#peerGone();
    this.#to(StreamState.RemoteClosed);
    this.#push({ error: err, cost: 0 });
  }

  /**
   * @internal abandons the stream here (cancelled, or refused by the peer's GOAWAY): drops what
   * is buffered, returning its credit, and fails the iterator with `err`. No-op once finished.
   */
  _reset(err: ProtocolError): void {
    if (this.finished) return;
    this.#to(this.#state === StreamState.Open ? StreamState.Reset : StreamState.Closed);
    let c = this.#held;
    this.#held = 0;
    for (const it of this.#items) c += it.cost;
    this.#items.length = 0;
    this.#queued = 0;
    if (c > 0) this.#host.released(this, c);
    this.#error = err;
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = null;
      w.reject(err);
    }
  }

  /** @internal `cost` bytes were read: the stream credit to send back now (0 to keep batching, or when the peer sends no more) */
  _releaseCredit(cost: number): number {
    return this.#state === StreamState.Open ? this.#window.release(cost) : 0;
  }

  // ------------------------------------------------------------ internals

  #to(next: StreamState): void {
    this.#state = transition(READ_TRANSITIONS, this.id, this.#state, next);
  }

  /** the peer's terminal frame (or the session's end) reached a stream that stopped reading */
  #peerGone(): void {
    if (this.#state === StreamState.Reset) this.#to(StreamState.Closed);
  }

  #releaseHeld(): void {
    if (this.#held > 0) {
      const c = this.#held;
      this.#held = 0;
      this.#host.released(this, c);
    }
  }

  /** hands an item to the application; the terminal one (END or an error) closes the stream */
  #deliver(item: Item): Promise<IteratorResult<StreamEvent>> {
    if ('error' in item) {
      this.#error = item.error;
      this.#to(StreamState.Closed);
      return Promise.reject(item.error);
    }
    this.#queued -= item.cost;
    this.#held = item.cost;
    if (item.event.type === 'end') this.#to(StreamState.Closed);
    return Promise.resolve({ done: false, value: item.event });
  }

  #push(item: Item): void {
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = null;
      if ('error' in item) {
        this.#error = item.error;
        this.#to(StreamState.Closed);
        w.reject(item.error);
        return;
      }
      this.#held = item.cost;
      if (item.event.type === 'end') this.#to(StreamState.Closed);
      w.resolve({ done: false, value: item.event });
      return;
    }
    if (!('error' in item)) this.#queued += item.cost;
    this.#items.push(item);
  }
}
