/**
 * Reading a statement's result from a PostgreSQL server (the `postgres` live target and the
 * external-PostgreSQL demo engine) so that no row larger than the remaining result budget is
 * ever decoded: every client is a GuardedPgClient, whose wire guard (protocol/wire-guard.ts) sits
 * between the socket and pg's parser from the startup on; during a read it checks each
 * DataRow's declared length against `maxBytes - bytes collected so far` before the row is
 * read; rows are collected one by one as pg parses them (the `row` event), so the budget is exact. When a row does not fit, the socket is closed, `onTrip` cancels the statement at the
 * server, and the result is the rows that fit with `truncated: true` (`stopped` set). The
 * connection is unusable afterwards (`stopped` says so).
 */
import pg from 'pg';
import { guardPgClient, pgConnectionGuard, type PgClientLike, type WireTrip } from '../../protocol/wire-guard.js';
import { FETCH_BATCH, RowCollector, uniqueColumnNames } from '../results/index.js';
import type { ColumnInfo, ReadQueryResult } from '../results/index.js';

export interface GuardedRead {
  /** the statement, run directly (one round trip, e.g. EXPLAIN) or through a cursor */
  readonly sql: string;
  readonly direct: boolean;
  /** the cursor's name (declared here, on the caller's open transaction) */
  readonly cursor: string;
  readonly maxRows: number;
  readonly maxBytes: number;
  /** cancel the statement at the server: the guard closed the connection mid-result */
  readonly onTrip: (trip: WireTrip) => void;
}

export interface GuardedResult extends ReadQueryResult {
  /** set when a message was refused: the connection is closed, the result is truncated */
  readonly stopped: WireTrip | null;
}

/**
 * A pg Client whose every message, from the startup on, passes the wire guard: between reads a
 * message may be at most 16 MiB; during a read, a row at most the budget left. Every client that
 * talks to a database we do not control (and the demo engine's) is one of these.
 */
export class GuardedPgClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    guardPgClient(this as unknown as PgClientLike);
  }
}

/** Thrown when not even the first row fits: the caller answers 400 invalid_sql reason row_too_large. */
export class RowTooLargeError extends Error {
  constructor(readonly trip: WireTrip, readonly maxBytes: number) {
    super(
      `the first row of the result is ${trip.declared} bytes on the wire, more than the ${maxBytes} bytes a response may hold; it was not read. Select fewer or shorter columns (e.g. left(column, 1000)) or filter the rows`,
    );
    this.name = 'RowTooLargeError';
  }
}

/**
 * Thrown when the server sent a message other than a row (an error quoting a huge value, e.g.
 * `SELECT repeat('x', 600000000)::int`) larger than we read: the caller answers 400 invalid_sql
 * reason message_too_large.
 */
export class MessageTooLargeError extends Error {
  constructor(readonly trip: WireTrip) {
    super(
      `the database answered with a message of ${trip.declared} bytes (an error quoting a huge value?), more than the ${trip.budget} bytes read from it; it was not read. Check the statement on smaller values`,
    );
    this.name = 'MessageTooLargeError';
  }
}

export async function readGuarded(client: pg.ClientBase, o: GuardedRead): Promise<GuardedResult> {
  let columns: ColumnInfo[] = [];
  let collector: RowCollector | undefined;
  const init = (fields: readonly { name: string; dataTypeID: number }[]): RowCollector => {
    const names = uniqueColumnNames(fields.map((f) => f.name));
    columns = fields.map((f, i) => ({ name: names[i] as string, type_oid: f.dataTypeID }));
    collector = new RowCollector(columns, o.maxRows, o.maxBytes);
    return collector;
  };
  const guard = pgConnectionGuard(client);
  if (!guard) throw new Error('readGuarded: the pg client is not guarded (make it a GuardedPgClient)');
  guard.use({
    // the JSON of a row is at least its wire payload for every type but bytea (hex on the wire, base64 out) and json with spaces
    rowBudget: () => Math.max(0, o.maxBytes - (collector?.bytes ?? 2)),
    onTrip: o.onTrip,
  });

  /** one statement; resolves with the number of rows it returned, or early when the guard stopped it */
  const run = (text: string): Promise<number> =>
    new Promise((resolve, reject) => {
      let count = 0;
      const query = new pg.Query(Object.assign({ text, rowMode: 'array' as const }, { queryMode: 'extended' as const }));
      query.on('row', (row: unknown, result?: { fields: pg.FieldDef[] }) => {
        count++;
        const c = collector ?? init(result?.fields ?? []);
        c.add(row as unknown[]);
      });
      query.on('end', (result: { fields?: pg.FieldDef[] }) => {
        if (!collector && result.fields && result.fields.length > 0) init(result.fields);
        resolve(count);
      });
      query.on('error', (err: Error) => (guard.tripped ? resolve(count) : reject(err)));
      void client.query(query as unknown as pg.QueryConfig);
    });

  try {
    if (o.direct) await run(o.sql);
    else {
      await run(`DECLARE ${o.cursor} NO SCROLL CURSOR FOR ${o.sql}`);
      let ask = Math.min(50, o.maxRows + 1);
      for (;;) {
        const got = await run(`FETCH ${ask} FROM ${o.cursor}`);
        const c = collector;
        if (guard.tripped || !c || c.truncated || got < ask) break;
        const perRow = Math.max(1, (c.bytes - 2) / Math.max(1, c.rows.length));
        const bytesLeft = o.maxBytes - c.bytes;
        const rowsLeft = o.maxRows - c.rows.length;
        // one row past either cap is enough to know the result is truncated
        ask = Math.max(1, Math.min(FETCH_BATCH, rowsLeft + 1, Math.floor(bytesLeft / perRow) + 1));
      }
    }
  } finally {
    if (!guard.tripped) guard.use(null);
  }
  const c = collector ?? new RowCollector(columns, o.maxRows, o.maxBytes);
  if (guard.tripped) {
    if (guard.tripped.kind === 'other') throw new MessageTooLargeError(guard.tripped);
    if (c.rows.length === 0) throw new RowTooLargeError(guard.tripped, o.maxBytes);
    return { columns, rows: c.rows, truncated: true, bytes: c.bytes, stopped: guard.tripped };
  }
  return { columns, rows: c.rows, truncated: c.truncated, bytes: c.bytes, stopped: null };
}
