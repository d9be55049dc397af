/**
 * A paying organization's demo statement starts on the demo engine while its reservation is asked
 * of the store, instead of after it: the two take about the same time, on different threads (or
 * servers), so the answer comes that much sooner. Nothing else moves: the reservation (with the
 * fresh read of the connection's and key's revocation) still comes before any money is held, the
 * statement's rows are used only once it is granted as the statement would have run after it
 * (from the wallet, with the whole response cap), and the charge and audit event are still
 * committed before the answer. A statement whose reservation is refused, or granted otherwise
 * (a trial hold, a smaller egress cap), is stopped and its work thrown away; it is not charged
 * for it. See docs/scopes-and-queries.md ("Revocation").
 *
 * Only the demo backend starts early: its data is the same synthetic datasets for everyone, so a
 * statement that turns out not to be allowed to run has shown nobody anything and cost no
 * customer anything. A live target's statement (a customer's database, a relay, an API) never
 * starts before its reservation is granted.
 *
 * Which organizations start early: those whose last reservation in this process was granted from
 * the wallet with the whole response cap. An organization's first query, and the next after a
 * refusal (an empty wallet, a revoked connection or key) or a trial hold, waits for its
 * reservation as before, so an organization that cannot pay does not keep the engines busy. And
 * one statement of an organization at a time starts early: its others sent meanwhile wait for
 * their reservation, so a wallet that runs out under many statements at once puts one of them on
 * the engines, not all (each refused one is stopped there: a demo worker ended).
 */
import type { Reservation } from '../billing/index.js';
import type { Target } from '../catalogue/index.js';
import type { ReadQueryResult } from '../results/index.js';
import type { Backend, PreparedStatement, RunContext } from './backends.js';

/** Organizations remembered as paying; the oldest are forgotten first (they wait for their next reservation). */
export const EARLY_START_REMEMBERED = 10_000;

export class EarlyStarts {
  private readonly paying = new Set<string>();
  /** organizations with a statement started early whose reservation has not answered yet */
  private readonly starting = new Set<string>();

  constructor(private readonly remembered = EARLY_START_REMEMBERED) {}

  /**
   * Whether this organization's statement on `target` starts while its reservation is asked for:
   * it is paying, and none of its statements started early waits for its reservation now.
   */
  may(orgId: string, target: Target): boolean {
    return target.backend === 'demo' && this.paying.has(orgId) && !this.starting.has(orgId);
  }

  /** The organization's statement started early: its next ones wait for their reservation until `granted(…, true)`. */
  began(orgId: string): void {
    this.starting.add(orgId);
  }

  /**
   * What the organization's reservation answered: granted as an early start assumes (`fullBytes`:
   * the response cap), otherwise (another grant, or refused: `undefined`) it waits next time.
   * `early`: this query's statement was started early (`began`), and may now start another.
   */
  granted(orgId: string, reservation: Reservation | undefined, fullBytes: number, early = false): void {
    if (early) this.starting.delete(orgId);
    const asAssumed = reservation !== undefined && usableEarly(reservation, fullBytes);
    this.paying.delete(orgId);
    if (!asAssumed) return;
    this.paying.add(orgId);
    if (this.paying.size > this.remembered) {
      const oldest = this.paying.values().next();
      if (!oldest.done) this.paying.delete(oldest.value);
    }
  }

  /** how many organizations are remembered (tests) */
  get size(): number {
    return this.paying.size;
  }
}

/**
 * Whether a statement started early may be answered under this reservation: the wallet pays it
 * and its answer may use the whole response cap, exactly what it started with.
 */
export function usableEarly(reservation: Reservation, fullBytes: number): boolean {
  return reservation.payer === 'wallet' && reservation.paying && reservation.maxBytes >= fullBytes;
}

/** A statement started before its reservation was granted. */
export interface EarlyRun {
  /** when it started (`performance.now()`) */
  readonly began: number;
  /** settles once `Backend.run` has answered, whichever way (never rejects); stopped, it answers before the engine has let go of it */
  readonly outcome: Promise<void>;
  /** its rows, or its failure, as `Backend.run` answers them */
  result(): Promise<ReadQueryResult>;
  /** stops it at its source (its reservation was refused or granted otherwise) */
  stop(): void;
}

export function startEarly(backend: Backend, q: PreparedStatement, ctx: RunContext): EarlyRun {
  const stopper = new AbortController();
  const began = performance.now();
  const rows = backend.run(q, { ...ctx, signal: AbortSignal.any([ctx.signal, stopper.signal]) });
  return {
    began,
    outcome: rows.then(
      () => undefined,
      () => undefined,
    ),
    result: () => rows,
    stop: () => stopper.abort(),
  };
}
