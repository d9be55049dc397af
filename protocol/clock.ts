/**
 * Time as the session sees it: injectable, so tests drive pings, timeouts and flood windows with
 * a manual clock instead of sleeping.
 */

export type TimerHandle = unknown;

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/** The real clock. Timers are unref'd: a session never keeps a process alive by itself. */
export const realClock: Clock = {
  now: () => performance.now(),
  setTimeout(fn, ms) {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout(handle) {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};

interface ManualTimer {
  id: number;
  at: number;
  fn: () => void;
}

/** A clock that moves only when told to. `advance(ms)` runs due timers in time order. */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #timers = new Map<number, ManualTimer>();

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = ++this.#seq;
    this.#timers.set(id, { id, at: this.#now + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(handle: TimerHandle): void {
    this.#timers.delete(handle as number);
  }

  /** timers waiting to fire */
  get pending(): number {
    return this.#timers.size;
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in order (including timers they set). */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      let next: ManualTimer | undefined;
      for (const t of this.#timers.values()) {
        if (t.at <= target && (next === undefined || t.at < next.at || (t.at === next.at && t.id < next.id))) next = t;
      }
      if (next === undefined) break;
      this.#timers.delete(next.id);
      this.#now = Math.max(this.#now, next.at);
      next.fn();
    }
    this.#now = target;
  }
}
