/**
 * Query results, whatever ran the statement: their shape (./result.ts), how rows are collected
 * under the row and byte caps (./rows.ts) and how database values become JSON (./json-values.ts).
 */
export type { ColumnInfo, ReadQueryResult, Row } from './result.js';
export { collectRows, FETCH_BATCH, firstFetch, jsonRow, RowCollector, uniqueColumnNames, type Batch } from './rows.js';
export { isValueTooDeep, toJsonValue, VALUE_TOO_DEEP_CODE, valueTooDeep } from './json-values.js';
