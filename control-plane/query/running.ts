/**
 * The statements running in this process, per connection, so that revoking a connection (or its
 * TTL running out, the agent key's revocation, or its relay being deleted) stops them at their
 * source at once: each running query holds an AbortController whose reason is the API error its
 * caller is answered with (`410 connection_revoked`, `details.cause` saying why).
 *
 * Revocations made elsewhere (another replica sharing the store, or the dashboard revoking an
 * agent key in the store) are seen by a watcher that, while statements run here, reads the store
 * for revoked connections, keys and relays among them every {@link WATCH_INTERVAL_MS}. Besides,
 * a query's settlement re-reads its connection, key and relay under the connection's row lock, so
 * a statement that finishes after any revocation is refused there too.
 *
 * An entry lives until the query's answer is produced (`done()`), so `revoke()` can wait for the
 * connection's queries to finish: once the revoke route answers, none of them answers later with
 * rows.
 */
import { ApiError } from '../errors.js';
import type { Sql } from '../store/index.js';

export type StopCause = 'revoked' | 'expired' | 'key_revoked' | 'relay_deleted';

/** How often the store is read for revocations made elsewhere, while statements run here. */
export const WATCH_INTERVAL_MS = 500;

/** The longest `revoke()` waits for the stopped queries to answer (they are stopped, so it is short). */
const SETTLE_WAIT_MS = 5_000;

/** The answer (and audit `error_code`) of a statement stopped because its connection can no longer be used. */
export function stoppedError(connectionId: string, cause: StopCause, relayId?: string): ApiError {
  const why: Record<StopCause, string> = {
    revoked: `connection ${connectionId} was revoked while the statement ran`,
    expired: `connection ${connectionId} expired (its ttl_seconds ran out) while the statement ran`,
    key_revoked: `the agent key that sent this statement was revoked while it ran`,
    relay_deleted: `relay ${relayId ?? ''} of connection ${connectionId} was deleted while the statement ran`,
  };
  return new ApiError('connection_revoked', `${why[cause]}; it was stopped at its source and nothing was returned or charged; open a new connection`, {
    cause,
    ...(relayId && cause === 'relay_deleted' ? { relay_id: relayId } : {}),
  });
}

export interface RunningQuery {
  readonly signal: AbortSignal;
  /** the error this query is answered with once stopped */
  reason(): ApiError | undefined;
  /** the query has produced its answer: it can no longer be stopped */
  done(): void;
}

interface Entry {
  readonly connectionId: string;
  readonly controller: AbortController;
  readonly relayId: string | undefined;
  readonly keyId: string | undefined;
  readonly timer: NodeJS.Timeout | undefined;
  readonly finished: Promise<void>;
  finish(): void;
}

export class RunningQueries {
  private readonly byConnection = new Map<string, Set<Entry>>();
  private watchTimer: NodeJS.Timeout | undefined;
  private watching = false;
  private closed = false;
  /**
   * Connections, keys and relays revoked in this process (or seen revoked by the watcher), so a
   * query that passed its checks before the revocation and registers after it (it waited for
   * its reservation) is stopped before it starts; bounded, oldest forgotten first (the settlement
   * still refuses such a query).
   */
  private readonly revoked = new Map<string, (e: Entry) => ApiError>();
  static readonly REMEMBERED = 10_000;

  /**
   * @param store read for revocations made elsewhere while statements run (none: this process's
   *   own revocations only)
   */
  constructor(private readonly store?: Sql) {}

  /** Registers a query of `connectionId`; it is stopped at `expiresAt` (the connection's TTL). */
  start(connectionId: string, opts: { expiresAt: Date; relayId?: string | undefined; keyId?: string | undefined }): RunningQuery {
    const controller = new AbortController();
    const ms = opts.expiresAt.getTime() - Date.now();
    const timer = ms < 2_147_483_647 ? setTimeout(() => controller.abort(stoppedError(connectionId, 'expired')), Math.max(0, ms)) : undefined;
    timer?.unref();
    let finish = (): void => undefined;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const entry: Entry = { connectionId, controller, relayId: opts.relayId, keyId: opts.keyId, timer, finished, finish };
    let set = this.byConnection.get(connectionId);
    if (!set) this.byConnection.set(connectionId, (set = new Set()));
    set.add(entry);
    // the relay's deletion first: it revokes its connections too (the watcher remembers both), and is the cause to answer
    const known =
      (opts.relayId ? this.revoked.get(`r:${opts.relayId}`) : undefined) ?? this.revoked.get(`c:${connectionId}`) ?? (opts.keyId ? this.revoked.get(`k:${opts.keyId}`) : undefined);
    if (known) controller.abort(known(entry));
    this.watch();
    let ended = false;
    return {
      signal: controller.signal,
      reason: () => (controller.signal.aborted && controller.signal.reason instanceof ApiError ? controller.signal.reason : undefined),
      done: () => {
        if (ended) return;
        ended = true;
        if (timer) clearTimeout(timer);
        const s = this.byConnection.get(connectionId);
        s?.delete(entry);
        if (s && s.size === 0) this.byConnection.delete(connectionId);
        entry.finish();
      },
    };
  }

  /** Stops every running query of `connectionId` and waits (briefly) until they have answered; returns how many. */
  async revoke(connectionId: string): Promise<number> {
    const error = (e: Entry): ApiError => stoppedError(e.connectionId, 'revoked');
    this.remember(`c:${connectionId}`, error);
    return this.stop([...(this.byConnection.get(connectionId) ?? [])], error);
  }

  /** Stops every running query through relay `relayId` (the relay was deleted). */
  async relayDeleted(relayId: string): Promise<number> {
    const error = (e: Entry): ApiError => stoppedError(e.connectionId, 'relay_deleted', relayId);
    this.remember(`r:${relayId}`, error);
    return this.stop(this.entries((e) => e.relayId === relayId), error);
  }

  /** Stops every running query sent with agent key `keyId` (the key was revoked). */
  async keyRevoked(keyId: string): Promise<number> {
    const error = (e: Entry): ApiError => stoppedError(e.connectionId, 'key_revoked');
    this.remember(`k:${keyId}`, error);
    return this.stop(this.entries((e) => e.keyId === keyId), error);
  }

  /** Running queries of `connectionId` (tests, metrics). */
  count(connectionId: string): number {
    return this.byConnection.get(connectionId)?.size ?? 0;
  }

  /** Stops the watcher (shutdown). */
  close(): void {
    this.closed = true;
    if (this.watchTimer) clearTimeout(this.watchTimer);
    this.watchTimer = undefined;
  }

  private remember(key: string, error: (e: Entry) => ApiError): void {
    this.revoked.delete(key);
    this.revoked.set(key, error);
    if (this.revoked.size > RunningQueries.REMEMBERED) {
      const oldest = this.revoked.keys().next();
      if (!oldest.done) this.revoked.delete(oldest.value);
    }
  }

  private entries(match: (e: Entry) => boolean): Entry[] {
    const out: Entry[] = [];
    for (const set of this.byConnection.values()) for (const e of set) if (match(e)) out.push(e);
    return out;
  }

  private async stop(entries: readonly Entry[], error: (e: Entry) => ApiError): Promise<number> {
    for (const e of entries) if (!e.controller.signal.aborted) e.controller.abort(error(e));
    if (entries.length === 0) return 0;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, SETTLE_WAIT_MS)));
    await Promise.race([Promise.all(entries.map((e) => e.finished)), bound]);
    clearTimeout(timer);
    return entries.length;
  }

  /** While statements run, read the store for revocations made elsewhere. */
  private watch(): void {
    if (!this.store || this.watchTimer || this.watching || this.closed) return;
    this.watchTimer = setTimeout(() => void this.poll(), WATCH_INTERVAL_MS);
    this.watchTimer.unref();
  }

  private async poll(): Promise<void> {
    this.watchTimer = undefined;
    const store = this.store;
    if (!store || this.byConnection.size === 0) return;
    const all = this.entries(() => true);
    const ids = (pick: (e: Entry) => string | undefined): string => JSON.stringify([...new Set(all.map(pick).filter((x): x is string => x !== undefined))]);
    this.watching = true;
    try {
      const rows = await store.query<{ kind: 'c' | 'k' | 'r'; id: string }>(
        `SELECT 'c' AS kind, id FROM connections WHERE revoked_at IS NOT NULL AND id IN (SELECT jsonb_array_elements_text($1::jsonb))
         UNION ALL SELECT 'k', id FROM agent_keys WHERE revoked_at IS NOT NULL AND id IN (SELECT jsonb_array_elements_text($2::jsonb))
         UNION ALL SELECT 'r', id FROM relays WHERE revoked_at IS NOT NULL AND id IN (SELECT jsonb_array_elements_text($3::jsonb))`,
        [ids((e) => e.connectionId), ids((e) => e.keyId), ids((e) => e.relayId)],
      );
      // deleted relays first: their connections are revoked with them, and their statements
      // answer with the cause relay_deleted (the first stop of a statement decides its answer)
      rows.sort((x, y) => Number(y.kind === 'r') - Number(x.kind === 'r'));
      for (const r of rows) {
        if (r.kind === 'c') void this.revoke(r.id);
        else if (r.kind === 'k') void this.keyRevoked(r.id);
        else void this.relayDeleted(r.id);
      }
    } catch {
      // the store is unreachable right now: the settlement's own check still refuses these queries
    } finally {
      this.watching = false;
      if (this.byConnection.size > 0) this.watch();
    }
  }
}
