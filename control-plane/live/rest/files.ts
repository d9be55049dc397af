/**
 * `http-files`: CSV or JSON files at HTTPS URLs (from the credential's `options.files`) as tables.
 * A file is fetched up to a byte limit (over it: 400 file_too_large), through the SSRF
 * guard, with the bearer token when one is registered (never sent on to another origin by a
 * redirect; at most 3 redirects, HTTPS only). Column names come from the CSV header or the JSON
 * objects' keys (lower-cased, made identifiers, de-duplicated); column types are inferred from
 * the values read (bigint, numeric, boolean, timestamptz, text; jsonb for nested JSON).
 */
import { StringDecoder } from 'node:string_decoder';
import { ApiError } from '../../errors.js';
import { call, type RequestPolicy } from './http.js';
import { CsvError, CsvReader, type CsvResult } from './csv.js';
import type { LoadColumn } from './engine.js';
import { isObj, type SqlType } from './spec.js';
import { inferJson, inferText, normalize, widen } from './values.js';

export interface FileSpec {
  readonly table: string;
  readonly url: string;
  readonly format: 'csv' | 'json';
}

export interface LoadedFile {
  readonly columns: readonly LoadColumn[];
  readonly rows: readonly Record<string, unknown>[];
  readonly truncated: boolean;
}

export const MAX_FILE_COLUMNS = 1000;
export const MAX_FIELD_CHARS = 1_000_000;
const MAX_REDIRECTS = 3;

/** A column name for a header or key: lower-case identifier, at most 63 characters. */
export function columnName(raw: string, index: number): string {
  let s = raw.trim().toLowerCase().replace(/[^a-z0-9_]+/g, '_').replace(/^_+|_+$/g, '');
  if (s === '') s = `column_${index + 1}`;
  if (/^[0-9]/.test(s)) s = `c_${s}`;
  return s.slice(0, 63);
}

function uniqueNames(raw: readonly string[]): string[] {
  const taken = new Set<string>();
  return raw.map((r, i) => {
    const base = columnName(r, i);
    let name = base;
    for (let k = 2; taken.has(name); k++) name = `${base.slice(0, 58)}_${k}`;
    taken.add(name);
    return name;
  });
}

function malformed(table: string, message: string): ApiError {
  return new ApiError('invalid_request', `the file registered as table ${table} cannot be read as a table: ${message}`, { reason: 'file_malformed', table });
}

/**
 * What reads a file's body as it arrives: a fresh one for each attempt (a retried request starts
 * over). A malformed body is only reported at the end, so a file over its byte limit is always
 * file_too_large, whatever it holds.
 */
interface BodyReader<T> {
  write(piece: Buffer): void;
  end(): T;
}

/** Fetch one file (following at most 3 HTTPS redirects), its body given to a reader as it arrives. */
async function download<T>(file: FileSpec, secret: string, policy: RequestPolicy, reader: () => BodyReader<T>): Promise<T> {
  let url = new URL(file.url);
  const origin = url.origin;
  for (let hop = 0; ; hop++) {
    const headers: Record<string, string> = { accept: file.format === 'csv' ? 'text/csv, text/plain;q=0.9, */*;q=0.1' : 'application/json, */*;q=0.1', 'user-agent': 'svc-live-connector' };
    if (secret !== '' && url.origin === origin) headers['authorization'] = `Bearer ${secret}`;
    let current: BodyReader<T> | undefined;
    const sink = (status: number): ((piece: Buffer) => void) | undefined => {
      if (status < 200 || status >= 300) return undefined;
      const r = reader();
      current = r;
      return (piece) => r.write(piece);
    };
    const res = await call(policy, { method: 'GET', url, headers, sink }, true);
    if (res.status < 300) return (current ?? reader()).end();
    const location = res.headers['location'];
    if (hop >= MAX_REDIRECTS || typeof location !== 'string') {
      throw new ApiError('service_unavailable', `the file for table ${file.table} redirects too often or without a Location`, { reason: 'too_many_redirects', table: file.table });
    }
    url = new URL(location, url);
    if (url.protocol !== 'https:') throw new ApiError('invalid_request', `the file for table ${file.table} redirects to a non-HTTPS address`, { reason: 'address_not_allowed', table: file.table });
  }
}

/** A CSV body parsed as it arrives: once the row cap is full and one more record was seen, the rest is only counted. */
function csvReader(file: FileSpec, maxRows: number): BodyReader<LoadedFile> {
  const decoder = new StringDecoder('utf8');
  const csv = new CsvReader({ maxRows, maxFieldChars: MAX_FIELD_CHARS, maxColumns: MAX_FILE_COLUMNS });
  let failed: unknown;
  const read = (text: () => string): void => {
    if (failed !== undefined || csv.full) return;
    try {
      csv.push(text());
    } catch (err) {
      failed = err;
    }
  };
  return {
    write: (piece) => read(() => decoder.write(piece)),
    end: () => {
      read(() => decoder.end());
      try {
        if (failed !== undefined) throw failed;
        return fromCsv(csv.end());
      } catch (err) {
        if (err instanceof CsvError) throw malformed(file.table, `not valid CSV (${err.message})`);
        throw err;
      }
    },
  };
}

/** A JSON body: decoded as it arrives (its bytes are not kept), parsed whole at the end. */
function jsonReader(file: FileSpec, maxRows: number): BodyReader<LoadedFile> {
  const decoder = new StringDecoder('utf8');
  let pieces: string[] = [];
  return {
    write: (piece) => void pieces.push(decoder.write(piece)),
    end: () => {
      pieces.push(decoder.end());
      const text = pieces.join('');
      pieces = [];
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw malformed(file.table, 'not valid JSON');
      }
      return fromJson(file, parsed, maxRows);
    },
  };
}

function fromCsv(parsed: CsvResult): LoadedFile {
  const names = uniqueNames(parsed.header);
  const types: (SqlType | null)[] = names.map(() => null);
  for (const row of parsed.rows) row.forEach((v, i) => (types[i] = widen(types[i] ?? null, v === null ? null : inferText(v))));
  const columns = names.map((name, i) => ({ name, type: types[i] ?? 'text' }));
  const rows = parsed.rows.map((r) => {
    const o: Record<string, unknown> = {};
    columns.forEach((c, i) => (o[c.name] = r[i] === null || r[i]?.trim() === '' ? null : normalize(c.type === 'text' ? r[i] : r[i]?.trim(), c.type)));
    return o;
  });
  return { columns, rows, truncated: parsed.truncated };
}

function fromJson(file: FileSpec, body: unknown, maxRows: number): LoadedFile {
  const list = Array.isArray(body) ? body : isObj(body) ? ['data', 'items', 'results', 'records'].map((k) => body[k]).find(Array.isArray) : undefined;
  if (!Array.isArray(list)) throw malformed(file.table, 'a JSON file must hold an array of objects (or an object with a "data", "items", "results" or "records" array)');
  const truncated = list.length > maxRows;
  const objects = list.slice(0, maxRows);
  const keys: string[] = [];
  const seen = new Set<string>();
  for (const [i, o] of objects.entries()) {
    if (!isObj(o)) throw malformed(file.table, `element ${i} of the array is not an object`);
    for (const k of Object.keys(o)) {
      if (seen.has(k)) continue;
      seen.add(k);
      keys.push(k);
      if (keys.length > MAX_FILE_COLUMNS) throw malformed(file.table, `the objects have more than ${MAX_FILE_COLUMNS} distinct keys`);
    }
  }
  const names = uniqueNames(keys);
  const types: (SqlType | null)[] = names.map(() => null);
  for (const o of objects as Record<string, unknown>[]) keys.forEach((k, i) => (types[i] = widen(types[i] ?? null, inferJson(o[k]))));
  const columns = names.map((name, i) => ({ name, type: types[i] ?? 'text' }));
  const rows = (objects as Record<string, unknown>[]).map((o) => {
    const row: Record<string, unknown> = {};
    keys.forEach((k, i) => {
      const c = columns[i] as LoadColumn;
      row[c.name] = normalize(o[k], c.type);
    });
    return row;
  });
  return { columns, rows, truncated };
}

/**
 * Fetch and parse one registered file into columns and normalized rows (at most `maxRows`). A
 * CSV file is parsed as it arrives, so only the rows kept are ever in memory; a JSON file is
 * parsed once whole. Either way the byte limit applies to every byte received.
 */
export async function loadFile(file: FileSpec, secret: string, policy: RequestPolicy, maxRows: number): Promise<LoadedFile> {
  return download(file, secret, policy, () => (file.format === 'csv' ? csvReader(file, maxRows) : jsonReader(file, maxRows)));
}
