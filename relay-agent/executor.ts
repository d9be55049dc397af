/**
 * Runs one tunnel query on the customer's database under the relay's OWN ceiling, whatever the
 * control plane asks: one statement (extended protocol), a READ ONLY transaction, a
 * statement_timeout (the smaller of the requested deadline and our maximum), row and byte
 * limits, and cancellation at the database (the protocol's CancelRequest) when the stream is
 * cancelled, its deadline passes or a cap stops the read while the statement still runs.
 *
 * The read itself is pg-read's `runReadOnly` (pg-read/): one write and one round trip per query
 * (BEGIN READ ONLY, the timeout, the statement as a portal executed with a row limit of the cap
 * plus one, the release of session advisory locks, ROLLBACK and Sync go out together); a small
 * result costs what a direct `pg` query costs plus the trivial statements the database runs in
 * the same pass. A large result is not paged with FETCH: the rows flow as the database sends
 * them, and while more than about 256 KiB (or two batches of `fetchRows` rows) waits for the
 * stream's credit the socket is paused, so TCP holds the database back and the relay's memory
 * stays bounded whatever the consumer's speed. Here: the statements refused before anything is
 * sent, the relay's ceilings, and the relay's error codes.
 */
import net from 'node:net';
import pg from 'pg';
import { classifyPgError, GuardedPgClient, PIN_SEARCH_PATH, runReadOnly, type ReadFailure } from '../pg-read/index.js';
import type { Column, IncomingQuery, JsonValue, Value } from '../protocol/index.js';

export interface ExecutorLimits {
  /** longest a query may run, ms, whatever is requested (default 30 000) */
  maxTimeoutMs: number;
  /** most rows returned (default 100 000); more is truncated */
  maxRows: number;
  /** most value bytes returned (default 64 MiB, estimated from the decoded values); more is truncated */
  maxBytes: number;
  /** rows per sendRows batch (default 500) */
  fetchRows: number;
}

export const DEFAULT_EXECUTOR_LIMITS: ExecutorLimits = { maxTimeoutMs: 30_000, maxRows: 100_000, maxBytes: 64 * 1024 * 1024, fetchRows: 500 };

export interface ExecutorOptions {
  /** postgres:// URL of the customer database (use a read-only role) */
  databaseUrl: string;
  /** pool size (default 4) */
  poolSize?: number;
  limits?: Partial<ExecutorLimits>;
  /** application_name for the relay's connections (default svc-relay) */
  applicationName?: string;
  /**
   * hears when the database becomes reachable or unreachable (once per change, first answer
   * included), so the operator's log says what the agents are told (`relay_unavailable`)
   */
  onDatabaseState?: (state: { reachable: true } | { reachable: false; message: string }) => void;
}

export interface Executor {
  /** the protocol stream handler: `session.onStream(executor.handle)` */
  handle: (q: IncomingQuery) => Promise<void>;
  readonly limits: ExecutorLimits;
  /** queries running now */
  readonly inflight: number;
  /** CancelRequests sent (stream cancelled, deadline passed or a byte cap reached while the statement ran) */
  readonly cancels: number;
  readonly pool: pg.Pool;
  /**
   * opens (and closes) one connection: null when the database answered, else why not. A probe
   * still waiting for a database that does not answer is cut by close(), which never waits for it
   */
  probe(): Promise<string | null>;
  close(): Promise<void>;
}

/**
 * Statements refused before they reach the database: COPY (its data is not rows), LISTEN and
 * NOTIFY, and what would leave state on the connection beyond the transaction or run a statement
 * the relay never sees: PREPARE (a prepared statement survives the ROLLBACK, and behind a
 * transaction-pooling PgBouncer reaches the customer's other clients), EXECUTE (runs one prepared
 * by someone else), DEALLOCATE (would drop a pooler's own prepared statements, PgBouncer 1.21)
 * and DO (dynamic SQL: a PREPARE in an EXECUTE string). Nor what a read-only transaction allows
 * but harms the customer's server: LOCK (ACCESS EXCLUSIVE is allowed read-only, and with a role
 * that may write the table it blocks every other client of it until the deadline), LOAD (a
 * library stays loaded in the backend) and CHECKPOINT. None of them is a read. (Of what else
 * survives a ROLLBACK, session advisory locks are released by pg-read; setseed() is harmless;
 * see pg-read/portal.ts.)
 */
const REFUSED_KEYWORDS = new Set(['copy', 'listen', 'notify', 'prepare', 'execute', 'deallocate', 'do', 'lock', 'load', 'checkpoint']);
/**
 * slack of the wire budget over the byte cap: set_config's row (at most 10 value bytes) is
 * counted with the statement's rows
 */
const OWN_ROWS_SLACK = 16;

/**
 * first keyword of a statement, skipping what PostgreSQL skips before it: whitespace, comments
 * (a `--` comment ends at a line feed or a carriage return), opening parentheses and empty
 * statements (`;COPY …` is one statement to PostgreSQL)
 */
export function firstKeyword(sql: string): string {
  let i = 0;
  for (;;) {
    while (i < sql.length && /[\s(;]/.test(sql[i]!)) i++;
    if (sql.startsWith('--', i)) {
      const nl = sql.slice(i).search(/[\n\r]/);
      i = nl < 0 ? sql.length : i + nl + 1;
      continue;
    }
    if (sql.startsWith('/*', i)) {
      let depth = 0;
      while (i < sql.length) {
        if (sql.startsWith('/*', i)) {
          depth++;
          i += 2;
        } else if (sql.startsWith('*/', i)) {
          depth--;
          i += 2;
          if (depth === 0) break;
        } else i++;
      }
      continue;
    }
    break;
  }
  const m = /^[A-Za-z_]+/.exec(sql.slice(i));
  return m ? m[0].toLowerCase() : '';
}

interface RelayError {
  code: string;
  message: string;
  retryable?: boolean;
  detail?: JsonValue;
}

/** A database's (or the stream's) error as the relay's error code (pg-read's SQLSTATE table, sqlstate.ts). */
function mapError(err: unknown): RelayError {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'PROTO_ERR_ROW_TOO_LARGE') return { code: 'RELAY_ERR_ROW_TOO_LARGE', message: (err as Error).message };
  // a value the tunnel's encoder refused (JSON nested too deeply to serialise): the statement's
  // result, not the database (its string code would otherwise read as a socket error's: unavailable)
  if (code === 'PROTO_ERR_INVALID_ARGUMENT') return { code: 'RELAY_ERR_VALUE_UNSENDABLE', message: `a value of the result cannot be sent: ${(err as Error).message}` };
  const e = classifyPgError(err);
  const { sqlstate, message: msg } = e;
  const detail = sqlstate ? { detail: { sqlstate } } : {};
  switch (e.kind) {
    case 'read_only':
      return { code: 'RELAY_ERR_READ_ONLY', message: `refused: the relay runs queries read-only (${msg})`, ...detail };
    case 'multiple_statements':
      return { code: 'RELAY_ERR_MULTI_STATEMENT', message: 'refused: one statement per query', ...detail };
    case 'parameter_count':
      // the connection is fine and the same query fails the same way again: a connection-class
      // SQLSTATE would make it "unavailable, retry"
      return { code: 'RELAY_ERR_QUERY', message: `the statement takes ${e.parameters?.required} parameter(s) ($1 …), the query supplied ${e.parameters?.supplied}` };
    case 'query_canceled':
      return { code: 'RELAY_ERR_TIMEOUT', message: `the query was cancelled at the database: ${msg}`, ...detail };
    case 'connection':
    case 'server_shutdown':
    case 'too_many_connections':
      return { code: 'RELAY_ERR_DATABASE_UNAVAILABLE', message: `the database is unavailable: ${msg}`, retryable: true, ...detail };
    default:
      return { code: 'RELAY_ERR_QUERY', message: msg, ...detail };
  }
}

/** A failed read as the relay's error. */
function relayFailure(f: ReadFailure, timeoutMs: number): RelayError {
  switch (f.kind) {
    case 'aborted':
      // the stream was cancelled, its deadline passed or the session closed: there is usually
      // nobody left to answer (fail() answers only an open stream)
      return mapError(f.reason);
    case 'timeout':
      return { code: 'RELAY_ERR_TIMEOUT', message: `the query ran past its ${timeoutMs} ms deadline and was cancelled at the database`, detail: { timeoutMs } };
    case 'empty':
      // as a statement of only whitespace is answered before it is sent
      return { code: 'RELAY_ERR_QUERY', message: 'empty statement' };
    case 'message_too_large':
      // e.g. an error quoting a huge value: the statement failed, and its message was not read
      return {
        code: 'RELAY_ERR_QUERY',
        message: `the database answered with a message of ${f.trip.declared} bytes (an error quoting a huge value?), more than the ${f.trip.budget} bytes the relay reads; it was not read. Check the statement on smaller values`,
        detail: { messageBytes: f.trip.declared },
      };
    case 'row_too_large':
      return {
        code: 'RELAY_ERR_ROW_TOO_LARGE',
        message: `a row of ${f.trip.declared} bytes is more than the ${f.trip.budget} bytes this query may still return; it was not read`,
        detail: { rowBytes: f.trip.declared, maxBytes: f.trip.budget },
      };
    case 'database':
    case 'consumer':
      return mapError(f.error);
  }
}

/** how long before its deadline a query still waiting for a pool connection gives up (at most) */
export const POOL_WAIT_MARGIN_MS = 250;

/**
 * How long a query may wait for a pool connection: up to just before its deadline (by
 * {@link POOL_WAIT_MARGIN_MS}, or a tenth of a short deadline), so that the relay, not the
 * stream's deadline, says that nothing ran.
 */
export function poolWaitMs(timeoutMs: number): number {
  return Math.max(1, timeoutMs - Math.min(POOL_WAIT_MARGIN_MS, Math.floor(timeoutMs / 10)));
}

/**
 * A pool connection, or undefined when none is handed over within `ms` or `signal` aborts first;
 * one handed over later is given back at once (a waiter cannot leave pg's queue).
 */
async function connectWithin(pool: pg.Pool, ms: number, signal: AbortSignal): Promise<pg.PoolClient | undefined> {
  const pending = pool.connect();
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, ms, undefined);
    onAbort = () => resolve(undefined);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    const got = await Promise.race([pending, late]);
    if (!got) pending.then((c) => c.release(), () => undefined);
    return got;
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

export function createExecutor(opts: ExecutorOptions): Executor {
  const limits: ExecutorLimits = { ...DEFAULT_EXECUTOR_LIMITS, ...(opts.limits ?? {}) };
  const appName = opts.applicationName ?? 'svc-relay';
  // connectionTimeoutMillis: a database that accepts the connection and never answers its
  // start-up (or a pool whose connections all stay busy) fails the query after the longest a query
  // may run, instead of holding it, and a pool slot, forever. Every connection is guarded from its
  // start-up on (pg-read's GuardedPgClient): no server can make the relay decode a huge message
  // sockets of pool connections still starting: close() destroys them (pool.end would wait for
  // a silent database until connectionTimeoutMillis, up to a day)
  const starting = new Set<net.Socket>();
  const poolSize = opts.poolSize ?? 4;
  const pool = new pg.Pool({
    connectionString: opts.databaseUrl,
    max: poolSize,
    application_name: appName,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: limits.maxTimeoutMs,
    Client: GuardedPgClient,
    stream: () => {
      const socket = new net.Socket();
      starting.add(socket);
      socket.once('close', () => starting.delete(socket));
      return socket;
    },
  });
  pool.on('error', () => {
    /* an idle client died; the pool replaces it */
  });
  // a checked-out client whose connection drops (the database restarted, or our wire guard closed
  // it) emits 'error' too: its queries fail with it, and the process must not
  pool.on('connect', (c) => {
    c.on('error', () => undefined);
    // started: no longer close()'s to cut (with TLS, the stream wraps the socket made above)
    const stream = (c as unknown as { connection?: { stream?: net.Socket & { _parent?: net.Socket } } }).connection?.stream;
    if (stream) {
      starting.delete(stream);
      if (stream._parent) starting.delete(stream._parent);
    }
  });
  let inflight = 0;
  let cancels = 0;
  let reachable: boolean | undefined;
  let closed = false;
  /** sockets of probes still connecting (close() destroys them) */
  const probing = new Set<net.Socket>();
  // attempts in the order they began, and the last one that reached the database: a connection
  // attempt that fails after a later one got an answer (a probe held by a silent database until its
  // timeout, while a query got through meanwhile) says nothing about the database now
  let attempts = 0;
  let answeredAt = 0;
  const databaseState = (ok: boolean, message = '', began = Infinity): void => {
    if (ok) answeredAt = ++attempts;
    else if (began < answeredAt) return;
    if (reachable === ok) return;
    reachable = ok;
    opts.onDatabaseState?.(ok ? { reachable: true } : { reachable: false, message });
  };

  async function handle(q: IncomingQuery): Promise<void> {
    inflight++;
    try {
      await run(q);
    } finally {
      inflight--;
    }
  }

  /** answers the stream with an error unless it is gone already */
  const fail = (q: IncomingQuery, e: RelayError): void => {
    if (q.isOpen) q.fail(e.code, e.message, { ...(e.retryable ? { retryable: true } : {}), ...(e.detail ? { detail: e.detail } : {}) });
  };

  async function run(q: IncomingQuery): Promise<void> {
    const open = q.open;
    if (typeof open.statement !== 'string' || open.statement.trim().length === 0) {
      q.fail('RELAY_ERR_QUERY', 'empty statement');
      return;
    }
    const kw = firstKeyword(open.statement);
    if (REFUSED_KEYWORDS.has(kw)) {
      q.fail('RELAY_ERR_QUERY', `refused: ${kw.toUpperCase()} is not supported through the relay`);
      return;
    }
    const reqTimeout = typeof open.timeoutMs === 'number' && open.timeoutMs > 0 ? open.timeoutMs : limits.maxTimeoutMs;
    const timeoutMs = Math.max(1, Math.floor(Math.min(reqTimeout, limits.maxTimeoutMs)));
    const maxRows = Math.min(open.limits?.maxRows ?? limits.maxRows, limits.maxRows);
    const maxBytes = Math.min(open.limits?.maxBytes ?? limits.maxBytes, limits.maxBytes);

    let client: pg.PoolClient | undefined;
    const began = ++attempts;
    // queued behind connections that are all busy (else the pool hands an idle one or opens one)
    const full = pool.idleCount === 0 && pool.totalCount >= poolSize;
    const waitMs = poolWaitMs(timeoutMs);
    try {
      client = await connectWithin(pool, waitMs, q.signal);
    } catch (err) {
      const message = mapError(err).message;
      databaseState(false, message, began);
      q.fail('RELAY_ERR_DATABASE_UNAVAILABLE', message, { retryable: true });
      return;
    }
    if (!client) {
      // cancelled while it waited (revoked, the agent gone): nothing ran, and nothing is said of the database
      if (q.signal.aborted) return;
      // nothing ran: said before the stream's deadline, which the control plane would charge as a
      // statement cancelled at the database
      if (full) {
        q.fail('RELAY_ERR_POOL_BUSY', `all ${poolSize} of the relay's connections to its database stayed busy for ${waitMs} ms (svc-relay run --pool-size); nothing ran`, { retryable: true });
      } else {
        const message = `the database did not accept a connection within ${waitMs} ms`;
        databaseState(false, message, began);
        q.fail('RELAY_ERR_DATABASE_UNAVAILABLE', message, { retryable: true });
      }
      return;
    }
    databaseState(true);
    if (q.signal.aborted) {
      client.release(); // cancelled while waiting for a connection: nothing was sent
      return;
    }
    let reusable = false;
    try {
      const out = await runReadOnly(client, {
        text: open.statement,
        params: (open.params ?? []) as unknown[],
        timeoutMs,
        maxRows,
        maxBytes,
        // functions, operators and types resolve in the catalog only, whatever the control plane sent
        settings: [PIN_SEARCH_PATH],
        signal: q.signal,
        batchRows: limits.fetchRows,
        // value bytes, as valueBytes() counts them, against the bytes the rows declare on the wire
        rowBudget: (_bytes, wireBytes) => maxBytes + OWN_ROWS_SLACK - wireBytes,
        onColumns: (fields) => q.sendColumns(fields.map((f): Column => ({ name: f.name, typeOid: f.dataTypeID }))),
        onRows: (rows) => q.sendRows(rows as Value[][]), // (pg's array rows hold null, never undefined)
        onCancel: () => void cancels++,
      });
      try {
        if (out.ok) {
          const r = out.result;
          await q.end({ ...(r.truncated ? { truncated: true, command: `SELECT ${r.rows}` } : {}), ...(!r.truncated && r.command ? { command: r.command } : {}) });
        } else {
          const e = relayFailure(out.failure, timeoutMs);
          // a statement stopped by its caller (a revocation, an agent that left) says nothing about the database
          if (e.code === 'RELAY_ERR_DATABASE_UNAVAILABLE' && out.failure.kind !== 'aborted') databaseState(false, e.message);
          fail(q, e);
        }
      } catch (err) {
        fail(q, mapError(err));
      } finally {
        reusable = await out.settled;
      }
    } catch (err) {
      fail(q, mapError(err));
    } finally {
      client.release(reusable ? undefined : new Error('not reusable: cancelled at the database, lost, or out of step'));
    }
  }

  return {
    handle,
    limits,
    get inflight() {
      return inflight;
    },
    get cancels() {
      return cancels;
    },
    pool,
    async probe() {
      if (closed) return 'the executor is closed';
      // its own connection, not the pool's: a pending pool connection would hold close() (pool.end)
      // until connectionTimeoutMillis, the longest a statement may run (up to a day), when the
      // database does not answer; this socket close() destroys
      const socket = new net.Socket();
      probing.add(socket);
      socket.once('close', () => probing.delete(socket));
      const client = new GuardedPgClient({ connectionString: opts.databaseUrl, application_name: appName, connectionTimeoutMillis: limits.maxTimeoutMs, stream: () => socket });
      client.on('error', () => undefined);
      let connected = false;
      const began = ++attempts;
      try {
        await client.connect();
        connected = true;
        if (closed) return 'the executor is closed';
        databaseState(true);
        return null;
      } catch (err) {
        if (closed) return 'the executor is closed';
        const message = mapError(err).message;
        databaseState(false, message, began);
        return message;
      } finally {
        if (connected) void client.end().catch(() => socket.destroy());
        else socket.destroy();
      }
    },
    close: () => {
      closed = true;
      for (const s of probing) s.destroy();
      for (const s of starting) s.destroy();
      return pool.end();
    },
  };
}
