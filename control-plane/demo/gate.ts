/**
 * Admission to the query engines, fair between organizations: at most `capacity` statements run
 * at once, at most `perTenant` of them for one organization, and waiting callers are served
 * round-robin across organizations. A wait never outlasts the caller's deadline. So one
 * organization flooding slow statements can hold part of the engine, never all of it.
 *
 * Trial work is a class of its own: all trial statements together hold at most `trialCapacity`
 * places, so a crowd of free signups cannot take the places paying organizations need (callers
 * also key trial work by client address, so many free organizations from one address are one
 * tenant here).
 */

export class GateError extends Error {
  readonly code: 'GATE_ERR_TIMEOUT' | 'GATE_ERR_ABORTED' | 'GATE_ERR_CLOSED';
  constructor(code: GateError['code'], message: string) {
    super(message);
    this.name = 'GateError';
    this.code = code;
  }
}

/** How many statements of a class were admitted at once, after waiting in the queue, or never (their wait timed out). */
export interface AdmissionCounts {
  atOnce: number;
  queued: number;
  timedOut: number;
}

/** What the gate has done since it started, by class (for /metrics and for tests). */
export interface GateAdmissions {
  readonly paid: AdmissionCounts;
  readonly trial: AdmissionCounts;
  /** the most trial statements ever running at once (never above trialCapacity) */
  readonly trialPeak: number;
  /** the places all trial statements together may hold */
  readonly trialCapacity: number;
}

interface Waiter {
  readonly tenant: string;
  readonly trial: boolean;
  grant: () => void;
  fail: (err: GateError) => void;
  timer: NodeJS.Timeout | undefined;
}

export class FairGate {
  private running = 0;
  private runningTrial = 0;
  private readonly runningBy = new Map<string, number>();
  private readonly queues = new Map<string, Waiter[]>();
  /** tenants with waiters, in the order they are served */
  private readonly rotation: string[] = [];
  private closed = false;
  private readonly counts = { paid: { atOnce: 0, queued: 0, timedOut: 0 }, trial: { atOnce: 0, queued: 0, timedOut: 0 } };
  private trialPeak = 0;
  readonly capacity: number;
  readonly perTenant: number;
  readonly trialCapacity: number;

  constructor(capacity: number, perTenant: number, trialCapacity = capacity) {
    this.capacity = Math.max(1, capacity);
    this.perTenant = Math.max(1, Math.min(perTenant, this.capacity));
    this.trialCapacity = Math.max(1, Math.min(trialCapacity, this.capacity));
  }

  /**
   * Wait for a place; resolves with its release function (call it exactly once). A wait ends
   * after `timeoutMs` (GATE_ERR_TIMEOUT), or at once when `signal` aborts (GATE_ERR_ABORTED: a
   * deadline or a revocation the caller keeps), and then holds no place in the queue.
   */
  acquire(tenant: string, timeoutMs: number, opts: { trial?: boolean; signal?: AbortSignal } = {}): Promise<() => void> {
    if (this.closed) return Promise.reject(new GateError('GATE_ERR_CLOSED', 'the engine is shutting down'));
    const trial = opts.trial === true;
    const signal = opts.signal;
    if (signal?.aborted) return Promise.reject(new GateError('GATE_ERR_ABORTED', 'the wait for the engine was stopped'));
    return new Promise((resolve, reject) => {
      // granted before pump() returns: a place was free for it the moment it asked
      let asking = true;
      const onAbort = (): void => {
        clearTimeout(waiter.timer);
        this.dequeue(waiter);
        reject(new GateError('GATE_ERR_ABORTED', 'the wait for the engine was stopped'));
      };
      const waiter: Waiter = {
        tenant,
        trial,
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          this.counts[trial ? 'trial' : 'paid'][asking ? 'atOnce' : 'queued']++;
          resolve(this.releaser(tenant, trial));
        },
        fail: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
        timer: undefined,
      };
      waiter.timer = setTimeout(() => {
        this.counts[trial ? 'trial' : 'paid'].timedOut++;
        this.dequeue(waiter);
        waiter.fail(new GateError('GATE_ERR_TIMEOUT', `waited ${timeoutMs} ms for the engine`));
      }, Math.max(0, timeoutMs));
      signal?.addEventListener('abort', onAbort, { once: true });
      const q = this.queues.get(tenant);
      if (q) q.push(waiter);
      else {
        this.queues.set(tenant, [waiter]);
        this.rotation.push(tenant);
      }
      this.pump();
      asking = false;
    });
  }

  /** admissions since the gate started, by class: at once, after a wait, or timed out; the trial class's peak */
  admissions(): GateAdmissions {
    return { paid: { ...this.counts.paid }, trial: { ...this.counts.trial }, trialPeak: this.trialPeak, trialCapacity: this.trialCapacity };
  }

  /** running and waiting counts, for tests and metrics */
  stats(): { running: number; waiting: number } {
    let waiting = 0;
    for (const q of this.queues.values()) waiting += q.length;
    return { running: this.running, waiting };
  }

  close(): void {
    this.closed = true;
    for (const q of this.queues.values()) {
      for (const w of q) {
        clearTimeout(w.timer);
        w.fail(new GateError('GATE_ERR_CLOSED', 'the engine is shutting down'));
      }
    }
    this.queues.clear();
    this.rotation.length = 0;
  }

  private releaser(tenant: string, trial: boolean): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running--;
      if (trial) this.runningTrial--;
      const n = (this.runningBy.get(tenant) ?? 1) - 1;
      if (n <= 0) this.runningBy.delete(tenant);
      else this.runningBy.set(tenant, n);
      this.pump();
    };
  }

  private dequeue(w: Waiter): void {
    const q = this.queues.get(w.tenant);
    if (!q) return;
    const i = q.indexOf(w);
    if (i >= 0) q.splice(i, 1);
    if (q.length === 0) this.forget(w.tenant);
  }

  private forget(tenant: string): void {
    this.queues.delete(tenant);
    const i = this.rotation.indexOf(tenant);
    if (i >= 0) this.rotation.splice(i, 1);
  }

  private pump(): void {
    let scanned = 0;
    while (this.running < this.capacity && this.rotation.length > 0 && scanned < this.rotation.length) {
      const tenant = this.rotation.shift() as string;
      const q = this.queues.get(tenant);
      if (!q || q.length === 0) {
        this.forget(tenant);
        continue;
      }
      if ((this.runningBy.get(tenant) ?? 0) >= this.perTenant || (q[0]?.trial === true && this.runningTrial >= this.trialCapacity)) {
        this.rotation.push(tenant); // its turn comes again when one of its statements ends
        scanned++;
        continue;
      }
      const w = q.shift() as Waiter;
      clearTimeout(w.timer);
      this.running++;
      if (w.trial) this.trialPeak = Math.max(this.trialPeak, ++this.runningTrial);
      this.runningBy.set(tenant, (this.runningBy.get(tenant) ?? 0) + 1);
      if (q.length === 0) this.queues.delete(tenant);
      else this.rotation.push(tenant);
      scanned = 0;
      w.grant();
    }
  }
}
