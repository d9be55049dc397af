/**
 * Turning database values into what an agent receives as JSON, identical for every engine:
 * timestamps as ISO 8601 (UTC), dates as YYYY-MM-DD, 64-bit integers as numbers when exact
 * (else strings), numerics as numbers when the decimal text round-trips exactly (else strings),
 * bytea as base64, json/jsonb as parsed values.
 */

const INT8 = 20;
const NUMERIC = 1700;
const DATE = 1082;

export function toJsonValue(value: unknown, dataTypeID: number): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === 'bigint') {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value.toString();
  }
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) return null;
    return dataTypeID === DATE ? value.toISOString().slice(0, 10) : value.toISOString();
  }
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (typeof value === 'string' && (dataTypeID === NUMERIC || dataTypeID === INT8)) {
    const n = Number(value);
    if (Number.isFinite(n) && exactDecimal(value, n)) return n;
    return value;
  }
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  if (Array.isArray(value)) return value.map((v) => toJsonValue(v, 0));
  return value;
}

function exactDecimal(text: string, n: number): boolean {
  // '12.50' → 12.5 is exact; '12345678901234567890' is not.
  const normalized = text.includes('.') ? text.replace(/0+$/, '').replace(/\.$/, '') : text;
  return String(n) === normalized || String(n) === normalized.replace(/^(-?)0+(?=\d)/, '$1');
}
