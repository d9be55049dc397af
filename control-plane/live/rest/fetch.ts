/**
 * Paging through one table of an API, lazily: a page is requested only when the rows so far are
 * fewer than the cap, each page asks for no more objects than the cap still needs, the
 * creation-time windows of the `period:` scopes go to the provider (so out-of-period objects are
 * not fetched) and are enforced again on what comes back, and every page request must stay on
 * the base URL's origin (a provider's "next" link is never followed elsewhere with the credential).
 */
import { ApiError } from '../../errors.js';
import type { Interval } from '../../catalogue/index.js';
import { call, jsonBody, type RequestPolicy } from './http.js';
import { isObj, UnexpectedResponse, type ApiSpec, type Obj, type PageRequest, type TableSpec, type Window } from './spec.js';
import { normalize } from './values.js';

export type Row = Record<string, unknown>;

export interface TableFetch {
  readonly rows: number;
  /** more objects were in scope than the cap allowed: the table holds only the first `cap` */
  readonly truncated: boolean;
  readonly requests: number;
}

/**
 * An interval bound in epoch ms. `period:9999` ends at 10000-01-01, which Date.parse reads only in
 * the expanded form (+010000-…): written with five digits it is NaN.
 */
const boundMs = (iso: string): number => Date.parse(/^\d{5}-/.test(iso) ? `+0${iso}` : iso);

/** Period intervals as disjoint, sorted windows (overlapping or touching ones merged). */
export function windowsOf(periods: readonly Interval[]): Window[] | null {
  if (periods.length === 0) return null;
  const ws = periods.map((p) => ({ start: boundMs(p.start), end: boundMs(p.end) })).sort((a, b) => a.start - b.start);
  const out: { start: number; end: number }[] = [];
  for (const w of ws) {
    const last = out[out.length - 1];
    if (last && w.start <= last.end) last.end = Math.max(last.end, w.end);
    else out.push({ ...w });
  }
  return out;
}

export function rowOf(table: TableSpec, o: Obj): Row {
  const row: Row = {};
  for (const c of table.columns) row[c.name] = normalize(c.get(o), c.type);
  return row;
}

export interface FetchJob {
  readonly api: ApiSpec;
  readonly table: TableSpec;
  readonly base: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly windows: readonly Window[] | null;
  readonly cap: number;
  readonly policy: RequestPolicy;
  /** called with each page's rows, in order */
  readonly onRows: (rows: Row[]) => Promise<void>;
}

/** run a spec's response reader, turning a shape surprise into service_unavailable */
function shaped<T>(api: ApiSpec, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof UnexpectedResponse) throw new ApiError('service_unavailable', `${api.provider} answered in an unexpected shape: ${err.message}`, { reason: 'unexpected_response' });
    throw err;
  }
}

export async function fetchTable(job: FetchJob): Promise<TableFetch> {
  const { api, table, base, windows, cap } = job;
  // an endpoint that only narrows from one side is read once over the hull of the windows
  const passes: (Window | null)[] =
    windows === null ? [null] : table.newestFirst ? [{ start: windows[0]?.start ?? 0, end: windows[windows.length - 1]?.end ?? 0 }] : [...windows];
  const inWindows = (t: number | null): boolean => windows === null || (t !== null && windows.some((w) => t >= w.start && t < w.end));
  let rows = 0;
  let requests = 0;
  let truncated = false;

  for (const pass of passes) {
    const pageSize = (): number => Math.max(1, Math.min(api.maxPageSize, cap - rows + 1));
    let req: PageRequest | null = table.first(base, pass, pageSize());
    while (req !== null) {
      if (req.url.origin !== base.origin) {
        throw new ApiError('service_unavailable', `${api.provider} pointed the next page at another origin; the request was not made`, { reason: 'unexpected_response' });
      }
      requests++;
      const res = await call(job.policy, {
        method: req.method,
        url: req.url,
        headers: { ...job.headers, ...(req.body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(req.body !== undefined ? { body: JSON.stringify(req.body) } : {}),
      });
      const body = jsonBody(api, res);
      const items = shaped(api, () => table.items(body));
      const page: Row[] = [];
      let olderThanWindow = false;
      for (const item of items) {
        if (!isObj(item)) continue;
        if (table.keep && !table.keep(item)) continue;
        const created = table.created(item);
        if (pass !== null && table.newestFirst && created !== null && created < pass.start) {
          olderThanWindow = true;
          break;
        }
        if (!inWindows(created)) continue;
        if (rows + page.length >= cap) {
          truncated = true;
          break;
        }
        page.push(rowOf(table, item));
      }
      rows += page.length;
      if (page.length > 0) await job.onRows(page);
      if (truncated) return { rows, truncated, requests };
      if (olderThanWindow) break;
      const previous: PageRequest = req;
      const next = shaped(api, () => table.next(base, previous, { body, headers: res.headers }, pageSize()));
      if (next !== null && rows >= cap) {
        // the cap is full and the provider has more: the table is incomplete
        return { rows, truncated: true, requests };
      }
      req = next;
    }
  }
  return { rows, truncated, requests };
}
