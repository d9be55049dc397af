/**
 * Values as the embedded database will read them (`jsonb_to_recordset`): every cell normalized in
 * JS to JSON that the column's type accepts, so a hostile or odd provider value becomes NULL or
 * text, never a failed load. PostgreSQL text and jsonb cannot hold U+0000: it is removed.
 */
import type { SqlType } from './spec.js';

const INT = /^-?\d{1,18}$/;
const NUM = /^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/;

function clean(s: string): string {
  return s.includes('\u0000') ? s.replace(/\u0000/g, '') : s;
}

/** JSON value with NUL characters removed from every string (keys included). */
export function cleanJson(v: unknown, depth = 0): unknown {
  if (typeof v === 'string') return clean(v);
  if (depth > 64 || v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map((x) => cleanJson(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[clean(k)] = cleanJson(x, depth + 1);
  return out;
}

export function normalize(v: unknown, type: SqlType): unknown {
  if (v === undefined || v === null) return null;
  switch (type) {
    case 'text':
      if (typeof v === 'string') return clean(v);
      if (typeof v === 'number' || typeof v === 'boolean') return String(v);
      return clean(JSON.stringify(v));
    case 'bigint':
      if (typeof v === 'number') return Number.isSafeInteger(v) ? v : null;
      if (typeof v === 'string' && INT.test(v.trim())) return v.trim();
      return null;
    case 'numeric':
      if (typeof v === 'number') return Number.isFinite(v) ? v : null;
      if (typeof v === 'string' && v.length < 200 && NUM.test(v.trim())) return v.trim();
      return null;
    case 'boolean':
      if (typeof v === 'boolean') return v;
      if (typeof v === 'string') {
        const s = v.trim().toLowerCase();
        if (s === 'true' || s === 't') return true;
        if (s === 'false' || s === 'f') return false;
      }
      return null;
    case 'timestamptz': {
      const ms = typeof v === 'number' ? v : typeof v === 'string' ? Date.parse(v) : Number.NaN;
      if (!Number.isFinite(ms)) return null;
      const d = new Date(ms);
      return Number.isFinite(d.getTime()) ? d.toISOString() : null;
    }
    case 'jsonb':
      return cleanJson(v);
  }
}

/** The SQL type of a text value in a file (CSV), or null for an empty cell. */
export function inferText(s: string): SqlType | null {
  const t = s.trim();
  if (t === '') return null;
  if (INT.test(t)) return 'bigint';
  if (NUM.test(t) && t.length < 200) return 'numeric';
  const l = t.toLowerCase();
  if (l === 'true' || l === 'false') return 'boolean';
  if (/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)?)?$/.test(t) && Number.isFinite(Date.parse(t))) return 'timestamptz';
  return 'text';
}

/** The SQL type of a JSON value, or null for null. */
export function inferJson(v: unknown): SqlType | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'boolean') return 'boolean';
  if (typeof v === 'number') return Number.isSafeInteger(v) ? 'bigint' : 'numeric';
  if (typeof v === 'string') return 'text';
  return 'jsonb';
}

/** The narrowest type holding both. */
export function widen(a: SqlType | null, b: SqlType | null): SqlType | null {
  if (a === null) return b;
  if (b === null || a === b) return a;
  if ((a === 'bigint' && b === 'numeric') || (a === 'numeric' && b === 'bigint')) return 'numeric';
  if (a === 'jsonb' || b === 'jsonb') return 'jsonb';
  return 'text';
}
