/**
 * Runs one tunnel query on the customer's database under the relay's OWN ceiling, whatever the
 * control plane asks: one statement (extended protocol), a READ ONLY transaction, a
 * statement_timeout (the smaller of the requested deadline and our maximum), row and byte
 * limits, results read through a cursor `FETCH n` at a time and streamed with
 * `incoming.sendRows` (which waits for credit, so memory stays bounded), ROLLBACK always, and
 * cancellation at the database (pg_cancel_backend on a separate connection) when the stream is
 * cancelled or its deadline passes.
 */
import pg from 'pg';
import type { Column, IncomingQuery, Row, Value } from '../protocol/index.js';

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
  readonly pool: pg.Pool;
  close(): Promise<void>;
}

interface PgErrorLike {
  code?: string;
  message?: string;
  severity?: string;
}

const CURSOR_KEYWORDS = new Set(['select', 'values', 'with', 'table']);

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
  if (sqlstate === '25006') return { code: 'RELAY_ERR_READ_ONLY', message: `refused: the relay runs queries read-only (${msg})`, detail: { sqlstate } };
  if (sqlstate === '42601' && /multiple commands/.test(msg)) return { code: 'RELAY_ERR_MULTI_STATEMENT', message: 'refused: one statement per query', detail: { sqlstate } };
  if (sqlstate === '57014') return { code: 'RELAY_ERR_TIMEOUT', message: `the query was cancelled at the database: ${msg}`, detail: { sqlstate } };
  if (sqlstate?.startsWith('08') || sqlstate === '57P01' || sqlstate === '57P03' || sqlstate === '53300' || (!sqlstate && typeof e.code === 'string')) {
    return { code: 'RELAY_ERR_DATABASE_UNAVAILABLE', message: `the database is unavailable: ${msg}`, retryable: true, ...(sqlstate ? { detail: { sqlstate } } : {}) };
  }
  if (sqlstate) return { code: 'RELAY_ERR_QUERY', message: msg, detail: { sqlstate } };
  return { code: 'RELAY_ERR_QUERY', message: msg };
}

export function createExecutor(opts: ExecutorOptions): Executor {
  const limits: ExecutorLimits = { ...DEFAULT_EXECUTOR_LIMITS, ...(opts.limits ?? {}) };
  const appName = opts.applicationName ?? 'svc-relay';
  const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 4, application_name: appName, idleTimeoutMillis: 30_000 });
  pool.on('error', () => {
    /* an idle client died; the pool replaces it */
  });
  let inflight = 0;

  async function cancelBackend(pid: number): Promise<void> {
    const c = new pg.Client({ connectionString: opts.databaseUrl, application_name: `${appName}-cancel` });
    c.on('error', () => {});
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
    let broken = false;
    let pid: number | null = null;
    let timedOut = false;
    let cancelling: Promise<void> | null = null;
    const cancel = (): void => {
      if (pid !== null && cancelling === null) {
        broken = true;
        cancelling = cancelBackend(pid);
      }
    };
    const onAbort = (): void => cancel();
    q.signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => {
      timedOut = true;
      cancel();
    }, timeoutMs);
    timer.unref?.();
    const extended = <T extends pg.QueryConfig>(c: T): T => Object.assign(c, { queryMode: 'extended' });
    try {
      await client.query('BEGIN READ ONLY');
      // takes the snapshot too, so the statement cannot switch the transaction to read-write
      const r = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      pid = r.rows[0]?.pid ?? null;
      await client.query(`SET LOCAL statement_timeout = ${timeoutMs}`);
      if (q.signal.aborted) cancel();
      if (q.signal.aborted || timedOut) throw q.signal.reason ?? new Error('cancelled');

      const params = (open.params ?? []) as unknown[];
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

      if (CURSOR_KEYWORDS.has(kw)) {
        await client.query(extended({ text: `DECLARE svc_relay_cur NO SCROLL CURSOR FOR ${open.statement}`, values: params }));
        const batch = Math.max(1, Math.min(limits.fetchRows, maxRows + 1));
        for (;;) {
          const res = await client.query({ text: `FETCH ${batch} FROM svc_relay_cur`, rowMode: 'array' });
          await sendColumns(res.fields);
          const more = await emit(res.rows as unknown[][]);
          if (!more || res.rows.length < batch) break;
          if (q.signal.aborted) throw q.signal.reason;
        }
        command = `SELECT ${rowCount}`;
      } else {
        const res = await client.query(extended({ text: open.statement, values: params, rowMode: 'array' as const }));
        await sendColumns(res.fields ?? []);
        await emit((res.rows ?? []) as unknown[][]);
        command = `${res.command ?? ''} ${res.rowCount ?? rowCount}`.trim();
      }
      await q.end({ ...(truncated ? { truncated: true } : {}), ...(command ? { command } : {}) });
    } catch (err) {
      if (q.isOpen) {
        if (timedOut) q.fail('RELAY_ERR_TIMEOUT', `the query ran past its ${timeoutMs} ms deadline and was cancelled at the database`, { detail: { timeoutMs } });
        else {
          const m = mapError(err);
          q.fail(m.code, m.message, { ...(m.retryable ? { retryable: true } : {}), ...(m.detail ? { detail: m.detail } : {}) });
        }
      }
      if ((err as PgErrorLike).code === undefined || !/^[0-9A-Z]{5}$/.test(String((err as PgErrorLike).code))) {
        // not a database error (e.g. our stream was cancelled): the connection may be mid-statement
        if (!cancelling && pid !== null && !q.isOpen) cancel();
      }
    } finally {
      clearTimeout(timer);
      q.signal.removeEventListener('abort', onAbort);
      if (cancelling) await cancelling;
      try {
        if (broken) throw new Error('cancelled connection');
        await client.query('ROLLBACK');
        client.release();
      } catch (err) {
        client.release(err instanceof Error ? err : true);
      }
    }
  }

  return {
    handle,
    limits,
    get inflight() {
      return inflight;
    },
    pool,
    close: () => pool.end(),
  };
}
