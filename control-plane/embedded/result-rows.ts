/**
 * Building the rows an agent receives from a database result, with the row and byte caps applied
 * while reading: the same code for every engine, so `bytes` always equals the byte length of
 * `JSON.stringify(rows)` in the response.
 */
import type { ColumnInfo, ReadQueryResult, Row } from './messages.js';
import { toJsonValue } from './json-values.js';

export function uniqueColumnNames(names: readonly string[]): string[] {
  const seen = new Map<string, number>();
  const taken = new Set(names);
  return names.map((name) => {
    const n = (seen.get(name) ?? 0) + 1;
    seen.set(name, n);
    if (n === 1) return name;
    let k = n;
    let candidate = `${name}_${k}`;
    while (taken.has(candidate)) candidate = `${name}_${++k}`;
    taken.add(candidate);
    return candidate;
  });
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
    const row: Row = Object.create(null) as Row; // a column named __proto__ stays a plain key
    for (let i = 0; i < this.columns.length; i++) {
      const col = this.columns[i] as ColumnInfo;
      row[col.name] = toJsonValue(values[i], col.type_oid);
    }
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

export const FETCH_BATCH = 500;

/**
 * Read a result batch by batch (`FETCH ${FETCH_BATCH}` from a cursor, or one batch when `once`),
 * stopping as soon as a cap is reached: the rest of a large result is never pulled.
 */
export async function collectRows(next: () => Promise<Batch>, caps: { maxRows: number; maxBytes: number; once: boolean }): Promise<ReadQueryResult> {
  let collector: RowCollector | undefined;
  let columns: ColumnInfo[] = [];
  for (;;) {
    const batch = await next();
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
    if (caps.once || !more || batch.rows.length < FETCH_BATCH) break;
  }
  const c = collector as RowCollector;
  return { columns, rows: c.rows, truncated: c.truncated, bytes: c.bytes };
}
