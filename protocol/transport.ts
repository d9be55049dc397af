/**
 * The session's view of the connection: whole messages out and in, and a close. A WebSocket
 * adapter is a few lines (see protocol/README.md); `memoryTransportPair` links two sessions in
 * memory for tests.
 */

export interface Transport {
  /** send one message (the session sends exactly one frame per message) */
  send(bytes: Uint8Array): void;
  /** close the connection; `reason` is a PROTO_ERR_* code or a short text (at most 123 bytes) */
  close(code: number, reason: string): void;
  onMessage(cb: (bytes: Uint8Array) => void): void;
  /** called once, when the connection is closed by either side */
  onClose(cb: (code: number, reason: string) => void): void;
}

export interface MemoryTransport extends Transport {
  /** true: messages sent from this end are silently lost (a dead network) */
  drop: boolean;
  /** messages sent from this end so far */
  readonly sent: number;
  /** bytes sent from this end so far */
  readonly sentBytes: number;
  /** true once either end closed */
  readonly closed: boolean;
}

class MemoryEnd implements MemoryTransport {
  drop = false;
  sent = 0;
  sentBytes = 0;
  peer!: MemoryEnd;
  #closed = false;
  #dead = false;
  #onMessage: ((bytes: Uint8Array) => void)[] = [];
  #onClose: ((code: number, reason: string) => void)[] = [];

  get closed(): boolean {
    return this.#closed;
  }

  send(bytes: Uint8Array): void {
    if (this.#closed || this.drop) return;
    this.sent++;
    this.sentBytes += bytes.length;
    // a copy, as a network would make; delivered later, never re-entrantly
    const copy = Buffer.from(bytes);
    const peer = this.peer;
    queueMicrotask(() => peer.#deliver(copy));
  }

  #deliver(bytes: Uint8Array): void {
    if (this.#dead) return;
    for (const cb of this.#onMessage) cb(bytes);
  }

  close(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.peer.#closed = true;
    const peer = this.peer;
    // messages already in flight are delivered first, as TCP would
    queueMicrotask(() => {
      queueMicrotask(() => {
        this.#dead = true;
        peer.#dead = true;
        for (const cb of this.#onClose) cb(code, reason);
        for (const cb of peer.#onClose) cb(code, reason);
      });
    });
  }

  onMessage(cb: (bytes: Uint8Array) => void): void {
    this.#onMessage.push(cb);
  }

  onClose(cb: (code: number, reason: string) => void): void {
    this.#onClose.push(cb);
  }
}

/** Two linked in-memory transports: what one sends, the other receives (asynchronously, in order). */
export function memoryTransportPair(): [MemoryTransport, MemoryTransport] {
  const a = new MemoryEnd();
  const b = new MemoryEnd();
  a.peer = b;
  b.peer = a;
  return [a, b];
}
