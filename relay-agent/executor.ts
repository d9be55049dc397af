/**
 * Runs one tunnel query on the customer's database under the relay's OWN ceiling, whatever the
 * control plane asks: one statement (extended protocol), a READ ONLY transaction, a
 * statement_timeout (the smaller of the requested deadline and our maximum), row and byte
 * limits, results read through a cursor `FETCH n` at a time and streamed with
 * `incoming.sendRows` (which waits for credit, so memory stays bounded), ROLLBACK always, and
 * cancellation at the database (pg_cancel_backend on a separate connection, 2 s to connect)
 * when the stream is cancelled or its deadline passes while one of our statements runs, never
 * after the query failed or finished by itself.
 *
 * Round trips: the pool's connections are pipelined (pg's `pipeline` mode: each query is sent
 * without waiting for the previous answer, each with its own Sync), so the prologue
 * `BEGIN READ ONLY; SET LOCAL statement_timeout; SELECT pg_backend_pid()` (our fixed text, one
 * simple-protocol message), the DECLARE of the agent's statement and the first FETCH go out
 * together; a small result costs one round trip plus a ROLLBACK that overlaps sending it. A
 * large result keeps one FETCH ahead of the batch being sent (two batches in memory at most).
 */
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
  /** rows per FETCH / sendRows batch (default 500) */
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
  /** pg_cancel_backend calls made (stream cancelled or deadline passed while a statement ran) */
  readonly cancels: number;
  readonly pool: pg.Pool;
  close(): Promise<void>;
}

interface PgErrorLike {
  code?: string;
  message?: string;
  severity?: string;
}

const CURSOR_KEYWORDS = new Set(['select', 'values', 'with', 'table']);
/** connect and query timeout of the pg_cancel_backend side connection */
const CANCEL_TIMEOUT_MS = 2000;

/** first keyword of a statement, skipping whitespace, comments and opening parentheses */
export function firstKeyword(sql: string): string {
  let i = 0;
  for (;;) {
    while (i < sql.length && /[\s(]/.test(sql[i]!)) i++;
    if (sql.startsWith('--', i)) {
      const nl = sql.indexOf('\n', i);
      i = nl < 0 ? sql.length : nl + 1;
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

function toValue(v: unknown): Value {
  if (v === undefined) return null;
  return v as Value;
}

function mapError(err: unknown): { code: string; message: string; retryable?: boolean; detail?: { sqlstate: string } } {
  const e = err as PgErrorLike & { errno?: number };
  const sqlstate = typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : undefined;
  const msg = e.message ?? String(err);
  if (e.code === 'PROTO_ERR_ROW_TOO_LARGE') return { code: 'RELAY_ERR_ROW_TOO_LARGE', message: msg };
  if (sqlstate === '25006') return { code: 'RELAY_ERR_READ_ONLY', message: `refused: the relay runs queries read-only (${msg})`, detail: { sqlstate } };
  if (sqlstate === '42601' && /multiple commands/.test(msg)) return { code: 'RELAY_ERR_MULTI_STATEMENT', message: 'refused: one statement per query', detail: { sqlstate } };
  if (sqlstate === '57014') return { code: 'RELAY_ERR_TIMEOUT', message: `the query was cancelled at the database: ${msg}`, detail: { sqlstate } };
  if (sqlstate?.startsWith('08') || sqlstate === '57P01' || sqlstate === '57P03' || sqlstate === '53300' || (!sqlstate && typeof e.code === 'string')) {
    return { code: 'RELAY_ERR_DATABASE_UNAVAILABLE', message: `the database is unavailable: ${msg}`, retryable: true, ...(sqlstate ? { detail: { sqlstate } } : {}) };
  }
  if (sqlstate) return { code: 'RELAY_ERR_QUERY', message: msg, detail: { sqlstate } };
  return { code: 'RELAY_ERR_QUERY', message: msg };
}

/** a statement's answer, read row by row (see sendRows) */
interface Got {
  rows: unknown[][];
  fields: pg.FieldDef[];
  command?: string;
  rowCount: number | null;
  /** the wire guard closed the connection before the statement finished */
  stopped: boolean;
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

export function createExecutor(opts: ExecutorOptions): Executor {
  const limits: ExecutorLimits = { ...DEFAULT_EXECUTOR_LIMITS, ...(opts.limits ?? {}) };
  const appName = opts.applicationName ?? 'svc-relay';
  const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 4, application_name: appName, idleTimeoutMillis: 30_000, pipeline: true, Client: GuardedClient });
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

  async function cancelBackend(pid: number): Promise<void> {
    // bounded: a database that does not answer quickly must not hold the query's clean-up
    const c = new GuardedClient({ connectionString: opts.databaseUrl, application_name: `${appName}-cancel`, connectionTimeoutMillis: CANCEL_TIMEOUT_MS, query_timeout: CANCEL_TIMEOUT_MS });
    c.on('error', () => {});
    cancels++;
    try {
      await c.connect();
      await c.query('SELECT pg_cancel_backend($1)', [pid]);
    } catch {
      /* best effort: statement_timeout still bounds it */
    } finally {
      await c.end().catch(() => {});
    }
  }

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
    if (kw === 'copy' || kw === 'listen' || kw === 'notify') {
      q.fail('RELAY_ERR_QUERY', `refused: ${kw.toUpperCase()} is not supported through the relay`);
      return;
    }
    const reqTimeout = typeof open.timeoutMs === 'number' && open.timeoutMs > 0 ? open.timeoutMs : limits.maxTimeoutMs;
    const timeoutMs = Math.max(1, Math.floor(Math.min(reqTimeout, limits.maxTimeoutMs)));
    const maxRows = Math.min(open.limits?.maxRows ?? limits.maxRows, limits.maxRows);
    const maxBytes = Math.min(open.limits?.maxBytes ?? limits.maxBytes, limits.maxBytes);

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
    // the backend pid (from BackendKeyData; replaced by pg_backend_pid() below, which stays
    // right behind a pooler), for pg_cancel_backend on a separate connection
    const keyPid = (client as unknown as { processID?: unknown }).processID;
    let pid: number | null = typeof keyPid === 'number' && keyPid > 0 ? keyPid : null;
    // statements of ours on the wire now; a cancel is sent only while one runs
    let running = 0;
    // we ended or failed the stream ourselves, or the database has nothing left to do for it
    let finished = false;
    let broken = false;
    let timedOut = false;
    let cancelWanted = false;
    let cancelling: Promise<void> | null = null;
    // a DataRow declaring more bytes than the budget left is never decoded: the guard closes the
    // connection before pg reads it (a 600 MB value would otherwise kill the relay)
    const guard: ConnectionGuard | undefined = pgConnectionGuard(client);
    const rowBytesBefore = guard?.rowBytes ?? 0;
    guard?.use({
      // value bytes, as emit() counts them; the prologue's pg_backend_pid() row (at most 11 bytes) counts too
      rowBudget: () => Math.max(0, maxBytes + 11 - ((guard?.rowBytes ?? 0) - rowBytesBefore)),
      onTrip: () => {
        broken = true; // the connection is closed: never back to the pool
        cancel();
      },
    });
    const cancel = (): void => {
      if (finished || cancelling !== null || running === 0) return;
      if (pid === null) {
        cancelWanted = true; // sent once the pid is known
        return;
      }
      broken = true; // the cancel may land on whatever runs next on this connection: never reuse it
      cancelling = cancelBackend(pid);
    };
    // the stream was cancelled by its opener, its deadline passed, or the session closed (NOT
    // our own q.fail: `finished` is set before it)
    const onAbort = (): void => cancel();
    q.signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => {
      timedOut = true;
      cancel();
    }, timeoutMs);
    timer.unref?.();
    /**
     * A statement whose rows we read, collected as pg parses them: when the wire guard stops the
     * connection mid-result, the rows before the refused one are kept (`stopped`).
     */
    const sendRows = (c: { text: string; values?: unknown[]; extended?: boolean }): Promise<Got> => {
      running++;
      const p = new Promise<Got>((resolve, reject) => {
        const rows: unknown[][] = [];
        let fields: pg.FieldDef[] = [];
        const config = { text: c.text, rowMode: 'array' as const, ...(c.values ? { values: c.values } : {}), ...(c.extended ? { queryMode: 'extended' } : {}) };
        const query = new pg.Query(config as pg.QueryConfig);
        query.on('row', (row: unknown, result?: { fields?: pg.FieldDef[] }) => {
          rows.push(row as unknown[]);
          if (result?.fields) fields = result.fields;
        });
        query.on('end', (result: { fields?: pg.FieldDef[]; command?: string; rowCount?: number | null }) => {
          running--;
          resolve({ rows, fields: result.fields ?? fields, command: result.command, rowCount: result.rowCount ?? null, stopped: false });
        });
        query.on('error', (err: Error) => {
          running--;
          // the fields pg read before the guard stopped the connection
          if (fields.length === 0) fields = (query as unknown as { _result?: { fields?: pg.FieldDef[] } })._result?.fields ?? [];
          if (guard?.tripped) resolve({ rows, fields, rowCount: null, stopped: true });
          else reject(err);
        });
        void client.query(query as unknown as pg.QueryConfig);
      });
      p.catch(() => undefined);
      return p;
    };
    /** a statement of ours on the pipelined connection; its failure is read where it is awaited */
    const send = <R extends pg.QueryResultRow>(c: pg.QueryConfig & { rowMode?: 'array' }): Promise<pg.QueryResult<R>> => {
      running++;
      const p = client.query<R>(c as pg.QueryConfig);
      p.then(
        () => running--,
        () => running--,
      );
      return p;
    };
    let rollback: Promise<unknown> | null = null;
    const startRollback = (): void => {
      finished = true;
      rollback ??= client.query('ROLLBACK');
      rollback.catch(() => undefined);
    };
    try {
      // ONE round trip for a small result: the connection is pipelined, so our fixed prologue (one
      // simple-protocol message; the SELECT takes the snapshot, so the statement cannot switch
      // the transaction to read-write), the agent's statement (one extended-protocol statement:
      // several are refused by the server) and its first FETCH go out together
      const begin = send<{ pid: number }>({ text: `BEGIN READ ONLY; SET LOCAL statement_timeout = ${timeoutMs}; SELECT pg_backend_pid() AS pid` });
      begin.catch(() => undefined);
      const params = (open.params ?? []) as unknown[];
      const cursor = CURSOR_KEYWORDS.has(kw);
      const batch = Math.max(1, Math.min(limits.fetchRows, maxRows + 1));
      const fetchNext = (): Promise<Got> => sendRows({ text: `FETCH ${batch} FROM svc_relay_cur` });
      let main: Promise<Got>;
      let next: Promise<Got> | null = null;
      if (cursor) {
        main = sendRows({ text: `DECLARE svc_relay_cur NO SCROLL CURSOR FOR ${open.statement}`, values: params, extended: true });
        next = fetchNext();
      } else {
        main = sendRows({ text: open.statement, values: params, extended: true });
      }
      main.catch(() => undefined);
      // errors in order: a failed prologue fails what follows it, report the first cause
      const b = (await begin) as unknown as pg.QueryResult<{ pid: number }> | pg.QueryResult<{ pid: number }>[];
      const last = Array.isArray(b) ? b[b.length - 1] : b;
      const realPid = last?.rows[0]?.pid;
      if (typeof realPid === 'number') pid = realPid;
      if (cancelWanted) cancel();
      const first = await main;

      let rowCount = 0;
      let bytes = 0;
      let truncated = false;
      let command: string | undefined;
      let columnsSent = false;
      const sendColumns = async (fields: pg.FieldDef[]): Promise<void> => {
        if (columnsSent) return;
        columnsSent = true;
        const cols: Column[] = fields.map((f) => ({ name: f.name, typeOid: f.dataTypeID }));
        await q.sendColumns(cols);
      };
      // returns false when a limit was reached
      const emit = async (rows: unknown[][]): Promise<boolean> => {
        const out: Row[] = [];
        let ok = true;
        for (const row of rows) {
          if (rowCount >= maxRows) {
            ok = false;
            break;
          }
          let b = 0;
          for (const v of row) b += valueBytes(v);
          if (bytes + b > maxBytes) {
            ok = false;
            break;
          }
          bytes += b;
          rowCount++;
          out.push(row.map(toValue));
        }
        if (out.length > 0) await q.sendRows(out);
        if (!ok) truncated = true;
        return ok;
      };

      /** the guard stopped the connection: the rows before the refused one, or a refusal when there are none */
      const stopAt = async (res: Got): Promise<boolean> => {
        if (!res.stopped) return false;
        const trip = guard?.tripped;
        if (trip?.kind === 'other') {
          // e.g. an error quoting a huge value: the statement failed, and its message was not read
          finished = true;
          q.fail('RELAY_ERR_QUERY', `the database answered with a message of ${trip.declared} bytes (an error quoting a huge value?), more than the ${trip.budget} bytes the relay reads; it was not read. Check the statement on smaller values`, {
            detail: { messageBytes: trip.declared },
          });
          return true;
        }
        if (rowCount === 0 && res.rows.length === 0 && trip) {
          finished = true;
          q.fail('RELAY_ERR_ROW_TOO_LARGE', `a row of ${trip.declared} bytes is more than the ${trip.budget} bytes this query may still return; it was not read`, {
            detail: { rowBytes: trip.declared, maxBytes: trip.budget },
          });
          return true;
        }
        await sendColumns(res.fields);
        await emit(res.rows);
        truncated = true;
        finished = true;
        await q.end({ truncated: true, command: `SELECT ${rowCount}` });
        return true;
      };

      if (first.stopped) {
        await stopAt(first);
        return;
      }
      if (next) {
        for (;;) {
          const res: Got = await next;
          if (await stopAt(res)) return;
          const full = res.rows.length === batch;
          // one batch ahead: the database reads the next one while this one is sent (memory: two
          // batches at most, still bounded by the stream's credit)
          next = full && !q.signal.aborted && !timedOut ? fetchNext() : null;
          if (!full) startRollback(); // the database is done: its ROLLBACK overlaps the sending
          await sendColumns(res.fields);
          const more = await emit(res.rows);
          if (!more || !full) break;
          if (q.signal.aborted) throw q.signal.reason;
          if (timedOut) throw new Error('deadline'); // our own ceiling, below the requested deadline
          next ??= fetchNext(); // (not reached: a full batch without a prefetch threw above)
        }
        command = `SELECT ${rowCount}`;
      } else {
        startRollback();
        await sendColumns(first.fields ?? []);
        await emit(first.rows);
        command = `${first.command ?? ''} ${first.rowCount ?? rowCount}`.trim();
      }
      finished = true;
      await q.end({ ...(truncated ? { truncated: true } : {}), ...(command ? { command } : {}) });
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
      if (broken) {
        // pipelined statements still on the wire finish (cancelled) before the client ends
        client.release(new Error('cancelled at the database'));
        if (cancelling) await cancelling;
      } else {
        try {
          startRollback();
          await rollback;
          guard?.use(null); // the pool's next user reads without our budget
          client.release();
        } catch (err) {
          client.release(err instanceof Error ? err : true);
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
