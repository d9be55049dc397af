/**
 * The statements running in this process, per connection, so that revoking a connection (or its
 * TTL running out, or its relay being deleted) stops them at their source at once: each running
 * query holds an AbortController whose reason is the API error its caller is answered with.
 * Replicas do not see each other's registries; the query's settlement re-reads the connection
 * under a row lock, so a statement that finishes after a revocation elsewhere is refused too.
 */
import { ApiError } from '../errors.js';

export interface RunningQuery {
  readonly signal: AbortSignal;
  /** the error this query is answered with once aborted */
  reason(): ApiError | undefined;
  done(): void;
}

interface Entry {
  readonly controller: AbortController;
  readonly relayId: string | undefined;
  readonly timer: NodeJS.Timeout | undefined;
}

export class RunningQueries {
  private readonly byConnection = new Map<string, Set<Entry>>();

  /** Registers a query of `connectionId`; it is aborted at `expiresAt` (the connection's TTL). */
  start(connectionId: string, opts: { expiresAt: Date; relayId?: string | undefined }): RunningQuery {
    const controller = new AbortController();
    const ms = opts.expiresAt.getTime() - Date.now();
    const timer =
      ms < 2_147_483_647
        ? setTimeout(() => controller.abort(new ApiError('connection_expired', `connection ${connectionId} expired while the statement ran; it was stopped; open a new connection`)), Math.max(0, ms))
        : undefined;
    timer?.unref();
    const entry: Entry = { controller, relayId: opts.relayId, timer };
    let set = this.byConnection.get(connectionId);
    if (!set) this.byConnection.set(connectionId, (set = new Set()));
    set.add(entry);
    return {
      signal: controller.signal,
      reason: () => (controller.signal.aborted && controller.signal.reason instanceof ApiError ? controller.signal.reason : undefined),
      done: () => {
        if (timer) clearTimeout(timer);
        const s = this.byConnection.get(connectionId);
        s?.delete(entry);
        if (s && s.size === 0) this.byConnection.delete(connectionId);
      },
    };
  }

  /** Stops every running query of `connectionId`; returns how many. */
  revoke(connectionId: string): number {
    const set = this.byConnection.get(connectionId);
    if (!set) return 0;
    for (const e of set) e.controller.abort(new ApiError('connection_revoked', `connection ${connectionId} was revoked while the statement ran; it was stopped and nothing was returned; open a new connection`));
    return set.size;
  }

  /** Stops every running query through relay `relayId` (the relay was deleted). */
  relayDeleted(relayId: string): number {
    let n = 0;
    for (const set of this.byConnection.values()) {
      for (const e of set) {
        if (e.relayId !== relayId) continue;
        e.controller.abort(new ApiError('relay_unavailable', `relay ${relayId} was deleted while the statement ran; it was stopped`, { relay_id: relayId }));
        n++;
      }
    }
    return n;
  }

  /** Running queries of `connectionId` (tests, metrics). */
  count(connectionId: string): number {
    return this.byConnection.get(connectionId)?.size ?? 0;
  }
}
