/**
 * Queries on `postgres-relay` connections: the same checked and rewritten statement, sent over
 * the relay's live tunnel as one stream; rows are capped while they arrive (the stream is
 * cancelled at the cap, so the relay stops reading too), and the deadline cancels it at the
 * customer's database.
 */
import { ProtocolError, type QueryStream } from '../../protocol/index.js';
import { lackingRelayFeatures, RelayStreamError } from '../../protocol/relay-contract.js';
import { isValueTooDeep, RowCollector, uniqueColumnNames, valueTooDeep, type ColumnInfo, type ReadQueryResult } from '../results/index.js';
import { ApiError, isApiError } from '../errors.js';
import { statementRejected } from './errors.js';
import type { ParsedScopes } from '../catalogue/index.js';
import { isSystemSchema, pgSqlName } from '../catalogue/scopes.js';
import { quoteIdent, quoteLiteral } from './sql/quote.js';
import type { TunnelRegistry } from '../tunnel/index.js';
import type { RelayForwarder } from '../tunnel/forward.js';
import type { ScopedTable, SqlPolicy } from './sql/index.js';
import { catalogLimits, postgresCatalogSql, postgresListing, type PostgresScopedTable, type SchemaListing } from './schema.js';

/**
 * The policy of a PostgreSQL database target (`postgres-relay` and `postgres`): `read:<table>`
 * means `public.<table>`; the agent may write either form of a scoped table (`orders` or
 * `public.orders`; an unqualified name is `public.<name>` when that is scoped, else the one scoped
 * table of that name), and
 * both read the scope's own `"schema"."table"`. `filter:<schema>.<table>.<column>=<value>` (or
 * `filter:<table>.<column>=<value>`): rows of that table whose column equals the value. Names
 * are PostgreSQL's: folded to lower case unless double-quoted in the scope (`read:public."Sales"`,
 * which the agent writes `"Sales"` or `public."Sales"` in SQL). A scope
 * naming a system schema never becomes a readable table (refused at creation; the resolver
 * refuses system schemas again at query time, before it looks at the allowed tables).
 */
export function relayPolicy(scopes: ParsedScopes): SqlPolicy {
  if (scopes.read === 'all') throw new ApiError('invalid_scope', 'a relay connection names its tables: read:<schema>.<table> (read:* is not available on relays)');
  const allowed = new Map<string, ScopedTable>();
  const byName = new Map<string, number>();
  const tables = [...new Set([...scopes.read].map((t) => (t.includes('.') ? t : `public.${t}`)))].filter((t) => !isSystemSchema('postgres', t.split('.')[0] as string));
  for (const t of tables) byName.set(t.split('.')[1] as string, (byName.get(t.split('.')[1] as string) ?? 0) + 1);
  for (const qualified of tables) {
    const [schema, table] = qualified.split('.') as [string, string];
    const filters = scopes.filters
      .filter((f) => (f.table.includes('.') ? f.table : `public.${f.table}`) === qualified)
      .map((f) => `${quoteIdent(f.column)} = ${quoteLiteral(f.value)}`);
    // (named as SQL spells it: public.orders, public."Sales")
    const entry: ScopedTable = { name: pgSqlName([schema, table]), schema, table, predicate: filters.length ? filters.join(' AND ') : null };
    allowed.set(qualified, entry);
    // an unqualified name is public.<table>, as in the scopes; else the one scoped table of that name
    if (schema === 'public' || (byName.get(table) === 1 && !tables.includes(`public.${table}`))) allowed.set(table, entry);
  }
  // the customer's database: svc does not know its tables, so none is ever said to be missing
  return { allowed, known: null, schemas: [] };
}

/**
 * The tables of a PostgreSQL database target's scopes (`postgres-relay`, `postgres`), once each
 * however they are written (`orders` and `public.orders` are one table), as the policy reads them.
 */
export function postgresScopedTables(scopes: ParsedScopes): PostgresScopedTable[] {
  const seen = new Map<string, PostgresScopedTable>();
  for (const t of relayPolicy(scopes).allowed.values()) if (!seen.has(t.name)) seen.set(t.name, { name: t.name, schema: t.schema, table: t.table, filtered: t.predicate !== null });
  return [...seen.values()];
}

/**
 * A `postgres-relay` connection's tables, from the customer database's catalog: the control
 * plane's own catalog statement, sent over the relay's tunnel like any statement (the relay runs
 * it read-only under its own ceiling). Fails as a query does: `503 relay_unavailable` when the
 * relay has no live tunnel or cannot reach its database.
 */
export async function describeOnRelay(
  tunnels: TunnelRegistry,
  ctx: { readonly connectionId: string; readonly scopes: ParsedScopes; readonly limits: { readonly timeoutMs: number; readonly maxBytes: number }; readonly signal: AbortSignal },
  forward?: RelayForwarder,
): Promise<SchemaListing> {
  const tables = postgresScopedTables(ctx.scopes);
  if (tables.length === 0) return { tables: [], missing: [], truncated: false };
  const result = await runOnRelay(tunnels, ctx.scopes.relay as string, postgresCatalogSql(tables), catalogLimits(ctx.limits), {
    signal: ctx.signal,
    ...(forward ? { forward: { via: forward, connectionId: ctx.connectionId } } : {}),
  });
  return postgresListing(result, tables);
}

export interface RelayRunOptions {
  /** stops the statement (revoked, expired, the relay deleted, the agent gone, a shutdown) */
  readonly signal?: AbortSignal | undefined;
  /** reaches a tunnel another replica holds (none: this replica's tunnels only) */
  readonly forward?: { readonly via: RelayForwarder; readonly connectionId: string } | undefined;
  /**
   * called once, when the statement is sent to the relay (on this replica's tunnel, or on the
   * holder's as it says): not before, so a statement refused or unsent (no tunnel, an outdated
   * relay, a holder that refuses it) never counts as started, whatever its caller does meanwhile
   */
  readonly onStart?: (() => void) | undefined;
}

/**
 * Runs the statement on the relay's tunnel: the one held by this replica, else (with `forward`)
 * the one another replica sharing the store holds, through that replica (tunnel/forward.ts).
 */
export async function runOnRelay(
  tunnels: TunnelRegistry,
  relayId: string,
  sql: string,
  limits: { timeoutMs: number; maxRows: number; maxBytes: number },
  o: RelayRunOptions = {},
): Promise<ReadQueryResult> {
  const { signal, forward, onStart } = o;
  const live = tunnels.get(relayId);
  if (!live) {
    const holder = await forward?.via.holder(relayId);
    if (holder === 'deleted') {
      // deleted through any replica: answered as the replica that deleted it answers
      throw new ApiError('connection_revoked', `relay ${relayId} of this connection was deleted; nothing was run or charged; open a new connection`, { cause: 'relay_deleted', relay_id: relayId });
    }
    if (forward && holder) {
      return forward.via.run(holder, { relay_id: relayId, connection_id: forward.connectionId, sql, limits }, signal, onStart).catch((err: unknown) => {
        throw signal?.aborted && isApiError(signal.reason) ? signal.reason : err;
      });
    }
    // a relay whose replica died reconnects within seconds: worth retrying soon
    throw new ApiError('relay_unavailable', `relay ${relayId} has no live tunnel: is svc-relay running and able to reach the control plane?`, { relay_id: relayId, retry_after_seconds: 2 }, { 'Retry-After': '2' });
  }
  const lacking = lackingRelayFeatures(live.session.negotiated?.features ?? []);
  if (lacking.length > 0) {
    // an older svc-relay: it does not pin search_path, so a customer's function named like the
    // catalog's could run for the agent; it is told nothing, and nothing is run or charged
    throw new ApiError(
      'relay_unavailable',
      `relay ${relayId} (${live.version ?? 'unknown version'}) does not pin search_path to pg_catalog, which svc requires of every relay (without it a function or operator of your database named like PostgreSQL's own could run for the agent); upgrade svc-relay on its machine and restart it. Nothing was run or charged`,
      { relay_id: relayId, reason: 'relay_outdated', relay_version: live.version, lacking },
    );
  }
  // stopped before it was sent (the asking replica or the agent gone, a revocation, the shutdown):
  // never sent, so never started
  if (signal?.aborted) throw isApiError(signal.reason) ? signal.reason : new ApiError('relay_unavailable', `the statement was stopped before it was sent to relay ${relayId}; nothing ran`, { relay_id: relayId });
  let stream: QueryStream;
  try {
    stream = live.session.openStream({ statement: sql, limits: { maxRows: limits.maxRows + 1, maxBytes: limits.maxBytes }, timeoutMs: limits.timeoutMs });
  } catch (err) {
    if (err instanceof ProtocolError && err.code === 'PROTO_ERR_STREAM_LIMIT') {
      // the tunnel is open but the relay takes no more statements at once (its HELLO's
      // maxConcurrentStreams): busy, as when its database connections are; never sent, not charged
      const max = live.session.negotiated?.peer.maxConcurrentStreams;
      throw new ApiError(
        'service_unavailable',
        `relay ${relayId} is already running ${max ?? 'as many'} statement${max === 1 ? '' : 's'} at once, the most its tunnel takes; nothing was run or charged; retry shortly, or run fewer statements at once through this relay`,
        { relay_id: relayId, reason: 'relay_busy', retry_after_seconds: 1 },
        { 'Retry-After': '1' },
      );
    }
    throw new ApiError('relay_unavailable', `relay ${relayId}'s tunnel is closing; retry shortly`, { relay_id: relayId });
  }
  onStart?.(); // sent: the relay runs it (once one of its database connections is free)
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    stream.cancel('deadline');
  }, limits.timeoutMs + 1000);
  // revoked, expired or the relay deleted: the relay cancels the statement at the database
  const onAbort = (): void => stream.cancel('revoked');
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  let columns: ColumnInfo[] = [];
  let collector: RowCollector | undefined;
  let relayTruncated = false; // the relay stopped early (its own caps, or a row too large to read)
  let tooDeep: ApiError | undefined;
  try {
    for await (const ev of stream) {
      if (ev.type === 'columns') {
        const names = uniqueColumnNames(ev.columns.map((c) => c.name));
        columns = ev.columns.map((c, i) => ({ name: names[i] as string, type_oid: c.typeOid ?? 0 }));
        collector = new RowCollector(columns, limits.maxRows, limits.maxBytes);
      } else if (ev.type === 'rows') {
        collector ??= new RowCollector(columns, limits.maxRows, limits.maxBytes);
        let more = true;
        for (const row of ev.rows) {
          try {
            if (!(more = collector.add(row))) break;
          } catch (err) {
            // a value nested too deeply to build (results/rows.ts jsonRow): the statement's answer
            if (!isValueTooDeep(err)) throw err;
            tooDeep = err;
            break;
          }
        }
        if (!more || tooDeep) {
          stream.cancel(tooDeep ? 'value too deep' : 'cap reached'); // the relay stops reading the rest
          break;
        }
      } else if (ev.type === 'end' && ev.end.truncated) relayTruncated = true;
    }
  } catch (err) {
    // stopped by its signal: the stop's own answer when it has one (the shutdown's 503)
    if (signal?.aborted && isApiError(signal.reason)) throw signal.reason;
    if (timedOut || (err instanceof ProtocolError && err.code === 'PROTO_ERR_DEADLINE')) {
      throw new ApiError('query_timeout', `the statement ran past its ${limits.timeoutMs} ms deadline and was cancelled at the relay's database`);
    }
    if (err instanceof ProtocolError && err.remote) throw relayFailure(err, relayId, limits.timeoutMs);
    throw new ApiError('relay_unavailable', `the tunnel to relay ${relayId} was lost during the statement; retry`, { relay_id: relayId });
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
  if (tooDeep) throw tooDeep;
  const c = collector ?? new RowCollector(columns, limits.maxRows, limits.maxBytes);
  return { columns, rows: c.rows, truncated: c.truncated || relayTruncated, bytes: c.bytes };
}

/**
 * What an error the relay sent means for the agent: the relay's executor answers the relay
 * contract's RELAY_ERR_* codes (protocol/relay-contract.ts) with the database's SQLSTATE in
 * `detail.sqlstate`. A statement the database rejects is the caller's error, not an unavailable
 * relay; any other code is the relay failing.
 */
export function relayFailure(err: ProtocolError, relayId: string, timeoutMs: number): ApiError {
  const detail = err.detail as { sqlstate?: unknown } | null | undefined;
  const sqlstate = typeof detail?.sqlstate === 'string' ? detail.sqlstate : undefined;
  if (err.code === RelayStreamError.TIMEOUT || sqlstate === '57014') {
    // the relay's own ceiling (svc-relay run --statement-timeout-ms) can be lower than our deadline
    return new ApiError(
      'query_timeout',
      `the statement was cancelled at the relay's database by a statement timeout (the control plane allows ${timeoutMs} ms; the relay may set a lower ceiling with --statement-timeout-ms); narrow the query (filters, LIMIT, aggregates)`,
    );
  }
  if (err.code === RelayStreamError.ROW_TOO_LARGE) {
    // a row the relay did not read (not even the first fits in the result budget) or could not frame
    const d = err.detail as { rowBytes?: unknown; maxBytes?: unknown } | null | undefined;
    return new ApiError('invalid_sql', `a row of the result is too large for a response (${err.message}); select fewer or shorter columns (e.g. left(column, 1000)) or filter the rows`, {
      reason: 'row_too_large',
      ...(typeof d?.rowBytes === 'number' ? { row_bytes: d.rowBytes } : {}),
      ...(typeof d?.maxBytes === 'number' ? { max_bytes: d.maxBytes } : {}),
    });
  }
  if (err.code === RelayStreamError.VALUE_UNSENDABLE) return valueTooDeep(err.message);
  if (err.code === RelayStreamError.POOL_BUSY) {
    // nothing ran (not charged), as when a `postgres` target's pooled connections stay busy
    return new ApiError('service_unavailable', `${err.message}; retry shortly, or run fewer statements at once through this relay`, { relay_id: relayId, reason: 'relay_pool_busy', retry_after_seconds: 1 }, { 'Retry-After': '1' });
  }
  if (err.code === RelayStreamError.READ_ONLY || err.code === RelayStreamError.MULTI_STATEMENT) return statementRejected("the relay's database", err.message, { sqlstate, refused: true });
  if (err.code === RelayStreamError.DATABASE_UNAVAILABLE || sqlstate?.startsWith('08')) {
    return new ApiError('relay_unavailable', `the relay cannot reach its database: ${err.message}; retry shortly`, { relay_id: relayId, reason: err.code });
  }
  if (sqlstate || err.code === RelayStreamError.QUERY) return statementRejected("the relay's database", err.message, { sqlstate });
  return new ApiError('relay_unavailable', `the relay could not run the statement: ${err.message}`, { relay_id: relayId, reason: err.code });
}
