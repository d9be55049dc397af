/**
 * Test support for the REST connectors: a real HTTP(S) provider stand-in on port 0 that records
 * every request, and a LiveRunContext built the way the query path builds it.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Catalogue, parseScopes, type ParsedScopes, type Target } from '../../../control-plane/catalogue/index.js';
import { initSqlParser } from '../../../control-plane/query/sql/index.js';
import { EnginePool, restConnectors, type RestConfig } from '../../../control-plane/live/rest/index.js';
import type { LiveConnector, LiveRunContext } from '../../../control-plane/live/types.js';
import type { ReadQueryResult } from '../../../control-plane/results/index.js';
import type { SchemaListing } from '../../../control-plane/query/schema.js';

export interface Seen {
  readonly method: string;
  readonly path: string;
  readonly url: URL;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

export interface Provider {
  readonly base: string;
  readonly seen: Seen[];
  close(): Promise<void>;
}

export type Handler = (req: Seen, res: http.ServerResponse) => unknown;

export async function provider(handler: Handler, tls?: { key: string; cert: string }): Promise<Provider> {
  const seen: Seen[] = [];
  const listener = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const s: Seen = { method: req.method ?? 'GET', path: url.pathname, url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      seen.push(s);
      Promise.resolve(handler(s, res)).catch((err: unknown) => {
        res.statusCode = 500;
        res.end(String(err));
      });
    });
  };
  const server = tls ? https.createServer({ key: tls.key, cert: tls.cert }, listener) : http.createServer(listener);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    base: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

const catalogue = new Catalogue();

export function target(id: string): Target {
  const t = catalogue.target(id);
  if (!t) throw new Error(`no target ${id}`);
  return t;
}

/**
 * The query engines the connectors of one test file share (the app's pool in a server): a file
 * warms them before its tests (an engine costs an initdb) and closes them after.
 */
export const engines = new EnginePool(4);

/** The connector of target `id`, as an app makes it (`shutdown`: the app's shutdown signal, aborted when it closes). */
export function connector(id: string, config: RestConfig, pool: EnginePool = engines, shutdown?: AbortSignal): LiveConnector {
  const c = restConnectors(config, pool, shutdown).find((x) => x.targetId === id);
  if (!c) throw new Error(`no connector ${id}`);
  return c;
}

export interface RunOptions {
  readonly secret: string;
  readonly options?: Record<string, unknown>;
  readonly maxRows?: number;
  readonly maxBytes?: number;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** the organization (default org_test) */
  readonly orgId?: string;
}

/** the context the query path gives a connector */
function runContext(c: LiveConnector, scopes: ParsedScopes, o: RunOptions): LiveRunContext {
  return {
    orgId: o.orgId ?? 'org_test',
    connectionId: 'con_test',
    scopes,
    credential: { kind: c.credentialKind, secret: o.secret, options: o.options ?? {} },
    limits: { timeoutMs: o.timeoutMs ?? 10_000, maxRows: o.maxRows ?? 10_000, maxBytes: o.maxBytes ?? 10_000_000 },
    signal: o.signal ?? new AbortController().signal,
  };
}

/** prepare + run, as the query path does */
export async function query(c: LiveConnector, scopes: string[], sql: string, o: RunOptions): Promise<ReadQueryResult> {
  await initSqlParser();
  const t = target(c.targetId);
  const parsed = parseScopes(t, scopes);
  const q = await c.prepare(sql, parsed, t);
  return c.run(q, runContext(c, parsed, o));
}

/** the connector's listing of the scoped tables, as GET /v1/connections/{id}/schema asks for it */
export async function describe(c: LiveConnector, scopes: string[], o: RunOptions): Promise<SchemaListing> {
  const t = target(c.targetId);
  if (!c.describe) throw new Error(`${c.targetId} cannot list its tables`);
  return c.describe(t, runContext(c, parseScopes(t, scopes), o));
}

/** deterministic objects created at regular intervals from `from` (unix seconds) */
export function series(n: number, from: number, stepSeconds: number): number[] {
  return Array.from({ length: n }, (_, i) => from + i * stepSeconds);
}

export const unix = (iso: string): number => Date.parse(iso) / 1000;
