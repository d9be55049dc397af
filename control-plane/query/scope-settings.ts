/**
 * The control plane's side of the demo's row-security layer: the trusted `SET LOCAL` statements
 * that tell it a transaction's scope. The functions that read these settings, and the policies
 * built on them, are SCOPE_FUNCTIONS in demo/load.ts.
 */
import { quoteLiteral } from './sql/quote.js';

/** The trusted `SET LOCAL` statements that tell the row-security layer a transaction's scope. */
export function scopeSettings(tables: readonly { schema: string; table: string }[], periods: readonly { start: string; end: string }[]): string[] {
  const starts = periods.map((p) => p.start).sort();
  const ends = periods.map((p) => p.end).sort();
  return [
    `SET LOCAL "svc.tables" = ${quoteLiteral(tables.map((t) => `${t.schema}.${t.table}`).join(','))}`,
    `SET LOCAL "svc.period_n" = '${periods.length}'`,
    `SET LOCAL "svc.period_lo" = ${quoteLiteral(starts[0] ?? '-infinity')}`,
    `SET LOCAL "svc.period_hi" = ${quoteLiteral(ends[ends.length - 1] ?? 'infinity')}`,
    `SET LOCAL "svc.periods" = ${quoteLiteral(periods.map((p) => `${p.start}/${p.end}`).join(','))}`,
  ];
}
