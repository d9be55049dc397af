/**
 * Building the rows an agent receives from a database result, with the row and byte caps applied
 * while reading: the same code for every engine, so `bytes` always equals the byte length of
 * `JSON.stringify(rows)` in the response.
 */
import type { ColumnInfo, ReadQueryResult, Row } from './result.js';
import { nestedDeeperThan, toJsonValue, valueTooDeep } from './json-values.js';

export function uniqueColumnNames(names: readonly string[]): string[] {
  const seen = new Map<string, number>();
  // the last suffix tried per name: each candidate is tried at most once per name, so a hostile
  // list (16,000 × "a" beside "a_2" … "a_16001") stays linear instead of quadratic
  const tried = new Map<string, number>();
  const taken = new Set(names);
  return names.map((name) => {
    const n = (seen.get(name) ?? 0) + 1;
    seen.set(name, n);
    if (n === 1) return name;
    let k = Math.max(n, (tried.get(name) ?? 0) + 1);
    let candidate = `${name}_${k}`;
    while (taken.has(candidate)) candidate = `${name}_${++k}`;
    tried.set(name, k);
    taken.add(candidate);
    return candidate;
  });
}

/**
 * One row as the API answers it: the values in column order, as JSON values under the (unique)
 * column names. A value nested more than MAX_VALUE_DEPTH levels deep throws `valueTooDeep()`
 * (400 invalid_sql, reason value_too_deep), checked before the row is built: building and
 * serialising it recurse once per level and would overflow the stack, which every engine read
 * as a lost connection or an internal error.
 */
export function jsonRow(columns: readonly ColumnInfo[], values: readonly unknown[]): Row {
  const row: Row = Object.create(null) as Row; // a column named __proto__ stays a plain key
  for (let i = 0; i < columns.length; i++) {
    const col = columns[i] as ColumnInfo;
    if (nestedDeeperThan(values[i])) throw valueTooDeep();
    row[col.name] = toJsonValue(values[i], col.type_oid);
  }
  return row;
}

/** Accumulates rows under a row cap and a byte cap. */
export class RowCollector {
  readonly rows: Row[] = [];
  truncated = false;
  /** bytes of JSON.stringify(rows): '[' + rows joined by ',' + ']' */
  bytes = 2;
  private readonly maxRows: number;
  private readonly maxBytes: number;
  private readonly columns: readonly ColumnInfo[];

  constructor(columns: readonly ColumnInfo[], maxRows: number, maxBytes: number) {
    this.columns = columns;
    this.maxRows = maxRows;
    this.maxBytes = maxBytes;
  }

  /** Add one row given as values in column order; returns false once a cap is reached. */
  add(values: readonly unknown[]): boolean {
    if (this.truncated) return false;
    if (this.rows.length >= this.maxRows) {
      this.truncated = true;
      return false;
    }
    const row = jsonRow(this.columns, values);
    const size = Buffer.byteLength(JSON.stringify(row)) + (this.rows.length > 0 ? 1 : 0);
    if (this.bytes + size > this.maxBytes) {
      this.truncated = true;
      return false;
    }
    this.bytes += size;
    this.rows.push(row);
    return true;
  }
}

/** One batch of a result as drivers give it: fields, and rows as arrays in field order. */
export interface Batch {
  readonly fields: readonly { readonly name: string; readonly dataTypeID: number }[];
  readonly rows: readonly unknown[][];
}

/** The most rows fetched from a cursor at once. */
export const FETCH_BATCH = 500;

/** How many rows `collectRows` asks for first (an engine may fetch them ahead, with the statement). */
export function firstFetch(maxRows: number): number {
  return Math.min(50, maxRows + 1);
}

/**
 * Read a result batch by batch (`next(n)` fetches up to n rows from a cursor; `once` reads a
 * single batch), stopping as soon as a cap is reached. Batch sizes follow the row size seen so
 * far, so that a batch never pulls much more than the bytes still allowed: the rest of a large
 * result is never read from the database.
 */
export async function collectRows(next: (n: number) => Promise<Batch>, caps: { maxRows: number; maxBytes: number; once: boolean }): Promise<ReadQueryResult> {
  let collector: RowCollector | undefined;
  let columns: ColumnInfo[] = [];
  let ask = firstFetch(caps.maxRows);
  for (;;) {
    const batch = await next(ask);
    if (!collector) {
      const names = uniqueColumnNames(batch.fields.map((f) => f.name));
      columns = batch.fields.map((f, i) => ({ name: names[i] as string, type_oid: f.dataTypeID }));
      collector = new RowCollector(columns, caps.maxRows, caps.maxBytes);
    }
    let more = true;
    for (const row of batch.rows) {
      if (!collector.add(row)) {
        more = false;
        break;
      }
    }
    if (caps.once || !more || batch.rows.length < ask) break;
    const perRow = Math.max(1, (collector.bytes - 2) / Math.max(1, collector.rows.length));
    const bytesLeft = caps.maxBytes - collector.bytes;
    const rowsLeft = caps.maxRows - collector.rows.length;
    // one row past either cap is enough to know the result is truncated
    ask = Math.max(1, Math.min(FETCH_BATCH, rowsLeft + 1, Math.floor(bytesLeft / perRow) + 1));
  }
  const c = collector as RowCollector;
  return { columns, rows: c.rows, truncated: c.truncated, bytes: c.bytes };
}
