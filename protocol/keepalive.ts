/**
 * Session liveness and flood accounting (protocol/README.md, "Session lifecycle" step 3 and
 * "Limits and floods"): PING every interval, PONG bookkeeping and the round-trip time, the
 * dead-peer verdict, and the per-window count of control frames.
 */
import type { Clock, TimerHandle } from './clock.js';
import { protoError, type ProtocolError } from './errors.js';

export interface KeepaliveOptions {
  clock: Clock;
  /** 0 disables pings */
  intervalMs: number;
  maxMissedPongs: number;
  /** sends a PING with these 8 bytes */
  sendPing: (data: Buffer) => void;
  /** the peer missed `maxMissedPongs` pongs in a row */
  onDead: (err: ProtocolError) => void;
}

export class Keepalive {
  readonly #o: KeepaliveOptions;
  #timer: TimerHandle | null = null;
  #running = false;
  #pingSeq = 0;
  #pongSeq = 0;
  readonly #sentAt = new Map<number, number>();
  #missed = 0;
  #rtt: number | null = null;

  constructor(o: KeepaliveOptions) {
    this.#o = o;
  }

  get rttMs(): number | null {
    return this.#rtt;
  }

  start(): void {
    this.#running = true;
    this.#schedule();
  }

  stop(): void {
    this.#running = false;
    if (this.#timer !== null) this.#o.clock.clearTimeout(this.#timer);
    this.#timer = null;
  }

  /** a PONG arrived with these bytes */
  pong(data: Uint8Array): void {
    const seq = Buffer.from(data).readUInt32BE(4);
    if (seq > this.#pongSeq && seq <= this.#pingSeq) {
      this.#pongSeq = seq;
      this.#missed = 0;
      const at = this.#sentAt.get(seq);
      if (at !== undefined) this.#rtt = this.#o.clock.now() - at;
      for (const k of this.#sentAt.keys()) if (k <= seq) this.#sentAt.delete(k);
    }
  }

  #schedule(): void {
    if (this.#o.intervalMs === 0 || !this.#running) return;
    this.#timer = this.#o.clock.setTimeout(() => this.#tick(), this.#o.intervalMs);
  }

  #tick(): void {
    this.#timer = null;
    if (!this.#running) return;
    if (this.#pongSeq < this.#pingSeq) {
      this.#missed++;
      if (this.#missed >= this.#o.maxMissedPongs) {
        this.#o.onDead(protoError('PROTO_ERR_PEER_DEAD', `no pong for ${this.#missed} ping intervals of ${this.#o.intervalMs} ms`));
        return;
      }
    }
    const seq = ++this.#pingSeq;
    const data = Buffer.alloc(8);
    data.writeUInt32BE(seq, 4);
    this.#sentAt.set(seq, this.#o.clock.now());
    // keep the map small even if pongs never come
    if (this.#sentAt.size > this.#o.maxMissedPongs + 2) {
      const oldest = this.#sentAt.keys().next().value;
      if (oldest !== undefined) this.#sentAt.delete(oldest);
    }
    this.#o.sendPing(data);
    this.#schedule();
  }
}

/** counts control frames per window of time; the one past the limit throws PROTO_ERR_FLOOD */
export class FloodLimit {
  readonly #clock: Clock;
  readonly #max: number;
  readonly #windowMs: number;
  #start: number;
  #count = 0;

  constructor(clock: Clock, max: number, windowMs: number) {
    this.#clock = clock;
    this.#max = max;
    this.#windowMs = windowMs;
    this.#start = clock.now();
  }

  count(): void {
    const now = this.#clock.now();
    if (now - this.#start >= this.#windowMs) {
      this.#start = now;
      this.#count = 0;
    }
    if (++this.#count > this.#max) throw protoError('PROTO_ERR_FLOOD', `more than ${this.#max} control frames within ${this.#windowMs} ms`);
  }
}
