/**
 * The query path: connection → parse, check, rewrite → admit (bill) → execute → settle → audit.
 * Every outcome, refused or not, is appended to the connection's audit chain; no row data is.
 */
import { appendPending, PendingEvent, sha256Hex, type AuditEvent } from '../audit/index.js';
import { centsFromNc, queryCostNc, ReserveRefused, reserve, settleQuery, type Reservation, type SettleMode } from '../billing/index.js';
import type { Catalogue, Interval, ParsedScopes, Target } from '../catalogue/index.js';
import { parseScopes } from '../catalogue/index.js';
import type { Limits } from '../config.js';
import { keyRevoked, type KeyCache } from '../accounts/index.js';
import { assertUsable, getConnection, type ConnectionCache } from '../connections/index.js';
import type { ColumnInfo, Row } from '../results/index.js';
import { ApiError, isApiError } from '../errors.js';
import type { Store } from '../store/index.js';
import type { Metrics } from '../metrics.js';
import { backendFor, type Backend, type Backends, type PreparedStatement, type RunContext } from './backends.js';
import { startEarly, usableEarly, type EarlyRun, type EarlyStarts } from './early-start.js';
import { clientClosed } from './errors.js';
import { stoppedError, type RunningQueries, type RunningQuery, type StopCause } from './running.js';

export interface QueryDeps {
  readonly store: Store;
  readonly catalogue: Catalogue;
  readonly limits: Limits;
  /** where statements run, by the catalogue's `backend` kind of their target */
  readonly backends: Backends;
  /** the app's cache of connections as queries read them */
  readonly connections: ConnectionCache;
  /** the app's cache of agent keys: a key found revoked here is forgotten there */
  readonly keys?: KeyCache;
  /** running statements per connection: revocation, expiry and relay deletion stop them */
  readonly running: RunningQueries;
  /** statement latency by backend (GET /metrics) */
  readonly metrics?: Metrics;
  /** which organizations' demo statements start while their reservation is asked for (none: every statement waits for it) */
  readonly earlyStarts?: EarlyStarts;
}

export interface ScopeApplied {
  readonly target_id: string;
  readonly scopes: readonly string[];
  readonly tables_allowed: readonly string[] | '*';
  readonly tables_read: readonly string[];
  /** per table read: the row predicate enforced beneath the statement, or null for every row */
  readonly row_filters: Readonly<Record<string, string | null>>;
  readonly periods: readonly Interval[];
  readonly limits: { readonly max_rows: number; readonly max_bytes: number; readonly timeout_ms: number };
}

export interface QueryResponse {
  readonly rows: readonly Row[];
  readonly columns: readonly { name: string; type_oid: number }[];
  readonly row_count: number;
  readonly truncated: boolean;
  /** why the rows stop early when it is not the response caps: `trial_egress` (the trial's egress allowance left) */
  readonly truncated_reason?: 'trial_egress';
  readonly cost_cents: number;
  readonly bytes_egressed: number;
  readonly billed_to: 'trial' | 'wallet';
  readonly audit_event_id: string;
  readonly scope_applied: ScopeApplied;
  readonly duration_ms: number;
}

/** Statements are kept in the audit trail up to this many characters, with the whole text's hash. */
export const AUDIT_SQL_MAX_CHARS = 4096;

/** `{name, name_sha256}` (and `name_truncated` when cut): the statement as audited. */
export function auditedSql(name: string, text: string): Record<string, unknown> {
  const out: Record<string, unknown> = { [name]: text.length > AUDIT_SQL_MAX_CHARS ? text.slice(0, AUDIT_SQL_MAX_CHARS) : text, [`${name}_sha256`]: sha256Hex(text) };
  if (text.length > AUDIT_SQL_MAX_CHARS) out[`${name}_truncated`] = true;
  return out;
}

function scopeApplied(target: Target, scopes: ParsedScopes, q: PreparedStatement, limits: Limits): ScopeApplied {
  return {
    target_id: target.id,
    scopes: scopes.normalized,
    tables_allowed: q.tablesAllowed,
    tables_read: q.tables,
    row_filters: q.rowFilters,
    periods: scopes.periods,
    limits: { max_rows: limits.maxRows, max_bytes: limits.maxResultBytes, timeout_ms: limits.queryTimeoutMs },
  };
}

/**
 * SQLSTATE classes a server answers with before a statement runs: 42 (syntax error or access
 * rule violation: unknown column, permission denied), 0A (feature not supported), 25 (invalid
 * transaction state: a write in a read-only transaction), 26 and 34 (invalid statement or cursor
 * name).
 */
const BEFORE_EXECUTION = /^(42|0A|25|26|34)/;
/**
 * SQLSTATE classes that are failures of the source itself, not of the statement: 08 (connection
 * exception), 40 (transaction rollback: deadlock, serialization), 53 (insufficient resources),
 * 57 (operator intervention: shutdown, cancel), 58 (system error), XX (internal error).
 */
const SOURCE_FAILURE = /^(08|40|53|57|58|XX)/;
/** a SQLSTATE of a standard class (a socket error's code such as EPIPE is five letters too) */
const SQLSTATE = /^(0[0-9A-Z]|[1-5][0-9A-Z]|72|F0|HV|P0|XX)[0-9A-Z]{3}$/;

function statementFailed(sqlstate: unknown): boolean {
  return typeof sqlstate === 'string' && SQLSTATE.test(sqlstate) && !BEFORE_EXECUTION.test(sqlstate) && !SOURCE_FAILURE.test(sqlstate);
}

/**
 * Whether a failed statement ran at its source (it used the engine or the database: a division
 * by zero after minutes of a join, a row or message too large, a value too large to build):
 * charged the query price with no egress, like a statement stopped at its deadline. What svc
 * refuses before running, what the server rejects before executing, and failures of the source
 * itself (unreachable, connection lost) are free.
 */
export function ranAtSource(err: unknown): boolean {
  if (!isApiError(err) || (err.code !== 'invalid_sql' && err.code !== 'scope_violation')) return false;
  const d = err.details ?? {};
  if (d['reason'] === 'row_too_large' || d['reason'] === 'message_too_large' || d['reason'] === 'out_of_memory' || d['reason'] === 'value_too_deep') return true;
  return statementFailed(d['sqlstate']);
}

/** Longest error message answered: a database may quote whole values in its errors (16 MiB were seen). */
const MAX_ERROR_MESSAGE = 2000;

function capMessage(message: string): string {
  if (message.length <= MAX_ERROR_MESSAGE) return message;
  let cut = message.slice(0, MAX_ERROR_MESSAGE);
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1); // never half a character
  return `${cut}… (${message.length - cut.length} more characters not shown)`;
}

/**
 * The organization's other running trial queries hold what is left of its trial egress, and this
 * answer's first row does not fit in the part this query could hold: not a row too large for a
 * response, so `429` (retry when they finish). The statement ran, so it is charged the query
 * price with no egress (otherwise one slow query kept running would make every other statement
 * with a large first row free).
 */
function trialEgressHeld(held: number, rowBytes: number | undefined): ApiError {
  return new ApiError(
    'rate_limited',
    `this answer's first row${rowBytes !== undefined ? ` (${rowBytes} bytes)` : ''} does not fit in the ${held} bytes of trial egress this query could hold: this organization's other running trial queries hold the rest of its trial egress allowance. The statement ran, so the query price was charged (no egress); retry when they finish (GET /v1/agent/account/usage shows trial.egress_bytes_held)`,
    { reason: 'trial_egress_held', held_bytes: held, ...(rowBytes !== undefined ? { row_bytes: rowBytes } : {}), retry_after_seconds: 1 },
    { 'Retry-After': '1' },
  );
}

/**
 * What the agent is answered: backends answer ApiError only (query/errors.ts maps their sources'
 * failures); anything else is a failure of ours, answered without its text.
 */
function translate(err: unknown): ApiError {
  return isApiError(err) ? err : new ApiError('internal_error', 'the query failed unexpectedly');
}

/** The agent key that sent the statement was found revoked in the store: forgotten by the app's key cache. */
function keyRevokedError(deps: QueryDeps, keyId: string | undefined): ApiError {
  if (keyId) deps.keys?.forget(keyId);
  return new ApiError('unauthorized', 'the agent key that sent this statement was revoked; nothing was run or charged', undefined, { 'WWW-Authenticate': 'Bearer error="invalid_token"' });
}

export interface QueryCaller {
  readonly address?: string;
  readonly keyId?: string;
  /** `keyId` was read from the app's key cache: its revocation is read from the store before anything runs */
  readonly keyCached?: boolean;
  /**
   * aborted when the agent closes its connection before the answer (routes/connections.ts): a
   * running statement is stopped at its source, audited as `client_closed_request` and charged
   * the query price (no egress), as at its deadline; one that had not started is not charged
   */
  readonly gone?: AbortSignal;
}

export async function runQuery(deps: QueryDeps, orgId: string, connectionId: string, sqlText: string, caller: QueryCaller = {}): Promise<QueryResponse> {
  const started = Date.now();
  // from this process's cache when known: its revocation is read fresh by the reservation, and
  // again before a refusal is answered
  const { row: conn, cached } = await deps.connections.forQuery(orgId, connectionId).catch(async (err: unknown) => {
    // not found (not audited): a key known from the cache and revoked meanwhile is answered 401 first
    if (caller.keyCached && caller.keyId && (await keyRevoked(deps.store, caller.keyId))) throw keyRevokedError(deps, caller.keyId);
    throw err;
  });
  const base = { type: 'query', org_id: orgId, ...auditedSql('sql', sqlText) };
  let relayId: string | undefined; // the connection's relay, once its scopes are parsed
  /**
   * Answers an error, audited. With `money`, the reservation is given back (`refund`) or charged
   * the query price with no egress (`charge`) in the same statement as the audit event, so no
   * money moves without its event. A charge or a refund is made under the connection's row lock:
   * if the connection was revoked or expired, its key revoked or its relay deleted meanwhile, the
   * statement is answered as stopped (410) and nothing is charged, as on the success path.
   */
  const fail = async (err: unknown, extra: Record<string, unknown> = {}, money?: { readonly reservation: Reservation; readonly kind: 'refund' | 'charge'; readonly stopped?: () => ApiError | undefined }): Promise<never> => {
    let api = translate(err);
    if (!money && cached && api.code !== 'connection_revoked' && api.code !== 'connection_expired') {
      // refused before anything was reserved, on a connection known from the cache: a revocation
      // made elsewhere answers first, as it would have from the store
      try {
        assertUsable(await getConnection(deps.store, orgId, connectionId));
      } catch (gone) {
        api = translate(gone);
      }
    }
    if (!money && caller.keyCached && caller.keyId && api.code !== 'unauthorized' && (await keyRevoked(deps.store, caller.keyId))) {
      // the same for a key known from the cache: a revoked key is answered 401 whatever its statement
      api = keyRevokedError(deps, caller.keyId);
    }
    let fields = extra;
    const pending = (): PendingEvent => {
      const outcome = typeof fields['outcome'] === 'string' ? fields['outcome'] : api.status === 402 || api.status === 403 || api.status === 410 || api.status === 429 || api.code === 'invalid_sql' ? 'refused' : 'error';
      return new PendingEvent(conn.id, { ...base, ...fields, outcome, error_code: api.code, duration_ms: Date.now() - started });
    };
    let event: AuditEvent | undefined;
    let charged: Record<string, unknown> = {};
    if (!money) event = await appendPending(deps.store, pending());
    else {
      const r = money.reservation;
      let mode: SettleMode = money.kind === 'charge' ? 'settle' : 'refund';
      const gone = money.kind === 'charge' ? money.stopped?.() : undefined;
      // a refund is checked too (unless already answered as stopped): a statement that failed in
      // a way not charged after a revocation made elsewhere (not yet seen here) answers 410 too
      let check = api.code !== 'connection_revoked';
      const stop = (why: ApiError): void => {
        api = why;
        fields = { ...extra, outcome: 'error' };
        mode = 'refund';
        check = false;
      };
      if (gone) stop(gone);
      while (!event) {
        if (mode !== 'refund') fields = { ...extra, cost_cents: mode === 'settle' ? centsFromNc(queryCostNc(0)) : 0, billed_to: r.payer };
        const ev = pending();
        const done = await settleQuery(deps.store, { mode, reservation: r, bytes: 0, connectionId: conn.id, check: check && mode !== 'none' ? checkFor : undefined, count: false, event: ev });
        if (done.outcome === 'ok') event = ev.appended(done.row);
        else if (done.outcome === 'swept') mode = 'none'; // given back already: audited with no charge
        else stop(await settledStop(done.outcome));
      }
      if (mode !== 'refund') charged = { cost_cents: fields['cost_cents'], billed_to: r.payer };
    }
    throw new ApiError(api.code, capMessage(api.message), { ...(api.details ?? {}), ...charged, audit_event_id: event.id }, api.headers);
  };
  /**
   * The answer of a statement its settlement refused: a connection revoked by its relay's
   * deletion (connections/index.ts revokeRelayConnections) says so, as the replica that deleted
   * the relay answers its statements.
   */
  const settledStop = async (outcome: StopCause): Promise<ApiError> => {
    if (outcome === 'revoked' && relayId) {
      const now = await getConnection(deps.store, orgId, connectionId).catch(() => undefined);
      if (now?.revoked_reason === 'relay_deleted') return stoppedError(conn.id, 'relay_deleted', relayId);
    }
    return stoppedError(conn.id, outcome, relayId);
  };
  // what settlement checks under the connection's row lock: the key that sent it, the relay it runs on
  const checkFor = { keyId: caller.keyId, get relayId() { return relayId; } };

  let target: Target | undefined;
  let scopes: ParsedScopes;
  let backend: Backend;
  let checked: PreparedStatement;
  try {
    assertUsable(conn);
    // the cheapest limit first: nothing is parsed beyond it
    const bytes = Buffer.byteLength(sqlText, 'utf8');
    if (bytes > deps.limits.maxStatementBytes) {
      throw new ApiError('invalid_sql', `the statement is ${bytes} bytes, over the limit of ${deps.limits.maxStatementBytes}; split it into smaller queries`, {
        reason: 'too_complex',
        statement_bytes: bytes,
        max_statement_bytes: deps.limits.maxStatementBytes,
      });
    }
    target = deps.catalogue.target(conn.target_id);
    if (!target) throw new ApiError('internal_error', 'the connection names a target that no longer exists');
    scopes = parseScopes(target, conn.scopes);
    relayId = scopes.relay;
    backend = backendFor(deps.backends, target);
    checked = await backend.prepare(sqlText, scopes, target, { tenant: orgId });
  } catch (err) {
    return fail(err);
  }

  const applied = scopeApplied(target, scopes, checked, deps.limits);
  const runContext = (running: RunningQuery, maxBytes: number, trial: boolean): RunContext => ({
    orgId,
    connectionId: conn.id,
    scopes,
    limits: { timeoutMs: deps.limits.queryTimeoutMs, maxRows: deps.limits.maxRows, maxBytes },
    signal: caller.gone ? AbortSignal.any([running.signal, caller.gone]) : running.signal,
    trial,
    address: caller.address,
    onStart: () => (reached = true),
  });
  let reached = false; // the statement reached its source (a demo engine admitted it)
  // a paying organization's demo statement starts while its reservation is asked for (early-start.ts);
  // from its start it can be stopped by revocation, expiry or relay deletion
  let running: RunningQuery | undefined;
  let early: EarlyRun | undefined;
  if (deps.earlyStarts?.may(orgId, target) && !caller.gone?.aborted) {
    running = deps.running.start(conn.id, { expiresAt: new Date(conn.expires_at), relayId: scopes.relay, keyId: caller.keyId });
    early = startEarly(backend, checked, runContext(running, deps.limits.maxResultBytes, false));
    deps.earlyStarts.began(orgId);
  }
  /**
   * the statement started early is not used: stopped, and its answer waited for. A stopped
   * statement answers at once, as one a revocation stops: the engine lets go of it a moment
   * later (the worker running it ended, or its wait for one given up), possibly after this query's answer
   */
  const dropEarly = async (): Promise<void> => {
    if (!early) return;
    const dropped = early;
    early = undefined;
    dropped.stop();
    await dropped.outcome;
  };
  let reservation: Reservation;
  try {
    reservation = await reserve(deps.store, orgId, deps.limits.maxResultBytes, { waitMs: deps.limits.queryTimeoutMs, connectionId: conn.id, keyId: caller.keyId });
  } catch (err) {
    deps.earlyStarts?.granted(orgId, undefined, deps.limits.maxResultBytes, early !== undefined);
    await dropEarly();
    running?.done();
    if (err instanceof ReserveRefused) {
      // revoked since this process cached it (or by another replica): answered as from the store
      if (err.what === 'key') return fail(keyRevokedError(deps, caller.keyId), { tables: checked.tables });
      try {
        assertUsable(await getConnection(deps.store, orgId, connectionId));
      } catch (gone) {
        return fail(gone, { tables: checked.tables });
      }
    }
    return fail(err, { tables: checked.tables });
  }

  deps.earlyStarts?.granted(orgId, reservation, deps.limits.maxResultBytes, early !== undefined);
  // from here the statement can be stopped by revocation, expiry or relay deletion
  const live = running ?? deps.running.start(conn.id, { expiresAt: new Date(conn.expires_at), relayId: scopes.relay, keyId: caller.keyId });
  // started early as if paid from the wallet with the whole response cap: used only when granted so
  if (early && !usableEarly(reservation, deps.limits.maxResultBytes)) {
    await dropEarly();
    reached = false;
  }
  try {
    const stopped = (): ApiError | undefined => live.reason();
    // what a failure after this point is audited with, and how its reservation ends
    const ran = { tables: checked.tables, ...auditedSql('sql_executed', checked.sql) };
    const charge = { reservation, kind: 'charge' as const, stopped };
    const giveBack = { reservation, kind: 'refund' as const };
    let result;
    let began = 0;
    const measured = (outcome: 'ok' | 'error'): void => {
      if (began > 0) deps.metrics?.querySeconds.observe({ backend: target.backend, outcome }, (performance.now() - began) / 1000);
    };
    // gone before it ran (one started early has seen its signal: answered below as it ended)
    if (caller.gone?.aborted && !early) return fail(stopped() ?? clientClosed(), { ...ran, outcome: 'error' }, giveBack);
    try {
      if (early) {
        const used = early;
        early = undefined;
        began = used.began;
        result = await used.result();
        // it ended before its agent left, which was before its reservation answered: nobody takes
        // its rows; it ran, so answered as if its agent left while it ran (the query price, no egress)
        if (caller.gone?.aborted) throw clientClosed();
      } else {
        if (stopped()) throw stopped();
        began = performance.now();
        result = await backend.run(checked, runContext(live, reservation.maxBytes, !reservation.paying));
      }
      measured('ok');
    } catch (err) {
      measured('error');
      const why = stopped();
      if (why) {
        // revoked, expired or its relay deleted while it ran: nothing is returned or charged
        return fail(why, { ...ran, outcome: 'error' }, giveBack);
      }
      // the agent left while it ran: stopped at its source and charged the query price, no
      // egress, as at its deadline (else leaving just before the deadline would make any
      // statement free, and a trial's statements unlimited); while it still waited for an
      // engine, nothing ran: not charged, as a wait that reaches its deadline
      if (caller.gone?.aborted) return fail(clientClosed(), { ...ran, outcome: 'error' }, reached ? charge : giveBack);
      const rowTooLarge = isApiError(err) && err.code === 'invalid_sql' && err.details?.['reason'] === 'row_too_large';
      const rowBytes = rowTooLarge && typeof err.details?.['row_bytes'] === 'number' ? err.details['row_bytes'] : undefined;
      if (rowTooLarge && reservation.maxBytes < deps.limits.maxResultBytes && (rowBytes === undefined || rowBytes <= deps.limits.maxResultBytes)) {
        // the row fits a response, only not the trial egress this query could hold beside its
        // organization's others: 429, and it ran, so charged the query price
        return fail(trialEgressHeld(reservation.maxBytes, rowBytes), ran, charge);
      }
      if ((isApiError(err) && err.code === 'query_timeout') || ranAtSource(err)) {
        // it held an engine or the database until its deadline, or ran there before it failed:
        // charged the query price, no egress
        return fail(err, ran, charge);
      }
      return fail(err, ran, giveBack);
    }

    // stopped after its rows arrived: the connection's state decides, under its row lock, below

    // cut short by what is left of the trial's egress allowance, not by the response caps
    const trialCut = result.truncated && reservation.maxBytes < deps.limits.maxResultBytes && result.rows.length < deps.limits.maxRows;
    if (result.truncated && result.rows.length === 0) {
      // not even the first row fitted: a trial hold too small beside the organization's other
      // queries (429, retry), or a row too large for any response (400); it ran: charged either
      // way (unless it was stopped meanwhile)
      if (trialCut) return fail(trialEgressHeld(reservation.maxBytes, undefined), ran, charge);
      return fail(
        new ApiError(
          'invalid_sql',
          `the first row of the result is larger than the ${reservation.maxBytes} bytes a response may hold; select fewer or shorter columns (e.g. left(column, 1000)) or filter the rows`,
          { reason: 'row_too_large', max_bytes: reservation.maxBytes },
        ),
        ran,
        charge,
      );
    }
    // one statement: the connection row is locked, so a revocation commits either before this (and
    // the result is refused) or after it (and this query is in the chain before connection.revoked)
    let mode: SettleMode = 'settle';
    let event: AuditEvent | undefined;
    let costNc = 0;
    while (!event) {
      const gone = stopped();
      if (gone) return fail(gone, { ...ran, outcome: 'error' }, giveBack);
      costNc = mode === 'settle' ? queryCostNc(result.bytes) : 0;
      const ev = new PendingEvent(conn.id, {
        ...base,
        outcome: 'ok',
        error_code: null,
        ...auditedSql('sql_executed', checked.sql),
        tables: checked.tables,
        row_filters: applied.row_filters,
        row_count: result.rows.length,
        truncated: result.truncated,
        ...(trialCut ? { truncated_reason: 'trial_egress' } : {}),
        bytes_egressed: result.bytes,
        cost_cents: centsFromNc(costNc),
        billed_to: reservation.payer,
        duration_ms: Date.now() - started,
      });
      const done = await settleQuery(deps.store, { mode, reservation, bytes: result.bytes, connectionId: conn.id, check: checkFor, count: true, event: ev });
      if (done.outcome === 'ok') event = ev.appended(done.row);
      else if (done.outcome === 'swept') mode = 'none'; // given back already (a sweep): answered, not charged
      else return fail(await settledStop(done.outcome), { ...ran, outcome: 'error' }, giveBack);
    }

    return {
      rows: result.rows,
      columns: result.columns.map((c: ColumnInfo) => ({ name: c.name, type_oid: c.type_oid })),
      row_count: result.rows.length,
      truncated: result.truncated,
      ...(trialCut ? { truncated_reason: 'trial_egress' as const } : {}),
      cost_cents: centsFromNc(costNc),
      bytes_egressed: result.bytes,
      billed_to: reservation.payer,
      audit_event_id: event.id,
      scope_applied: applied,
      duration_ms: Date.now() - started,
    };
  } finally {
    // answered (rows or an error): a revoke that stopped it may answer now
    live.done();
  }
}
