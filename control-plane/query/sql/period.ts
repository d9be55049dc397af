/**
 * The row predicate a `period:` scope puts on a table's time column. A leaf of the SQL policy:
 * the demo and relay policies (../engine.ts) and the REST connectors (live/rest) build their
 * scoped tables with it, without importing the query engine.
 */
import { quoteIdent, quoteLiteral } from './quote.js';

/** A half-open UTC interval, ISO 8601 bounds (the shape of catalogue's `Interval`). */
export interface PeriodBounds {
  /** inclusive */
  readonly start: string;
  /** exclusive */
  readonly end: string;
}

function timestampLiteral(text: string): string {
  return `${quoteLiteral(text, 'a period bound')}::timestamptz`;
}

/** `column` within any of `periods` (a union of half-open intervals), or null when there is none. */
export function periodPredicate(column: string, periods: readonly PeriodBounds[]): string | null {
  if (periods.length === 0) return null;
  const col = quoteIdent(column);
  const parts = periods.map((p) => `(${col} >= ${timestampLiteral(p.start)} AND ${col} < ${timestampLiteral(p.end)})`);
  return parts.length === 1 ? (parts[0] as string) : `(${parts.join(' OR ')})`;
}
