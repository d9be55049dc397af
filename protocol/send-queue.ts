/**
 * The session's outgoing data: its send window (credit the peer gave for the whole session), the
 * bytes write halves have queued waiting for credit (bounded by `maxQueuedBytes`), and the round
 * robin that sends one frame per stream per pass while both windows allow.
 */
import { ProtocolError, protoError } from './errors.js';
import { SendWindow } from './flow-control.js';
import type { IncomingQuery } from './stream-write.js';

export class SendQueue {
  readonly #maxQueuedBytes: number;
  readonly #send: (bytes: Buffer) => void;
  readonly #sendable = new Set<IncomingQuery>();
  /** nothing before the peer's HELLO */
  #window = new SendWindow(0);
  #queuedBytes = 0;
  #closed = false;

  /** `send` puts bytes on the wire (it may close the session, which closes this queue) */
  constructor(maxQueuedBytes: number, send: (bytes: Buffer) => void) {
    this.#maxQueuedBytes = maxQueuedBytes;
    this.#send = send;
  }

  /** session credit left */
  get window(): number {
    return this.#window.available;
  }

  /** encoded bytes waiting for credit */
  get queuedBytes(): number {
    return this.#queuedBytes;
  }

  /** the peer's HELLO advertised its session window */
  open(peerSessionWindow: number): void {
    this.#window = new SendWindow(peerSessionWindow);
  }

  /** a session CREDIT frame; throws PROTO_ERR_WINDOW_OVERFLOW */
  grant(increment: number): void {
    this.#window.grant(increment, 'session');
    this.pump();
  }

  /** why `bytes` more may not wait for credit, or null */
  refuse(bytes: number): ProtocolError | null {
    if (this.#closed) return protoError('PROTO_ERR_SESSION_CLOSED');
    if (this.#queuedBytes > 0 && this.#queuedBytes + bytes > this.#maxQueuedBytes) {
      return protoError('PROTO_ERR_QUEUE_FULL', `${this.#queuedBytes} bytes already wait for credit (limit ${this.#maxQueuedBytes}); await each send`);
    }
    return null;
  }

  /** `q` queued `bytes` more */
  queued(q: IncomingQuery, bytes: number): void {
    this.#queuedBytes += bytes;
    this.#sendable.add(q);
    this.pump();
  }

  /** `q` dropped `bytes` it had queued (it closed) */
  dropped(q: IncomingQuery, bytes: number): void {
    if (this.#closed) return;
    this.#queuedBytes -= bytes;
    this.#sendable.delete(q);
  }

  /** `q` is gone */
  forget(q: IncomingQuery): void {
    this.#sendable.delete(q);
  }

  /** the session closed: nothing more is sent */
  close(): void {
    this.#closed = true;
    this.#sendable.clear();
    this.#queuedBytes = 0;
  }

  /** sends what credit allows, round robin: one frame per stream per pass */
  pump(): void {
    let progress = true;
    while (progress && this.#sendable.size > 0 && !this.#closed) {
      progress = false;
      for (const q of this.#sendable) {
        if (!q._hasQueued) {
          this.#sendable.delete(q);
          continue;
        }
        const p = q._takeSendable(this.#window);
        if (p === null) continue;
        this.#queuedBytes -= p.cost;
        this.#send(p.bytes);
        progress = true;
        if (!q._hasQueued) this.#sendable.delete(q);
        q._sent(p);
      }
    }
  }
}
