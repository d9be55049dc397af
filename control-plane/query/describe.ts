/**
 * `GET /v1/connections/{id}/schema`: the tables and columns a connection may read, listed by the
 * service itself (query/schema.ts says how each kind of source is read; never the agent's SQL).
 * Not billed; refused on a revoked or expired connection as a query is (410), stopped like a
 * running query when the connection is revoked meanwhile or when its agent closes its connection
 * before the answer (audited as `client_closed_request`, as a query is), and audited in the
 * connection's chain as a `schema` event (its outcome and the tables listed), whatever the outcome.
 */
import { appendPending, PendingEvent } from '../audit/index.js';
import { appendIfAnswerable } from '../billing/index.js';
import { parseScopes, type ParsedScopes, type Target } from '../catalogue/index.js';
import { assertUsable, getConnection } from '../connections/index.js';
import { ApiError, isApiError } from '../errors.js';
import { backendFor } from './backends.js';
import type { QueryDeps } from './engine.js';
import { clientClosed } from './errors.js';
import { stoppedError } from './running.js';
import type { SchemaTable } from './schema.js';

export interface SchemaResponse {
  readonly connection_id: string;
  readonly target_id: string;
  readonly tables: readonly SchemaTable[];
  /** scoped tables the source does not show (they do not exist, or the credential can read none of their columns) */
  readonly missing_tables: readonly string[];
  /** the source's catalog held more than one listing reads (102,400 columns, or the response's byte cap) */
  readonly truncated: boolean;
  readonly audit_event_id: string;
}

/**
 * A source's refusal of our own catalog statement is not the agent's error (there is no SQL of
 * theirs): the source cannot be described.
 */
function translate(err: unknown): ApiError {
  if (!isApiError(err)) return new ApiError('internal_error', 'listing the tables failed unexpectedly');
  if (err.code === 'invalid_sql' || err.code === 'scope_violation') {
    return new ApiError('service_unavailable', `the source could not list its tables: ${err.message}`, { ...(err.details ?? {}), reason: 'catalog_unreadable' });
  }
  return err;
}

export interface SchemaCaller {
  readonly keyId?: string;
  /** aborted when the agent closes its connection before the answer (routes/connections.ts): the listing stops at its source */
  readonly gone?: AbortSignal;
}

export async function describeSchema(deps: QueryDeps, orgId: string, connectionId: string, caller: SchemaCaller = {}): Promise<SchemaResponse> {
  const started = Date.now();
  // read fresh (not from the query path's cache): a revocation made anywhere answers 410 here
  const conn = await getConnection(deps.store, orgId, connectionId);
  const event = (fields: Record<string, unknown>): PendingEvent => new PendingEvent(conn.id, { type: 'schema', org_id: orgId, ...fields, duration_ms: Date.now() - started });
  const fail = async (err: unknown): Promise<never> => {
    const api = translate(err);
    const outcome = api.status === 410 || api.status === 429 ? 'refused' : 'error';
    const appended = await appendPending(deps.store, event({ outcome, error_code: api.code }));
    throw new ApiError(api.code, api.message, { ...(api.details ?? {}), audit_event_id: appended.id }, api.headers);
  };

  let target: Target;
  let scopes: ParsedScopes;
  try {
    assertUsable(conn);
    const t = deps.catalogue.target(conn.target_id);
    if (!t) throw new ApiError('internal_error', 'the connection names a target that no longer exists');
    target = t;
    scopes = parseScopes(target, conn.scopes);
  } catch (err) {
    return fail(err);
  }

  const relayId = scopes.relay;
  // from here revocation, expiry, the key's revocation or the relay's deletion stop the listing
  const running = deps.running.start(conn.id, { expiresAt: new Date(conn.expires_at), relayId, keyId: caller.keyId });
  try {
    let listing;
    try {
      if (caller.gone?.aborted) throw clientClosed();
      listing = await backendFor(deps.backends, target).describe(target, {
        orgId,
        connectionId: conn.id,
        scopes,
        limits: { timeoutMs: deps.limits.queryTimeoutMs, maxRows: deps.limits.maxRows, maxBytes: deps.limits.maxResultBytes },
        signal: caller.gone ? AbortSignal.any([running.signal, caller.gone]) : running.signal,
      });
    } catch (err) {
      // a revocation first; else the agent left (nobody to answer): stopped at its source
      return fail(running.reason() ?? (caller.gone?.aborted ? clientClosed() : err));
    }
    const stopped = running.reason();
    if (stopped) return fail(stopped);
    const names = listing.tables.map((t) => t.name);
    const ok = event({ outcome: 'ok', error_code: null, tables: names, column_count: listing.tables.reduce((n, t) => n + t.columns.length, 0), ...(listing.missing.length ? { missing_tables: listing.missing } : {}) });
    // under the connection's row lock: a revocation commits before this (410, nothing listed) or after it
    const done = await appendIfAnswerable(deps.store, { orgId, connectionId: conn.id, check: { keyId: caller.keyId, relayId }, event: ok });
    if (done.outcome !== 'ok') return fail(done.outcome === 'swept' ? new ApiError('internal_error', 'nothing to settle was swept') : stoppedError(conn.id, done.outcome, relayId));
    return {
      connection_id: conn.id,
      target_id: target.id,
      tables: listing.tables,
      missing_tables: listing.missing,
      truncated: listing.truncated,
      audit_event_id: ok.appended(done.row).id,
    };
  } finally {
    running.done();
  }
}
