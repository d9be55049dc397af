/**
 * A read on a PostgreSQL server the control plane reaches over the network (the `postgres` live
 * target, the external-PostgreSQL demo engine) as the API answers it: pg-read's `runReadOnly`
 * (one round trip: READ ONLY, statement_timeout, a NO SCROLL cursor unless the statement runs
 * directly, the row limit, ROLLBACK; cancelled at the database at the deadline or on abort), its
 * rows collected as JSON rows under the API's caps, so `bytes` is the byte length of
 * `JSON.stringify(rows)` as for every engine (results/rows.ts). No row larger than the
 * bytes left is ever decoded (pg-read's wire guard); a refused one is answered here:
 * `400 invalid_sql` reason `row_too_large` or `message_too_large`, or the rows before it, truncated.
 */
import type pg from 'pg';
import { runReadOnly, type ReadFailure } from '../../pg-read/index.js';
import { isValueTooDeep, jsonRow, uniqueColumnNames, type ColumnInfo, type ReadQueryResult, type Row } from '../results/index.js';
import { ApiError } from '../errors.js';

export interface CollectedRead {
  readonly sql: string;
  /** read through a NO SCROLL cursor of this name; undefined: the statement runs directly (EXPLAIN) */
  readonly cursor: string | undefined;
  /** statement_timeout, ms */
  readonly timeoutMs: number;
  /** how long the whole read may take, ms from now */
  readonly deadlineMs: number;
  readonly maxRows: number;
  readonly maxBytes: number;
  /** default BEGIN READ ONLY; null: the caller opened the (read-only) transaction */
  readonly begin?: string | null;
  /** trusted statements run before the statement (SET LOCAL …) */
  readonly settings?: readonly string[];
  readonly signal?: AbortSignal;
}

export type CollectedOutcome = {
  /** true once the connection may be used again; false: end it (never rejects) */
  readonly settled: Promise<boolean>;
} & ({ readonly ok: true; readonly result: ReadQueryResult } | { readonly ok: false; readonly failure: ReadFailure });

/**
 * The read on `client` (a GuardedPgClient). Its rows count as `JSON.stringify(rows)` does: `[`
 * and `]`, each row's JSON, a comma between rows; so each row counts one byte more than its
 * JSON, against a cap one byte less than `maxBytes`.
 */
export async function readCollected(client: pg.ClientBase, o: CollectedRead): Promise<CollectedOutcome> {
  let columns: ColumnInfo[] = [];
  const rows: Row[] = [];
  const out = await runReadOnly<Row>(client, {
    text: o.sql,
    cursor: o.cursor,
    timeoutMs: o.timeoutMs,
    deadlineMs: o.deadlineMs,
    maxRows: o.maxRows,
    maxBytes: o.maxBytes - 1,
    ...(o.begin !== undefined ? { begin: o.begin } : {}),
    ...(o.settings ? { settings: o.settings } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
    onColumns: (fields) => {
      const names = uniqueColumnNames(fields.map((f) => f.name));
      columns = fields.map((f, i) => ({ name: names[i] as string, type_oid: f.dataTypeID }));
    },
    shape: (values) => {
      const row = jsonRow(columns, values);
      return { row, bytes: Buffer.byteLength(JSON.stringify(row)) + 1 };
    },
    // the JSON of a row is at least its wire payload for every type but bytea (hex on the wire,
    // base64 out) and json with spaces: what is left of maxBytes bounds the row's wire size
    rowBudget: (bytes) => o.maxBytes - (bytes === 0 ? 2 : bytes + 1),
    onRows: (batch) => {
      for (const r of batch) rows.push(r);
    },
  });
  if (!out.ok) return out;
  const r = out.result;
  return { ok: true, settled: out.settled, result: { columns, rows, truncated: r.truncated, bytes: r.rows === 0 ? 2 : r.bytes + 1 } };
}

/**
 * A message the wire guard refused, or a value nested too deeply to answer (results/rows.ts
 * jsonRow, thrown by `shape`), as the API answers it (400 invalid_sql); undefined for other failures.
 */
export function oversizeError(f: ReadFailure, maxBytes: number): ApiError | undefined {
  if (f.kind === 'consumer' && isValueTooDeep(f.error)) return f.error;
  if (f.kind === 'row_too_large') {
    return new ApiError(
      'invalid_sql',
      `the first row of the result is ${f.trip.declared} bytes on the wire, more than the ${maxBytes} bytes a response may hold; it was not read. Select fewer or shorter columns (e.g. left(column, 1000)) or filter the rows`,
      { reason: 'row_too_large', row_bytes: f.trip.declared, max_bytes: maxBytes },
    );
  }
  if (f.kind === 'message_too_large') {
    return new ApiError(
      'invalid_sql',
      `the database answered with a message of ${f.trip.declared} bytes (an error quoting a huge value?), more than the ${f.trip.budget} bytes read from it; it was not read. Check the statement on smaller values`,
      { reason: 'message_too_large', message_bytes: f.trip.declared },
    );
  }
  return undefined;
}
