/**
 * Rendering for people (aligned tables, key: value lines) and for programs (JSON, JSONL, CSV),
 * and a spinner on stderr shown only when stderr is a terminal.
 */

export interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
  /** stderr is a terminal: a spinner may be drawn there */
  errIsTTY: boolean;
  /** the whole of standard input (svc credentials add --secret-stdin) */
  readStdin: () => Promise<string>;
}

const MAX_CELL = 60;

// C0 (but tab, and line feed where kept), DEL and C1: what a terminal may act on
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f-\x9f]/g;
const CONTROL_BUT_LF = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/**
 * `s` with control characters shown as `\xNN`: human output shows what others wrote (a relay's
 * version, rows, a database's or relay's error messages), and written raw an escape sequence
 * acts on the terminal (clears it, sets its title, rewrites what was printed). `keepLf`: line
 * feeds stay (svc's own multi-line messages).
 */
export function printable(s: string, keepLf = false): string {
  return s.replace(keepLf ? CONTROL_BUT_LF : CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** `null`: how a null shows (`null`, as in key: value lines; a query result's tables show SQL's `NULL`) */
export function cell(v: unknown, nullText = 'null'): string {
  let s: string;
  if (v === null || v === undefined) s = v === null ? nullText : '';
  else if (typeof v === 'object') s = JSON.stringify(v);
  else s = String(v);
  s = printable(s.replace(/[\r\n\t]/g, ' '));
  return s.length > MAX_CELL ? `${s.slice(0, MAX_CELL - 1)}…` : s;
}

/** An aligned text table; numbers right-aligned. `nullText`: as `cell`'s. */
export function table(columns: readonly string[], rows: readonly Record<string, unknown>[], nullText = 'null'): string {
  const cells = rows.map((r) => columns.map((c) => cell(r[c], nullText)));
  const numeric = columns.map((c) => rows.length > 0 && rows.every((r) => r[c] === null || typeof r[c] === 'number'));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => (row[i] ?? '').length)));
  const line = (vals: readonly string[]): string =>
    vals
      .map((v, i) => (numeric[i] ? v.padStart(widths[i] ?? 0) : v.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n') + '\n';
}

/** RFC 4180 CSV: fields with a comma, quote or line break are quoted, quotes doubled. */
export function csv(columns: readonly string[], rows: readonly Record<string, unknown>[]): string {
  const field = (v: unknown): string => {
    const s = v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [columns.map(field).join(','), ...rows.map((r) => columns.map((c) => field(r[c])).join(','))].join('\r\n') + '\r\n';
}

export function jsonl(rows: readonly unknown[]): string {
  return rows.map((r) => `${JSON.stringify(r)}\n`).join('');
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length > 0;

/** key: value lines for one object; a nested object as its own key: value lines indented under its key, an array as JSON. */
export function keyValues(o: Record<string, unknown>, indent = ''): string {
  const keys = Object.keys(o);
  const w = Math.max(0, ...keys.filter((k) => !isRecord(o[k])).map((k) => printable(k).length));
  const line = (k: string): string => {
    const v = o[k];
    if (isRecord(v)) return `${indent}${printable(k)}:\n${keyValues(v, `${indent}  `)}`;
    return `${indent}${`${printable(k)}:`.padEnd(w + 1)} ${printable(typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v))}\n`;
  };
  return keys.map(line).join('');
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/** Runs `work`; while it waits (after 200 ms), a spinner turns on stderr if stderr is a terminal. */
export async function withSpinner<T>(io: Io, label: string, work: () => Promise<T>): Promise<T> {
  if (!io.errIsTTY) return work();
  let i = 0;
  let shown = false;
  const tick = (): void => {
    shown = true;
    io.err(`\r${FRAMES[i++ % FRAMES.length] ?? ''} ${label}`);
  };
  const start = setTimeout(() => {
    tick();
    timer = setInterval(tick, 80);
  }, 200);
  let timer: NodeJS.Timeout | undefined;
  try {
    return await work();
  } finally {
    clearTimeout(start);
    if (timer) clearInterval(timer);
    if (shown) io.err(`\r${' '.repeat(label.length + 2)}\r`);
  }
}
