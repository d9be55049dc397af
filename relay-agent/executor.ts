/**
 * Runs one tunnel query on the customer's database under the relay's OWN ceiling, whatever the
 * control plane asks: one statement (extended protocol), a READ ONLY transaction, a
 * statement_timeout (the smaller of the requested deadline and our maximum), row and byte
 * limits, and cancellation at the database (the protocol's CancelRequest) when the stream is
 * cancelled, its deadline passes or a cap stops the read while the statement still runs.
 *
 * One write and one round trip per query (see PortalQuery): BEGIN READ ONLY, the timeout, the
 * statement as a portal executed with a row limit of the cap plus one, ROLLBACK and Sync go out
 * together; a small result costs what a direct `pg` query costs plus three trivial statements
 * the database runs in the same pass. A large result is not paged with FETCH: the rows flow as
 * the database sends them, and while more than about 256 KiB (or two batches of `fetchRows` rows)
 * waits for the stream's credit the socket is paused, so TCP holds the database back and the
 * relay's memory stays bounded whatever the consumer's speed.
 */
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import pg from 'pg';
import type { Column, IncomingQuery, Row, Value } from '../protocol/index.js';
import { guardPgClient, pgConnectionGuard, type ConnectionGuard, type PgClientLike } from '../protocol/wire-guard.js';

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
  close(): Promise<void>;
}

interface PgErrorLike {
  code?: string;
  message?: string;
  severity?: string;
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
 * library stays loaded in the backend) and CHECKPOINT. None of them is a read.
 */
const REFUSED_KEYWORDS = new Set(['copy', 'listen', 'notify', 'prepare', 'execute', 'deallocate', 'do', 'lock', 'load', 'checkpoint']);
/**
 * Run after every query, before its connection is used again: a session-level advisory lock
 * (`pg_advisory_lock`, allowed in a read-only transaction) is the one thing a read takes that
 * the ROLLBACK does not undo. Left held, it would block the customer's own clients for as long
 * as the pooled connection lives, and behind a transaction-pooling PgBouncer it would follow the
 * server connection to another client. (Prepared statements, the other survivor, cannot be made:
 * PREPARE and DO are refused.)
 */
const RELEASE_SESSION_LOCKS = 'SELECT pg_advisory_unlock_all()';
/** most bytes the guard lets a row of the relay's own statements after the agent's declare */
const OWN_ROW_BYTES = 64;
/**
 * how long the end of a query's answer (or the rollback after a failure) may take once the
 * statement is over before the connection is closed instead of reused
 */
const SETTLE_TIMEOUT_MS = 2000;
/** how long a CancelRequest socket may take to connect and be closed by the server */
const CANCEL_TIMEOUT_MS = 2000;

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

function valueBytes(v: unknown): number {
  if (v === null || v === undefined || typeof v === 'boolean') return 1;
  if (typeof v === 'number' || typeof v === 'bigint') return 8;
  if (typeof v === 'string') return Buffer.byteLength(v);
  if (v instanceof Uint8Array) return v.length;
  if (v instanceof Date) return 8;
  try {
    return Buffer.byteLength(JSON.stringify(v) ?? '');
  } catch {
    return 0;
  }
}


function mapError(err: unknown): { code: string; message: string; retryable?: boolean; detail?: { sqlstate: string } } {
  const e = err as PgErrorLike & { errno?: number };
  const sqlstate = typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : undefined;
  const msg = e.message ?? String(err);
  if (e.code === 'PROTO_ERR_ROW_TOO_LARGE') return { code: 'RELAY_ERR_ROW_TOO_LARGE', message: msg };
  if (sqlstate === '25006') return { code: 'RELAY_ERR_READ_ONLY', message: `refused: the relay runs queries read-only (${msg})`, detail: { sqlstate } };
  if (sqlstate === '42601' && /multiple commands/.test(msg)) return { code: 'RELAY_ERR_MULTI_STATEMENT', message: 'refused: one statement per query', detail: { sqlstate } };
  // the parameters do not match the statement's $n: the database refuses the Bind with a
  // protocol-violation SQLSTATE (08P01), but the connection is fine and the same query fails the
  // same way again; a connection-class SQLSTATE would make it "unavailable, retry"
  const bind = sqlstate === '08P01' ? /^bind message supplies (\d+) parameters?, but prepared statement "[^"]*" requires (\d+)$/.exec(msg) : null;
  if (bind) return { code: 'RELAY_ERR_QUERY', message: `the statement takes ${bind[2]} parameter(s) ($1 …), the query supplied ${bind[1]}` };
  if (sqlstate === '57014') return { code: 'RELAY_ERR_TIMEOUT', message: `the query was cancelled at the database: ${msg}`, detail: { sqlstate } };
  if (sqlstate?.startsWith('08') || sqlstate === '57P01' || sqlstate === '57P03' || sqlstate === '53300' || (!sqlstate && typeof e.code === 'string')) {
    return { code: 'RELAY_ERR_DATABASE_UNAVAILABLE', message: `the database is unavailable: ${msg}`, retryable: true, ...(sqlstate ? { detail: { sqlstate } } : {}) };
  }
  if (sqlstate) return { code: 'RELAY_ERR_QUERY', message: msg, detail: { sqlstate } };
  return { code: 'RELAY_ERR_QUERY', message: msg };
}

/**
 * A pg Client whose every message, from the startup on, passes the wire guard (protocol/): a
 * database's message larger than the budget of the read in progress (16 MiB between reads) is
 * never decoded, so no server can make the relay build a huge string.
 */
class GuardedClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    guardPgClient(this as unknown as PgClientLike);
  }
}

/** pg's Connection, as a custom query writes to it (pg/lib/connection.js) */
interface PgWire {
  stream: { cork?: () => void; uncork?: () => void };
  parse(m: { text: string; name?: string; types?: number[] }): void;
  bind(m: { portal?: string; statement?: string; values?: unknown[]; binary?: boolean; valueMapper?: (v: unknown) => unknown }): void;
  describe(m: { type: 'P' | 'S'; name?: string }): void;
  execute(m: { portal?: string; rows?: number }): void;
  sync(): void;
  sendCopyFail(msg: string): void;
}

/** pg's own mapping of a parameter value to its text (arrays, dates, buffers, objects as JSON) */
const prepareValue = (createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue: (v: unknown) => unknown }).prepareValue;

/** pg's Result (pg/lib/result.js): the row parsers of a RowDescription, and CommandComplete's tag */
interface PgResult {
  command: string | null;
  rowCount: number | null;
  addFields(f: pg.FieldDef[]): void;
  parseRow(values: (string | null)[]): unknown[];
  addCommandComplete(msg: unknown): void;
}

/** what one query's messages report, in the order the database sends them */
interface PortalSink {
  columns(fields: pg.FieldDef[]): void;
  /** a row of the agent's statement (false: stop parsing the rest) */
  row(row: unknown[]): void;
  /** the statement finished (`more`: rows were left when the row limit was reached) */
  done(command: string | undefined, rowCount: number | null, more: boolean): void;
  /** the statement was empty: only comments or semicolons (EmptyQueryResponse) */
  empty(): void;
  /** pg failed the query: an ErrorResponse, a lost connection, a row that would not parse */
  error(err: unknown): void;
  /** ReadyForQuery: everything written for this query was answered */
  ready(): void;
}

/**
 * One query as ONE write and ONE round trip (a custom pg query, as pg-cursor is one), in the
 * extended protocol: `BEGIN READ ONLY`; `SELECT set_config('statement_timeout', …, true)` (a
 * SELECT takes the transaction's snapshot, after which nothing can switch it to read-write);
 * the agent's statement as the unnamed portal, executed with a row limit of the cap plus one
 * (so a larger result ends as PortalSuspended: truncated, never read past the cap); `ROLLBACK`;
 * the release of session advisory locks (RELEASE_SESSION_LOCKS); Sync. After an error the
 * database skips to the Sync, and the caller rolls back and releases them. Every message is in
 * its own transaction, so it works behind a transaction-pooling pooler (PgBouncer) too.
 */
class PortalQuery {
  #phase = 0; // executes answered: 0 BEGIN, 1 set_config, 2 the statement, 3 ROLLBACK, 4 the locks released
  readonly #result = new (pg as unknown as { Result: new (rowMode: 'array') => PgResult }).Result('array');
  #failed = false;

  constructor(
    private readonly statement: string,
    private readonly params: unknown[],
    private readonly timeoutMs: number,
    private readonly rowLimit: number,
    private readonly sink: PortalSink,
  ) {}

  submit(c: PgWire): Error | null {
    c.stream.cork?.();
    try {
      c.parse({ text: 'BEGIN READ ONLY' });
      c.bind({});
      c.execute({});
      c.parse({ text: `SELECT set_config('statement_timeout', '${this.timeoutMs}', true)` });
      c.bind({});
      c.execute({});
      c.parse({ text: this.statement });
      c.bind({ values: this.params, valueMapper: prepareValue });
      c.describe({ type: 'P' });
      c.execute({ rows: this.rowLimit });
      c.parse({ text: 'ROLLBACK' });
      c.bind({});
      c.execute({});
      c.parse({ text: RELEASE_SESSION_LOCKS });
      c.bind({});
      c.execute({});
      c.sync();
    } catch (err) {
      // a parameter pg cannot map: nothing sensible was written; the caller drops the connection
      return err instanceof Error ? err : new Error(String(err));
    } finally {
      c.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(msg: { fields: pg.FieldDef[] }): void {
    if (this.#phase !== 2) return;
    this.#result.addFields(msg.fields);
    this.sink.columns(msg.fields);
  }

  handleDataRow(msg: { fields: (string | null)[] }): void {
    if (this.#phase !== 2 || this.#failed) return; // (set_config's row)
    let row: unknown[];
    try {
      row = this.#result.parseRow(msg.fields);
    } catch (err) {
      this.#failed = true;
      this.sink.error(err);
      return;
    }
    this.sink.row(row);
  }

  handlePortalSuspended(): void {
    if (this.#phase++ === 2) this.sink.done(undefined, null, true);
  }

  handleCommandComplete(msg: unknown): void {
    if (this.#phase++ !== 2) return;
    this.#result.addCommandComplete(msg);
    this.sink.done(this.#result.command ?? undefined, this.#result.rowCount, false);
  }

  handleEmptyQuery(): void {
    if (this.#phase++ === 2) this.sink.empty();
  }

  handleError(err: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.sink.error(err);
  }

  handleReadyForQuery(): void {
    if (!this.#failed) this.sink.ready();
  }

  handleCopyInResponse(c: PgWire): void {
    c.sendCopyFail('COPY is not supported through the relay');
  }

  handleCopyData(): void {}
}

/** `p`, or a rejection after `ms` (p's own outcome is then ignored) */
function within<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/**
 * Cancels the statement running on a connection with the protocol's CancelRequest (the key from
 * the connection's BackendKeyData; behind a pooler, the pooler's key, which it forwards): a
 * plain 16-byte message on a new socket, no authentication, bounded by `timeoutMs`.
 */
function sendCancelRequest(client: pg.PoolClient, timeoutMs: number): Promise<void> {
  const c = client as unknown as { processID?: unknown; secretKey?: unknown; host?: unknown; port?: unknown };
  const { processID, secretKey } = c;
  if (typeof processID !== 'number' || typeof secretKey !== 'number') return Promise.resolve();
  const host = typeof c.host === 'string' && c.host.length > 0 ? c.host : 'localhost';
  const port = typeof c.port === 'number' ? c.port : 5432;
  return new Promise<void>((resolve) => {
    const sock = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(port, host);
    const timer = setTimeout(() => sock.destroy(), timeoutMs);
    timer.unref?.();
    const msg = Buffer.alloc(16);
    msg.writeInt32BE(16, 0);
    msg.writeInt32BE(80877102, 4);
    msg.writeInt32BE(processID, 8);
    msg.writeInt32BE(secretKey, 12);
    sock.on('connect', () => sock.write(msg));
    sock.on('data', () => undefined);
    sock.on('error', () => undefined);
    // the server closes the socket once it has signalled the backend
    sock.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export function createExecutor(opts: ExecutorOptions): Executor {
  const limits: ExecutorLimits = { ...DEFAULT_EXECUTOR_LIMITS, ...(opts.limits ?? {}) };
  const appName = opts.applicationName ?? 'svc-relay';
  // connectionTimeoutMillis: a database that accepts the connection and never answers its
  // start-up (or a pool whose connections all stay busy) fails the query after the longest a query
  // may run, instead of holding it, and a pool slot, forever
  const pool = new pg.Pool({
    connectionString: opts.databaseUrl,
    max: opts.poolSize ?? 4,
    application_name: appName,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: limits.maxTimeoutMs,
    Client: GuardedClient,
  });
  pool.on('error', () => {
    /* an idle client died; the pool replaces it */
  });
  // a checked-out client whose connection drops (the database restarted, or our wire guard closed
  // it) emits 'error' too: its queries fail with it, and the process must not
  pool.on('connect', (c) => {
    c.on('error', () => undefined);
  });
  let inflight = 0;
  let cancels = 0;

  async function handle(q: IncomingQuery): Promise<void> {
    inflight++;
    try {
      await run(q);
    } finally {
      inflight--;
    }
  }

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
    const batchRows = Math.max(1, limits.fetchRows);

    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      const m = mapError(err);
      q.fail('RELAY_ERR_DATABASE_UNAVAILABLE', m.message, { retryable: true });
      return;
    }
    if (q.signal.aborted) {
      client.release(); // cancelled while waiting for a connection: nothing was sent
      return;
    }
    const stream = (client as unknown as { connection: { stream: { pause(): void; resume(): void } } }).connection.stream;

    // the stream's state, as the database's messages and the opener's sends move it
    let finished = false; // we ended or failed the stream (the database may still be answering)
    let settled = false; // the database answered everything we wrote (ReadyForQuery or an error)
    let failure: unknown = null;
    let broken = false; // never back to the pool (cancelled, or the guard closed it)
    let timedOut = false;
    let cancelling: Promise<void> | null = null;
    let paused = false;
    let columnsSent = false;
    let rowCount = 0;
    let bytes = 0;
    let truncated = false;
    let command: string | undefined;
    let statementDone = false;
    let emptyStatement = false;
    let pending: Row[] = [];
    let pendingBytes = 0;
    let pumping: Promise<void> | null = null;
    let sendError: unknown = null;
    let wake: (() => void) | null = null;
    const notify = (): void => {
      const w = wake;
      wake = null;
      w?.();
    };

    // a DataRow declaring more bytes than the budget left is never decoded: the guard closes the
    // connection before pg reads it (a 600 MB value would otherwise kill the relay)
    const guard: ConnectionGuard | undefined = pgConnectionGuard(client);
    const rowBytesBefore = guard?.rowBytes ?? 0;
    guard?.use({
      // value bytes, as valueBytes() counts them; set_config's row (at most 16 bytes) counts too.
      // Once the statement is done only the lock release's row can come (one void value, measured
      // with the statement's column count): not the statement's budget, whatever is left of it
      rowBudget: () => (statementDone ? OWN_ROW_BYTES : Math.max(0, maxBytes + 16 - ((guard?.rowBytes ?? 0) - rowBytesBefore))),
      onTrip: () => {
        broken = true; // the connection is closed: never back to the pool
        cancel();
      },
    });
    /** CancelRequest for what runs now; the connection is not reused after it (the cancel may land late) */
    const cancel = (): void => {
      if (settled || cancelling !== null) return;
      broken = true;
      cancels++;
      cancelling = sendCancelRequest(client, CANCEL_TIMEOUT_MS);
    };
    // the stream was cancelled by its opener, its deadline passed, the session closed, or our own
    // q.fail closed it: the statement is cancelled if it still runs (once it is done only the
    // ROLLBACK's answer is on its way, and a CancelRequest would only cost the connection)
    const onAbort = (): void => {
      if (!statementDone) cancel();
      notify();
    };
    q.signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => {
      timedOut = true;
      cancel();
      notify();
    }, timeoutMs);
    timer.unref?.();

    // rows (as values) read from the database and not yet handed to the stream: at most about this
    // many bytes before the socket is paused (then at most one socket read, 64 KiB, more)
    const HIGH_WATER = 256 * 1024;
    /** one sendRows at a time (its promise is the stream's credit); the socket is paused while rows pile up */
    const pump = (): void => {
      if (pumping || pending.length === 0 || sendError !== null) return;
      pumping = (async () => {
        while (pending.length > 0 && sendError === null && !q.signal.aborted) {
          // at most fetchRows rows a batch (rows that arrived while the last one waited queue up)
          const out = pending.length <= batchRows ? pending : pending.slice(0, batchRows);
          pending = out === pending ? [] : pending.slice(batchRows);
          pendingBytes = pending.length === 0 ? 0 : pendingBytes * (pending.length / (pending.length + out.length));
          if (paused && pendingBytes < HIGH_WATER / 2 && pending.length < batchRows) {
            paused = false;
            stream.resume();
          }
          try {
            await q.sendRows(out);
          } catch (err) {
            sendError = err;
          }
        }
        pumping = null;
        notify();
      })();
    };
    const sendColumns = (fields: pg.FieldDef[]): void => {
      if (columnsSent || finished) return;
      columnsSent = true;
      const cols: Column[] = fields.map((f) => ({ name: f.name, typeOid: f.dataTypeID }));
      q.sendColumns(cols).catch((err: unknown) => {
        sendError ??= err;
      });
    };
    /** the caps are reached: stop reading, and stop the statement at the database unless it finished */
    const stopReading = (): void => {
      truncated = true;
      if (!statementDone) cancel();
    };

    const sink: PortalSink = {
      columns: (fields) => sendColumns(fields),
      row: (row) => {
        if (truncated || finished) return;
        if (rowCount >= maxRows) {
          // the row past the cap: the Execute's limit makes it the last, PortalSuspended follows
          truncated = true;
          return;
        }
        let b = 0;
        for (const v of row) b += valueBytes(v);
        if (bytes + b > maxBytes) {
          stopReading();
          return;
        }
        bytes += b;
        rowCount++;
        pending.push(row as Value[]); // (pg's array rows hold null, never undefined)
        pendingBytes += b;
        if (pending.length >= batchRows || pendingBytes >= HIGH_WATER / 4) pump(); // a batch, or 64 KiB
        if (!paused && (pendingBytes >= HIGH_WATER || pending.length >= 2 * batchRows)) {
          paused = true; // TCP backpressure to the database until the pump takes these rows
          stream.pause();
        }
      },
      done: (cmd, n, more) => {
        statementDone = true;
        if (more) truncated = true;
        else command = `${cmd ?? ''} ${n ?? rowCount}`.trim();
        notify();
      },
      empty: () => {
        statementDone = true;
        emptyStatement = true;
        notify();
      },
      error: (err) => {
        failure = err;
        settled = true;
        notify();
      },
      ready: () => {
        settled = true;
        notify();
      },
    };

    const until = (cond: () => boolean): Promise<void> =>
      new Promise<void>((resolve) => {
        const check = (): void => {
          if (cond()) resolve();
          else wake = check;
        };
        check();
      });

    try {
      void client.query(new PortalQuery(open.statement, (open.params ?? []) as unknown[], timeoutMs, Math.min(maxRows + 1, 0x7fffffff), sink) as unknown as pg.QueryConfig);
      // the database answers (or fails), the caps stop us, or the opener goes away
      await until(() => settled || statementDone || truncated || q.signal.aborted || timedOut || sendError !== null);
      if (q.signal.aborted) throw q.signal.reason;
      if (timedOut) throw new Error('deadline');
      if (emptyStatement) {
        // as a statement of only whitespace is answered before it is sent
        finished = true;
        q.fail('RELAY_ERR_QUERY', 'empty statement');
        return;
      }
      if (failure !== null && !truncated && !statementDone) {
        const trip = guard?.tripped;
        if (trip?.kind === 'other') {
          // e.g. an error quoting a huge value: the statement failed, and its message was not read
          finished = true;
          q.fail('RELAY_ERR_QUERY', `the database answered with a message of ${trip.declared} bytes (an error quoting a huge value?), more than the ${trip.budget} bytes the relay reads; it was not read. Check the statement on smaller values`, {
            detail: { messageBytes: trip.declared },
          });
          return;
        }
        if (trip && rowCount === 0) {
          finished = true;
          q.fail('RELAY_ERR_ROW_TOO_LARGE', `a row of ${trip.declared} bytes is more than the ${trip.budget} bytes this query may still return; it was not read`, {
            detail: { rowBytes: trip.declared, maxBytes: trip.budget },
          });
          return;
        }
        if (!trip) throw failure;
        truncated = true; // the guard stopped a row after others: the rows before it, truncated
      }
      // the rows read so far go out, then END
      pump();
      await until(() => (pending.length === 0 && pumping === null) || sendError !== null || q.signal.aborted || timedOut);
      if (q.signal.aborted) throw q.signal.reason;
      if (sendError !== null) throw sendError;
      if (timedOut && !statementDone) throw new Error('deadline');
      sendColumns([]);
      finished = true;
      await q.end({ ...(truncated ? { truncated: true, command: `SELECT ${rowCount}` } : {}), ...(!truncated && command ? { command } : {}) });
    } catch (err) {
      const wasTimeout = timedOut;
      finished = true;
      if (q.isOpen) {
        if (wasTimeout) q.fail('RELAY_ERR_TIMEOUT', `the query ran past its ${timeoutMs} ms deadline and was cancelled at the database`, { detail: { timeoutMs } });
        else {
          const m = mapError(err);
          q.fail(m.code, m.message, { ...(m.retryable ? { retryable: true } : {}), ...(m.detail ? { detail: m.detail } : {}) });
        }
      }
    } finally {
      finished = true;
      clearTimeout(timer);
      q.signal.removeEventListener('abort', onAbort);
      if (paused) stream.resume();
      if (broken) {
        // the CancelRequest is delivered first: behind a pooler (PgBouncer) its key is this
        // client connection's, and a pooler drops a cancel whose connection is gone. Then
        // whatever is still on the wire is dropped with the connection
        if (cancelling) await cancelling;
        client.release(new Error('cancelled at the database'));
      } else {
        // the rest of the answer (ROLLBACK, lock release, ReadyForQuery) is due at once; a
        // database or network gone silent must not hold the connection, and the query, forever
        let silent = false;
        const settleTimer = setTimeout(() => {
          silent = true;
          notify();
        }, SETTLE_TIMEOUT_MS);
        try {
          await until(() => settled || broken || silent);
          if (broken) throw new Error('cancelled at the database');
          if (!settled) throw new Error(`the database did not finish answering within ${SETTLE_TIMEOUT_MS} ms`);
          // after an error the transaction is aborted (or was never begun): end it before reuse
          // (the statement's failure skipped the pipeline's own ROLLBACK and lock release)
          if (failure !== null) await within(client.query(`ROLLBACK; ${RELEASE_SESSION_LOCKS}`), SETTLE_TIMEOUT_MS);
          guard?.use(null); // the pool's next user reads without our budget
          client.release();
        } catch (err) {
          if (cancelling) await cancelling; // (as above: before the connection goes)
          client.release(err instanceof Error ? err : true);
        } finally {
          clearTimeout(settleTimer);
        }
      }
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
    close: () => pool.end(),
  };
}
