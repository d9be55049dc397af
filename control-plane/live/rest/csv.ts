/**
 * A strict RFC 4180 CSV reader for files queried as tables: comma-separated, fields optionally in
 * double quotes (`""` inside for a quote; newlines allowed inside quotes), CRLF or LF line ends, a
 * UTF-8 byte-order mark ignored, the first record the header. Bounded: at most `maxRows` data
 * records are read (the rest of the file is not parsed), a field longer than `maxFieldChars` or a
 * header wider than `maxColumns` is refused, a record with more fields than the header is
 * refused (it means the file is not what its header says), a shorter one is padded with NULLs,
 * blank lines are skipped, an unterminated quote is refused. Errors name the line.
 */

export class CsvError extends Error {
  override readonly name = 'CsvError';
  readonly line: number;
  constructor(message: string, line: number) {
    super(`line ${line}: ${message}`);
    this.line = line;
  }
}

export interface CsvLimits {
  readonly maxRows: number;
  readonly maxFieldChars: number;
  readonly maxColumns: number;
}

export interface CsvResult {
  readonly header: readonly string[];
  readonly rows: readonly (readonly (string | null)[])[];
  /** more data records followed the ones read */
  readonly truncated: boolean;
}

export function parseCsv(input: string, limits: CsvLimits): CsvResult {
  const text = input.charCodeAt(0) === 0xfeff ? input.slice(1) : input;
  const n = text.length;
  let i = 0;
  let line = 1;
  let header: string[] | undefined;
  const rows: (string | null)[][] = [];

  /** one record starting at i; null at the end of the input */
  const record = (): string[] | null => {
    if (i >= n) return null;
    const fields: string[] = [];
    const startLine = line;
    for (;;) {
      let value: string;
      if (text.charCodeAt(i) === 34 /* " */) {
        i++;
        let out = '';
        let from = i;
        for (;;) {
          const q = text.indexOf('"', i);
          if (q < 0) throw new CsvError('a quoted field is never closed', startLine);
          if (q - from + out.length > limits.maxFieldChars) throw new CsvError(`a field is longer than ${limits.maxFieldChars} characters`, line);
          if (text.charCodeAt(q + 1) === 34) {
            out += text.slice(from, q + 1);
            i = q + 2;
            from = i;
            continue;
          }
          out += text.slice(from, q);
          i = q + 1;
          break;
        }
        for (const ch of out) if (ch === '\n') line++;
        value = out;
        const c = text.charCodeAt(i);
        if (i < n && c !== 44 && c !== 10 && c !== 13) throw new CsvError('a closing quote must be followed by a comma or the end of the line', line);
      } else {
        let j = i;
        while (j < n) {
          const c = text.charCodeAt(j);
          if (c === 44 || c === 10 || c === 13) break;
          j++;
        }
        if (j - i > limits.maxFieldChars) throw new CsvError(`a field is longer than ${limits.maxFieldChars} characters`, line);
        value = text.slice(i, j);
        i = j;
      }
      fields.push(value);
      if (fields.length > limits.maxColumns + 1) throw new CsvError(`more than ${limits.maxColumns} fields`, line);
      const c = text.charCodeAt(i);
      if (c === 44) {
        i++;
        continue;
      }
      if (c === 13 && text.charCodeAt(i + 1) === 10) i += 2;
      else if (c === 10 || c === 13) i++;
      line++;
      return fields;
    }
  };

  for (;;) {
    const at = line;
    const fields = record();
    if (fields === null) break;
    if (fields.length === 1 && fields[0] === '') continue; // blank line
    if (!header) {
      if (fields.length > limits.maxColumns) throw new CsvError(`the header has ${fields.length} columns; at most ${limits.maxColumns}`, at);
      header = fields;
      continue;
    }
    if (fields.length > header.length) throw new CsvError(`${fields.length} fields where the header has ${header.length}`, at);
    if (rows.length >= limits.maxRows) return { header, rows, truncated: true };
    const row: (string | null)[] = fields;
    while (row.length < header.length) row.push(null);
    rows.push(row);
  }
  if (!header) throw new CsvError('the file is empty (no header line)', 1);
  return { header, rows, truncated: false };
}
