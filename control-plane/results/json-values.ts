/**
 * Turning database values into what an agent receives as JSON, identical for every engine:
 * timestamps as ISO 8601 (UTC), dates as YYYY-MM-DD, 64-bit integers as numbers when exact
 * (else strings), numerics as numbers when the decimal text round-trips exactly (else strings),
 * bytea as base64, json/jsonb as parsed values.
 */
import { ApiError } from '../errors.js';

/**
 * The deepest a value's arrays and objects may nest in an answer. A JSON document can be nested
 * far deeper (PostgreSQL keeps json thousands of levels deep), but building and serialising such a
 * value recurses once per level and overflows the stack at a depth that depends on where it runs:
 * a fixed bound answers the same every time, well inside what every step of an answer handles.
 */
export const MAX_VALUE_DEPTH = 1000;

/**
 * Whether `value` nests arrays or objects more than `max` levels deep (a scalar is depth 0,
 * `[]` depth 1). Iterative, and it stops at the first path past `max`, so a hostile value costs
 * at most its own size.
 */
export function nestedDeeperThan(value: unknown, max: number = MAX_VALUE_DEPTH): boolean {
  if (!isContainer(value)) return false;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [unknown, number];
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v as object)) if (isContainer(child)) stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * The code an engine thread (embedded/worker.ts) reports {@link valueTooDeep} with in place of a
 * SQLSTATE: the error's class does not cross the thread, the host answers `valueTooDeep()` again.
 */
export const VALUE_TOO_DEEP_CODE = 'SVC_VALUE_TOO_DEEP';

/** whether `err` is {@link valueTooDeep}'s error */
export function isValueTooDeep(err: unknown): err is ApiError {
  return err instanceof ApiError && err.details?.['reason'] === 'value_too_deep';
}

/**
 * A value of the result nested too deeply to answer as JSON (our bound, or one a relay could not
 * even encode): the statement ran, so it is charged like a row too large (engine.ts ranAtSource).
 */
export function valueTooDeep(relayMessage?: string): ApiError {
  return new ApiError(
    'invalid_sql',
    `a value of the result nests arrays or objects more than ${MAX_VALUE_DEPTH} levels deep, too deep to answer as JSON${relayMessage ? ` (the relay: ${relayMessage})` : ''}; select a part of it (e.g. j #> '{0,0}') or its text (j::text)`,
    { reason: 'value_too_deep', max_depth: MAX_VALUE_DEPTH },
  );
}

function isContainer(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !(v instanceof Date) && !(v instanceof Uint8Array);
}

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
  // '12.50' → 12.5 is exact; '12345678901234567890' is not. Trailing zeros are counted, not
  // matched with /0+$/, which backtracks over every run of zeros that is not at the end: quadratic
  // in its length (a relay's numeric of a million zeros held the event loop for minutes)
  const normalized = text.includes('.') ? withoutTrailingZeros(text).replace(/\.$/, '') : text;
  return String(n) === normalized || String(n) === normalized.replace(/^(-?)0+(?=\d)/, '$1');
}

function withoutTrailingZeros(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 48 /* '0' */) end--;
  return text.slice(0, end);
}
