/**
 * The declarative description of a REST API as SQL tables: one {@link ApiSpec} per provider
 * (./apis/*.ts), read by one engine (./fetch.ts pages through it, ./engine.ts loads the rows into
 * an ephemeral embedded PostgreSQL). A spec says how to authenticate, how to ask for the first
 * page of a table (with the created-time window a `period:` scope maps onto), how to find the
 * next page, where the objects are in a response, and which columns of which SQL types each
 * object becomes.
 */
import type { CredentialFields } from '../credential-fields.js';

/** SQL types a column can have. Every value is normalized in JS first (./values.ts). */
export type SqlType = 'text' | 'bigint' | 'numeric' | 'boolean' | 'timestamptz' | 'jsonb';

export interface ColumnSpec {
  readonly name: string;
  readonly type: SqlType;
  readonly description: string;
  /** the value of the column for one API object */
  readonly get: (o: Obj) => unknown;
}

export type Obj = Readonly<Record<string, unknown>>;

/** A half-open UTC creation-time window, epoch milliseconds. */
export interface Window {
  readonly start: number;
  readonly end: number;
}

export interface PageRequest {
  readonly method: 'GET' | 'POST';
  readonly url: URL;
  /** JSON body (POST) */
  readonly body?: unknown;
}

export interface PageResponse {
  readonly body: unknown;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
}

export interface TableSpec {
  readonly name: string;
  readonly description: string;
  readonly columns: readonly ColumnSpec[];
  /**
   * The first page's request. `window` is the creation-time window to ask the provider for (null:
   * every object); `pageSize` how many objects to ask for (never more than needed for the cap).
   */
  first(base: URL, window: Window | null, pageSize: number): PageRequest;
  /** the objects of one page (throws on an unexpected shape) */
  items(body: unknown): readonly unknown[];
  /** the next page's request, or null when this was the last page */
  next(base: URL, previous: PageRequest, res: PageResponse, pageSize: number): PageRequest | null;
  /** keep only some objects of the endpoint (e.g. issues that are not pull requests) */
  readonly keep?: (o: Obj) => boolean;
  /** creation time of an object, epoch ms: objects outside the window are dropped, whatever the provider sent */
  readonly created: (o: Obj) => number | null;
  /**
   * The endpoint returns objects newest first and only narrows the window from one side: paging
   * stops at the first object created before the window's start.
   */
  readonly newestFirst?: boolean;
}

export interface ApiSpec {
  /** catalogue target id = credential kind */
  readonly id: string;
  /** the provider's name in messages */
  readonly provider: string;
  readonly defaultBase: string | null;
  /** largest page the provider serves */
  readonly maxPageSize: number;
  readonly tables: readonly TableSpec[];
  /** where requests go for this credential (a configured base URL wins; see ./index.ts) */
  base(configured: string | undefined, credential: CredentialFields): URL;
  headers(credential: CredentialFields): Record<string, string>;
  /** a short provider error code from an error body, for messages (never free text: it may echo the key) */
  errorCode(body: unknown): string | undefined;
}

export function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `o.a.b.c`, or undefined */
export function path(o: unknown, ...keys: string[]): unknown {
  let cur: unknown = o;
  for (const k of keys) {
    if (!isObj(cur)) return undefined;
    cur = cur[k];
  }
  return cur;
}

/** A column read from a (dotted) path of the object. */
export function col(name: string, type: SqlType, description: string, from: string = name): ColumnSpec {
  const keys = from.split('.');
  return { name, type, description, get: (o) => path(o, ...keys) };
}

/** A short identifier-like error code, or undefined (free text is never echoed). */
export function shortCode(v: unknown): string | undefined {
  return typeof v === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(v) ? v : undefined;
}

/** An array at `key` of the body (or the body itself when key is null), else an error. */
export function arrayAt(body: unknown, key: string | null): readonly unknown[] {
  const v = key === null ? body : path(body, key);
  if (!Array.isArray(v)) throw new UnexpectedResponse(key === null ? 'the response is not a JSON array' : `the response has no "${key}" array`);
  return v;
}

export class UnexpectedResponse extends Error {
  override readonly name = 'UnexpectedResponse';
}

/** epoch ms of an ISO 8601 string or of unix seconds, else null */
export function timeOf(v: unknown, unit: 'iso' | 'unix' | 'ms'): number | null {
  if (unit === 'unix') return typeof v === 'number' && Number.isFinite(v) ? v * 1000 : null;
  if (unit === 'ms') {
    const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
    return typeof n === 'number' && Number.isFinite(n) ? n : null;
  }
  if (typeof v !== 'string') return null;
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : null;
}

/** Copy of `url` with query parameters set (undefined values skipped). */
export function withQuery(url: URL, params: Readonly<Record<string, string | number | undefined>>): URL {
  const u = new URL(url.href);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, String(v));
  return u;
}

/** `base` joined with an absolute path (the base's own path is kept as a prefix). */
export function endpoint(base: URL, p: string): URL {
  const u = new URL(base.href);
  u.pathname = `${u.pathname.replace(/\/+$/, '')}${p}`;
  u.search = '';
  return u;
}
