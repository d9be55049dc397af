/**
 * A strict RFC 4180 CSV reader for files queried as tables: comma-separated, fields optionally in
 * double quotes (`""` inside for a quote; newlines allowed inside quotes), CRLF or LF line ends, a
 * UTF-8 byte-order mark ignored, the first record the header. Bounded: at most `maxRows` data
 * records are read (the rest of the file is not parsed), a field longer than `maxFieldChars` or a
 * header wider than `maxColumns` is refused, a record with more fields than the header is
 * refused (it means the file is not what its header says), a shorter one is padded with NULLs,
 * blank lines are skipped, an unterminated quote is refused. Errors name the line.
 *
 * The text may come in pieces as it is downloaded ({@link CsvReader}): only the records read and
 * the one being completed are held, and once the row cap is full and one more record was seen
 * the rest is not kept at all, so a large file never has to be in memory whole.
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

/** One CSV text read piece by piece: push() the pieces, then end(). */
export class CsvReader {
  /** the input not consumed yet (a record waiting for the rest of it) */
  private text = '';
  private i = 0;
  private line = 1;
  private started = false;
  /** parse again once the unconsumed text is this long (an incomplete record waits for more) */
  private retryAt = 0;
  private header: string[] | undefined;
  private readonly rows: (string | null)[][] = [];
  private truncated = false;

  constructor(private readonly limits: CsvLimits) {}

  /** the row cap is full and a further record followed: the rest of the input is not read */
  get full(): boolean {
    return this.truncated;
  }

  push(piece: string): void {
    if (this.truncated || piece === '') return;
    if (!this.started) {
      this.started = true;
      if (piece.charCodeAt(0) === 0xfeff) piece = piece.slice(1);
    }
    this.text = this.text.slice(this.i) + piece;
    this.i = 0;
    if (this.text.length >= this.retryAt) this.records(false);
  }

  end(): CsvResult {
    if (!this.truncated) this.records(true);
    if (!this.header) throw new CsvError('the file is empty (no header line)', 1);
    return { header: this.header, rows: this.rows, truncated: this.truncated };
  }

  private records(final: boolean): void {
    const { maxRows, maxColumns } = this.limits;
    for (;;) {
      const at = this.line;
      const fields = this.record(final);
      if (fields === null) {
        // nothing more, or a record not complete yet: try again once the text has doubled
        this.retryAt = 2 * (this.text.length - this.i);
        return;
      }
      if (fields.length === 1 && fields[0] === '') continue; // blank line
      if (!this.header) {
        if (fields.length > maxColumns) throw new CsvError(`the header has ${fields.length} columns; at most ${maxColumns}`, at);
        this.header = fields;
        continue;
      }
      if (fields.length > this.header.length) throw new CsvError(`${fields.length} fields where the header has ${this.header.length}`, at);
      if (this.rows.length >= maxRows) {
        this.truncated = true;
        this.text = '';
        this.i = 0;
        return;
      }
      const row: (string | null)[] = fields;
      while (row.length < this.header.length) row.push(null);
      this.rows.push(row);
    }
  }

  /**
   * The record at the read position, consumed; null at the end of the input, or (not `final`)
   * when the text ends before the record does (then nothing is consumed: more text may complete it).
   */
  private record(final: boolean): string[] | null {
    const { text, limits } = this;
    const n = text.length;
    let i = this.i;
    if (i >= n) return null;
    let line = this.line;
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
          if (q < 0) {
            if (final) throw new CsvError('a quoted field is never closed', startLine);
            if (n - from + out.length > limits.maxFieldChars) throw new CsvError(`a field is longer than ${limits.maxFieldChars} characters`, line);
            return null;
          }
          if (q - from + out.length > limits.maxFieldChars) throw new CsvError(`a field is longer than ${limits.maxFieldChars} characters`, line);
          if (q + 1 >= n && !final) return null; // a closing quote, or the first of "": the next piece says
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
        if (j >= n && !final) return null;
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
      if (c === 13 && i + 1 >= n && !final) return null; // CR, or CRLF cut in two
      if (c === 13 && text.charCodeAt(i + 1) === 10) i += 2;
      else if (c === 10 || c === 13) i++;
      this.i = i;
      this.line = line + 1;
      return fields;
    }
  }
}

export function parseCsv(input: string, limits: CsvLimits): CsvResult {
  const reader = new CsvReader(limits);
  reader.push(input);
  return reader.end();
}
