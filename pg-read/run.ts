/**
 * `runReadOnly`: one read on a connected, guarded pg client (GuardedPgClient), under the caller's
 * caps: a READ ONLY transaction, a statement_timeout, a row cap (the Execute's limit) and a byte
 * cap (bytes as the caller measures its rows), one write and one round trip (portal.ts), rows
 * handed on in bounded batches as they arrive, and the statement cancelled at the database
 * (CancelRequest, cancel.ts) when the deadline passes, the signal aborts, the byte cap is reached
 * or the wire guard refuses a message while it still runs.
 *
 * While more than about 256 KiB (or two batches) of rows waits for `onRows` to take it, the
 * socket is paused: TCP holds the database back and memory stays bounded whatever the consumer's
 * speed. A DataRow declaring more bytes than `rowBudget` allows is never decoded: the guard
 * closes the connection first (a 600 MB value would otherwise be built into a string).
 *
 * The outcome comes as soon as the statement's answer is in (or the read failed); `settled` then
 * says, once the rest of the answer came (ReadyForQuery; after a failure, our ROLLBACK), whether
 * the connection may be used again. A connection whose statement was cancelled never is: the
 * cancel may land on its next statement.
 */
import pg from 'pg';
import { pgConnectionGuard, type WireTrip } from '../protocol/wire-guard.js';
import { sendCancelRequest, within, type CancelTarget } from './cancel.js';
import { PortalQuery, RELEASE_SESSION_LOCKS, type PortalSink } from './portal.js';

export interface ShapedRow<R> {
  readonly row: R;
  /** what the row counts against maxBytes */
  readonly bytes: number;
}

export interface ReadOnlyRequest<R = unknown[]> {
  readonly text: string;
  readonly params?: readonly unknown[];
  /** statement_timeout, ms */
  readonly timeoutMs: number;
  /** how long the whole read may take, ms from now (default `timeoutMs`); then it is cancelled at the database and fails with `timeout` */
  readonly deadlineMs?: number;
  readonly maxRows: number;
  readonly maxBytes: number;
  /** the statement that opens the transaction (default `BEGIN READ ONLY`); null: the caller opened it, read-only, on this client */
  readonly begin?: string | null;
  /** trusted statements, one each, run after BEGIN and the timeout's set_config, before the statement (e.g. `SET LOCAL …`) */
  readonly settings?: readonly string[];
  /** read through a NO SCROLL cursor of this name: only a query can be declared (a lower-case identifier) */
  readonly cursor?: string;
  /** aborted: the statement is cancelled at the database and the read fails with `aborted` */
  readonly signal?: AbortSignal;
  /** the row as handed to `onRows`, and its bytes; default: the parsed values as they are, measured by valueBytes (then R is unknown[]). A throw fails the read (`consumer`) */
  readonly shape?: (values: unknown[]) => ShapedRow<R>;
  /**
   * bytes the statement's next row may declare on the wire; a larger row is refused before it is
   * decoded. `bytes`: of the rows taken, as `shape` measured them; `wireBytes`: of every row
   * message let through since the read began, as they declared themselves on the wire (the rows
   * of our own statements before it included)
   */
  readonly rowBudget: (bytes: number, wireBytes: number) => number;
  /** rows per onRows batch (default 500) */
  readonly batchRows?: number;
  /** the statement's columns: when they arrive, or with [] before the outcome when it returned none. A rejection fails the read (`consumer`) */
  readonly onColumns?: (fields: pg.FieldDef[]) => void | Promise<unknown>;
  /** a batch of rows; one call at a time, the next once its promise settles (the consumer's credit). A rejection fails the read (`consumer`) */
  readonly onRows?: (rows: R[]) => void | Promise<unknown>;
  /** told each time a CancelRequest is sent */
  readonly onCancel?: () => void;
}

export interface ReadResult {
  /** the statement's columns ([] when it returns no rows) */
  readonly fields: pg.FieldDef[];
  readonly rows: number;
  readonly bytes: number;
  /** a cap was reached, or the guard refused a row after others: the rows are the ones that fit */
  readonly truncated: boolean;
  /** the command tag with its row count (`SELECT 3`), when not truncated */
  readonly command: string | undefined;
}

export type ReadFailure =
  /** the deadline passed (the statement was cancelled at the database) */
  | { readonly kind: 'timeout' }
  /** the signal aborted */
  | { readonly kind: 'aborted'; readonly reason: unknown }
  /** the statement is only comments or semicolons */
  | { readonly kind: 'empty' }
  /** not even the first row fits what the read may still return; it was not read */
  | { readonly kind: 'row_too_large'; readonly trip: WireTrip }
  /** the database sent another message (an error quoting a huge value) larger than we read; it was not read */
  | { readonly kind: 'message_too_large'; readonly trip: WireTrip }
  /**
   * the database failed the read, the connection was lost, or a parameter could not be sent:
   * classify with classifyPgError. `before`: it failed before the statement (or its DECLARE) ran:
   * the transaction, the timeout or a setting (or the connection) failed, not the statement
   */
  | { readonly kind: 'database'; readonly error: unknown; readonly before: boolean }
  /** onColumns or onRows failed */
  | { readonly kind: 'consumer'; readonly error: unknown };

export type ReadOutcome = ({ readonly ok: true; readonly result: ReadResult } | { readonly ok: false; readonly failure: ReadFailure }) & {
  /** true once the connection may be used again; false: end it (never rejects) */
  readonly settled: Promise<boolean>;
};

/** how long the end of the answer (or the rollback after a failure) may take once the statement is over */
export const SETTLE_TIMEOUT_MS = 2000;
/** how long a CancelRequest socket may take to connect and be closed by the server */
export const CANCEL_TIMEOUT_MS = 2000;
/**
 * A CancelRequest that reaches the backend while it waits for the client's next message (before
 * the statement began: the write was still on its way, or the backend between two messages of
 * it) is ignored by the server, and the statement then runs on. While no answer says that it
 * ended, the cancel is sent again this often, this many times.
 */
export const CANCEL_REPEAT_MS = 500;
export const CANCEL_REPEATS = 4;
/** most bytes a row of our own statements may declare (set_config's, the lock release's) */
const OWN_ROW_BYTES = 1024;
/** rows (as values) not yet handed on: at most about this many bytes before the socket is paused (then at most one socket read, 64 KiB, more) */
const HIGH_WATER = 256 * 1024;

/** The bytes a parsed value counts for (the relay's measure of its byte cap). */
export function valueBytes(v: unknown): number {
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

type PgClient = pg.ClientBase & CancelTarget;

/** the protocol counts a Bind's parameters in 16 bits */
const MAX_PARAMS = 65_535;

/**
 * Why the statement cannot be written as it is, as the error the server would answer it with
 * (classified as the statement's by classifyPgError), else null. A NUL ends the text in the
 * Parse message (what follows would be read as its other fields), and 65 536 parameters are
 * sent as 0: the server answers either with a protocol-violation SQLSTATE, class 08, which says
 * the connection failed.
 */
function unsendable(text: string, params: number): pg.DatabaseError | null {
  const refuse = (code: string, message: string): pg.DatabaseError => Object.assign(new pg.DatabaseError(message, 0, 'error'), { severity: 'ERROR', code });
  if (text.includes('\0')) return refuse('22021', 'the statement holds a NUL character (0x00), which PostgreSQL does not accept in a statement');
  if (params > MAX_PARAMS) return refuse('54023', `the statement has ${params} parameters; at most ${MAX_PARAMS} can be sent`);
  return null;
}

/** The read; see the file's comment. Throws only when the client is not guarded (a GuardedPgClient). */
export async function runReadOnly<R = unknown[]>(client: pg.ClientBase, req: ReadOnlyRequest<R>): Promise<ReadOutcome> {
  const found = pgConnectionGuard(client);
  if (!found) throw new Error('runReadOnly: the pg client is not guarded (make it a GuardedPgClient)');
  const guard = found;
  const c = client as PgClient;
  const stream = (client as unknown as { connection: { stream: { pause(): void; resume(): void } } }).connection.stream;
  const { maxRows, maxBytes, signal } = req;
  const batchRows = Math.max(1, req.batchRows ?? 500);
  const timeoutMs = Math.max(1, Math.floor(req.timeoutMs));
  const deadlineMs = Math.max(0, req.deadlineMs ?? timeoutMs);
  if (req.cursor !== undefined && !/^[a-z_][a-z0-9_]*$/.test(req.cursor)) throw new Error(`runReadOnly: bad cursor name ${req.cursor}`);
  // (an Execute limit of 0, from a cap of -1, is every row; NaN compares false with every count)
  if (!Number.isSafeInteger(maxRows) || maxRows < 0) throw new Error(`runReadOnly: maxRows must be a whole number ≥ 0, got ${maxRows}`);
  if (!(maxBytes >= 0)) throw new Error(`runReadOnly: maxBytes must be a number ≥ 0, got ${maxBytes}`);

  // nothing was sent; a transaction the caller opened is ended here
  const unsent = (failure: ReadFailure): ReadOutcome => {
    const settled = req.begin === null ? within(client.query(`ROLLBACK; ${RELEASE_SESSION_LOCKS}`), SETTLE_TIMEOUT_MS).then(() => true, () => false) : Promise.resolve(true);
    return { ok: false, failure, settled };
  };
  if (signal?.aborted) return unsent({ kind: 'aborted', reason: signal.reason });
  const refused = unsendable(req.text, req.params?.length ?? 0);
  if (refused) return unsent({ kind: 'database', error: refused, before: false });

  // the read's state, as the database's messages and the consumer move it
  let finished = false; // the outcome is out (the database may still be answering)
  let settled = false; // the database answered everything we wrote (ReadyForQuery or an error)
  let failure: unknown = null;
  let failedBefore = false;
  let broken = false; // never used again (cancelled, or the guard closed it)
  let timedOut = false;
  let aborted = false;
  let cancelling: Promise<void> | null = null;
  let paused = false;
  let fields: pg.FieldDef[] | null = null;
  let rowCount = 0;
  let bytes = 0;
  let truncated = false;
  let rowCapped = false; // the row past the cap came: the Execute's limit ends the statement by itself
  let command: string | undefined;
  let statementDone = false;
  let emptyStatement = false;
  let pending: R[] = [];
  let pendingBytes = 0;
  let pumping: Promise<void> | null = null;
  let consumerError: unknown = null;
  let wake: (() => void) | null = null;
  const notify = (): void => {
    const w = wake;
    wake = null;
    w?.();
  };
  const until = (cond: () => boolean): Promise<void> =>
    new Promise<void>((resolve) => {
      const check = (): void => {
        if (cond()) resolve();
        else wake = check;
      };
      check();
    });

  /** CancelRequest for what runs now; the connection is not reused after it (the cancel may land late) */
  const cancel = (): void => {
    if (settled || cancelling !== null) return;
    broken = true;
    req.onCancel?.();
    cancelling = sendCancelRequest(c, CANCEL_TIMEOUT_MS);
  };

  const query = new PortalQuery(
    {
      text: req.text,
      params: req.params ?? [],
      timeoutMs,
      rowLimit: Math.min(maxRows + 1, 0x7fffffff),
      begin: req.begin === undefined ? 'BEGIN READ ONLY' : req.begin,
      settings: req.settings ?? [],
      cursor: req.cursor,
    },
    sinkFor(),
  );

  // a DataRow declaring more bytes than the budget left is never decoded: the guard closes the
  // connection before pg reads it. Our own statements' rows have a small budget of their own
  const wireBefore = guard.rowBytes;
  guard.use({
    rowBudget: () => (query.inStatement ? Math.max(0, req.rowBudget(bytes, guard.rowBytes - wireBefore)) : OWN_ROW_BYTES),
    onTrip: () => {
      broken = true; // the connection is closed: never used again
      cancel();
      notify();
    },
  });
  // aborted (by the caller, or because its consumer went away): the statement is cancelled if it
  // still runs (once it is done only the ROLLBACK's answer is on its way, and a CancelRequest
  // would only cost the connection)
  const onAbort = (): void => {
    aborted = true;
    if (!statementDone) cancel();
    notify();
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => {
    timedOut = true;
    cancel();
    notify();
  }, deadlineMs);
  timer.unref?.();

  const shape = req.shape;
  const onRows = req.onRows;
  /** one onRows at a time (its promise is the consumer's credit); the socket is paused while rows pile up */
  const pump = (): void => {
    if (pumping || pending.length === 0 || consumerError !== null) return;
    pumping = (async () => {
      while (pending.length > 0 && consumerError === null && !aborted) {
        // at most batchRows rows a batch (rows that arrived while the last one waited queue up)
        const out = pending.length <= batchRows ? pending : pending.slice(0, batchRows);
        pending = out === pending ? [] : pending.slice(batchRows);
        pendingBytes = pending.length === 0 ? 0 : pendingBytes * (pending.length / (pending.length + out.length));
        if (paused && pendingBytes < HIGH_WATER / 2 && pending.length < batchRows) {
          paused = false;
          stream.resume();
        }
        try {
          await onRows?.(out);
        } catch (err) {
          consumerError = err;
        }
      }
      pumping = null;
      notify();
    })();
  };
  let columnsSent = false;
  const sendColumns = (f: pg.FieldDef[]): void => {
    if (columnsSent || finished) return;
    columnsSent = true;
    try {
      const p = req.onColumns?.(f);
      if (p) p.then(undefined, (err: unknown) => void (consumerError ??= err));
    } catch (err) {
      consumerError ??= err;
    }
  };
  /** the caps are reached: stop reading, and stop the statement at the database unless it finished */
  const stopReading = (): void => {
    truncated = true;
    if (!statementDone) cancel();
  };

  function sinkFor(): PortalSink {
    return {
      columns: (f) => {
        fields = f;
        sendColumns(f);
      },
      row: (values) => {
        if (truncated || finished) return;
        if (rowCount >= maxRows) {
          // the row past the cap: the Execute's limit makes it the last, PortalSuspended follows
          truncated = rowCapped = true;
          return;
        }
        let row: R;
        let b = 0;
        if (shape) {
          let s: ShapedRow<R>;
          try {
            s = shape(values);
          } catch (err) {
            // a row the consumer cannot take (a value nested too deeply to answer): the read fails
            // with it, the statement is stopped; not thrown into the driver, which would take it
            // for a broken connection
            consumerError ??= err;
            stopReading();
            notify();
            return;
          }
          row = s.row;
          b = s.bytes;
        } else {
          for (const v of values) b += valueBytes(v);
          row = values as R;
        }
        if (bytes + b > maxBytes) {
          stopReading();
          return;
        }
        bytes += b;
        rowCount++;
        pending.push(row);
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
        failedBefore = query.beforeStatement;
        settled = true;
        notify();
      },
      ready: () => {
        settled = true;
        notify();
      },
    };
  }

  void client.query(query as unknown as pg.QueryConfig);
  const outcome = await decide();
  finished = true;
  const fate = settle();
  return outcome.ok ? { ok: true, result: outcome.result, settled: fate } : { ok: false, failure: outcome.failure, settled: fate };

  /** the outcome: once the database answered (or failed), the caps stopped us, or the caller went away */
  async function decide(): Promise<{ ok: true; result: ReadResult } | { ok: false; failure: ReadFailure }> {
    await until(() => settled || statementDone || truncated || aborted || timedOut || consumerError !== null || guard.tripped !== null);
    if (aborted) return { ok: false, failure: { kind: 'aborted', reason: signal?.reason } };
    if (timedOut) return { ok: false, failure: { kind: 'timeout' } };
    // as a statement of only whitespace would be answered before it is sent
    if (emptyStatement) return { ok: false, failure: { kind: 'empty' } };
    const trip = guard.tripped;
    if ((failure !== null || trip) && !truncated && !statementDone) {
      // e.g. an error quoting a huge value: the statement failed, and its message was not read
      if (trip?.kind === 'other') return { ok: false, failure: { kind: 'message_too_large', trip } };
      if (trip && rowCount === 0) return { ok: false, failure: { kind: 'row_too_large', trip } };
      if (!trip) return { ok: false, failure: { kind: 'database', error: failure, before: failedBefore } };
      truncated = true; // the guard stopped a row after others: the rows before it, truncated
    }
    // the rows read so far go out, then the outcome
    pump();
    if (pending.length > 0 || pumping !== null) await until(() => (pending.length === 0 && pumping === null) || consumerError !== null || aborted || timedOut);
    if (aborted) return { ok: false, failure: { kind: 'aborted', reason: signal?.reason } };
    if (consumerError !== null) return { ok: false, failure: { kind: 'consumer', error: consumerError } };
    // (rows still on their way to the consumer when the deadline passed would be missing from a result)
    if (timedOut && (!statementDone || pending.length > 0 || pumping !== null)) return { ok: false, failure: { kind: 'timeout' } };
    sendColumns([]);
    if (consumerError !== null) return { ok: false, failure: { kind: 'consumer', error: consumerError } };
    return { ok: true, result: { fields: fields ?? [], rows: rowCount, bytes, truncated, command: truncated ? undefined : command } };
  }

  /** the rest of the answer, then whether the connection may be used again */
  function settle(): Promise<boolean> {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    // nothing more is read: a statement still running is stopped (unless the row limit ends it)
    if (!statementDone && !rowCapped) cancel();
    if (paused) {
      paused = false;
      stream.resume();
    }
    // (mostly: the whole answer came with the statement's)
    if (settled && failure === null && !broken && !query.unsent) {
      guard.use(null);
      return Promise.resolve(true);
    }
    return finish();
  }

  async function finish(): Promise<boolean> {
    // the CancelRequest is delivered first: behind a pooler (PgBouncer) its key is this client
    // connection's, and a pooler drops a cancel whose connection is gone. Then whatever is still
    // on the wire is dropped with the connection
    if (broken || query.unsent) {
      if (cancelling) {
        await cancelling;
        for (let i = 0; i < CANCEL_REPEATS && !settled; i++) {
          let waited = false;
          const step = setTimeout(() => {
            waited = true;
            notify();
          }, CANCEL_REPEAT_MS);
          await until(() => settled || waited);
          clearTimeout(step);
          if (!settled) await sendCancelRequest(c, CANCEL_TIMEOUT_MS);
        }
      }
      return false;
    }
    // the rest of the answer (ROLLBACK, lock release, ReadyForQuery) is due at once; a database
    // or network gone silent must not hold the connection forever
    let silent = false;
    const settleTimer = setTimeout(() => {
      silent = true;
      notify();
    }, SETTLE_TIMEOUT_MS);
    try {
      await until(() => settled || broken || silent);
      if (broken || !settled) {
        if (cancelling) await cancelling;
        return false;
      }
      guard.use(null); // our own statements, and the next user of the connection, read without this read's budget
      // after an error the transaction is aborted (or was never begun): end it before reuse (the
      // failure skipped the pipeline's own ROLLBACK and lock release)
      if (failure !== null) await within(client.query(`ROLLBACK; ${RELEASE_SESSION_LOCKS}`), SETTLE_TIMEOUT_MS);
      return true;
    } catch {
      return false;
    } finally {
      clearTimeout(settleTimer);
    }
  }
}
