/**
 * The REST-to-SQL connectors: `stripe`, `github`, `hubspot`, `salesforce` (declarative API specs,
 * ./apis) and `http-files` (./files.ts), all behind the LiveConnector contract (../types.ts).
 *
 * prepare: the agent's statement is checked and rewritten by the same SQL policy as demo targets,
 * over the tables the scopes allow, with the `period:` row predicate on each table's `created`
 * column. run: only the tables the statement reads are fetched (pages on demand, the period mapped
 * onto the provider's created-time filter, at most the row cap per table), loaded into an
 * ephemeral embedded PostgreSQL (./engine.ts) and the statement runs there, read-only, capped,
 * within the deadline. `truncated` is also true when a table held more in-scope objects than the
 * row cap (the statement then saw only the first ones).
 */
import tls from 'node:tls';
import type { ParsedScopes, Target } from '../../catalogue/index.js';
import type { ReadQueryResult } from '../../results/index.js';
import { ApiError } from '../../errors.js';
import { checkAndRewrite, periodPredicate, rowFiltersOf, SqlPolicyError, type ScopedTable, type SqlPolicy } from '../../query/sql/index.js';
import type { CredentialKindDef, LiveConnector, LiveRunContext, PreparedLiveQuery } from '../types.js';
import { GITHUB, HUBSPOT, SALESFORCE, STRIPE } from './apis/index.js';
import { filesCa, fileSpecs, REST_CREDENTIAL_KINDS } from './credentials.js';
import { EnginePool, QueryDatabase, querySchema } from './engine.js';
import { fetchTable, windowsOf, type TableFetch } from './fetch.js';
import type { FileSpec, LoadedFile } from './files.js';
import { FileDownloads, gateAnswer, type FileReads } from './downloads.js';
import type { RequestPolicy } from './http.js';
import type { ApiSpec } from './spec.js';
import { definedTable, type SchemaListing } from '../../query/schema.js';
import { FairGate, GateError } from '../../demo/gate.js';

export { EnginePool } from './engine.js';
export { nextLink } from './apis/github.js';
export { parseCsv, CsvError } from './csv.js';
export { STRIPE, GITHUB, HUBSPOT, SALESFORCE };
export { API_SPECS, apiTables, type ApiTableInfo, type ApiColumnInfo } from './apis/index.js';
export type { ApiSpec, TableSpec, ColumnSpec } from './spec.js';

/** What the REST connectors take from the configuration (control-plane/config.ts `restApis`). */
export interface RestConfig {
  /** operator-set base URLs (trusted: they may be private or loopback addresses) */
  readonly stripeApiBase?: string | undefined;
  readonly githubApiBase?: string | undefined;
  readonly hubspotApiBase?: string | undefined;
  /** when set, every Salesforce request goes here instead of the credential's instance_url */
  readonly salesforceApiBase?: string | undefined;
  /** http-files URLs may resolve to private/loopback addresses (SVC_HTTP_FILES_ALLOW_PRIVATE=1) */
  readonly httpFilesAllowPrivate?: boolean;
  /** most bytes of one file (SVC_HTTP_FILES_MAX_BYTES, default 50 MB) */
  readonly httpFilesMaxBytes?: number;
  /** http-files listings, and statements downloading files, at once (SVC_LIVE_REST_ENGINES); default: as many as the engine pool holds */
  readonly maxEngines?: number;
  /** extra trusted CA certificate (PEM) for HTTPS to providers and file servers, e.g. an internal CA */
  readonly ca?: string | undefined;
  /** called for every HTTP request made (metrics, tests); never given headers or bodies */
  readonly onRequest?: (target: string, method: string, url: URL) => void;
}

export const restCredentialKinds: CredentialKindDef[] = [...REST_CREDENTIAL_KINDS];

const DEFAULT_FILE_BYTES = 50_000_000;
const MAX_PAGE_BYTES = 32 * 1024 * 1024;
const MAX_DISCOVERY = 64;
/** rows of a file sent to its query engine in one insert */
const INSERT_BATCH_ROWS = 2000;

interface Plan {
  readonly kind: string;
  /** physical schema of this query's tables */
  readonly schema: string;
}

/** the schema name agents may qualify a target's tables with, e.g. stripe.charges, http_files.orders */
const schemaOf = (targetId: string): string => targetId.replace(/-/g, '_');

function result(scopes: ParsedScopes, policy: SqlPolicy, checked: ReturnType<typeof checkAndRewrite>, physical: string): PreparedLiveQuery {
  return {
    sql: checked.sql,
    tables: checked.tables,
    rowFilters: rowFiltersOf(policy.allowed, checked.tables),
    tablesAllowed: scopes.read === 'all' ? '*' : [...scopes.read].sort(),
    plan: { kind: checked.kind, schema: physical } satisfies Plan,
  };
}

function runSignal(ctx: LiveRunContext): { signal: AbortSignal; deadline: number } {
  const deadline = Date.now() + ctx.limits.timeoutMs;
  return { signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(ctx.limits.timeoutMs)]), deadline };
}

function planOf(q: PreparedLiveQuery): Plan {
  const p = q.plan as Plan | undefined;
  if (!p || typeof p.schema !== 'string') throw new ApiError('internal_error', 'the statement was not prepared by this connector');
  return p;
}

/** Open a query database while `work` fetches; run the statement; always end the database. */
async function withDatabase(
  q: PreparedLiveQuery,
  ctx: LiveRunContext,
  engines: EnginePool,
  signal: AbortSignal,
  work: (db: Promise<QueryDatabase>) => Promise<boolean>,
): Promise<ReadQueryResult> {
  const opening = QueryDatabase.open(engines, signal, planOf(q).schema);
  opening.catch(() => undefined);
  try {
    const incomplete = await work(opening);
    const db = await opening;
    const res = await db.read(q.sql, planOf(q).kind === 'explain', ctx.limits.maxRows, ctx.limits.maxBytes, signal);
    return incomplete && !res.truncated ? { ...res, truncated: true } : res;
  } finally {
    await opening.then((db) => db.close()).catch(() => undefined);
  }
}

function apiConnector(api: ApiSpec, configured: string | undefined, config: RestConfig, engines: EnginePool): LiveConnector {
  const schema = schemaOf(api.id);
  const tables = new Map(api.tables.map((t) => [t.name, t]));
  return {
    targetId: api.id,
    credentialKind: api.id,
    prepare(sqlText: string, scopes: ParsedScopes, _target: Target): PreparedLiveQuery {
      const physical = querySchema();
      const allowed = new Map<string, ScopedTable>();
      for (const t of api.tables) {
        if (scopes.read !== 'all' && !scopes.read.has(t.name)) continue;
        allowed.set(t.name, { name: t.name, schema: physical, table: t.name, predicate: periodPredicate('created', scopes.periods) });
      }
      const policy: SqlPolicy = { allowed, known: api.tables.map((t) => t.name), schemas: [schema] };
      return result(scopes, policy, checkAndRewrite(sqlText, policy), physical);
    },
    /** From the spec: the tables the scopes name, with the columns a query gets (any may be null: providers omit fields). */
    async describe(_target: Target, ctx: LiveRunContext): Promise<SchemaListing> {
      const read = ctx.scopes.read;
      return { tables: api.tables.filter((t) => read === 'all' || read.has(t.name)).map((t) => definedTable(t.name, t.columns, () => true)), missing: [], truncated: false };
    },
    async run(q: PreparedLiveQuery, ctx: LiveRunContext): Promise<ReadQueryResult> {
      const { signal, deadline } = runSignal(ctx);
      let base: URL;
      try {
        base = api.base(configured, ctx.credential);
      } catch {
        throw new ApiError('invalid_request', `the stored ${api.id} credential has no usable address; register it again with POST /v1/connections/credentials`, { reason: 'credential_rejected', connector_kind: api.id });
      }
      const headers = api.headers(ctx.credential);
      const policy: RequestPolicy = {
        provider: api.provider,
        kind: api.id,
        allowPrivate: configured !== undefined,
        ca: config.ca,
        signal,
        deadline,
        maxBytes: MAX_PAGE_BYTES,
        errorCode: api.errorCode,
        ...(config.onRequest ? { onRequest: (m: string, u: URL) => config.onRequest?.(api.id, m, u) } : {}),
      };
      const windows = windowsOf(ctx.scopes.periods);
      return withDatabase(q, ctx, engines, signal, async (opening) => {
        const fetches = q.tables.map(async (name): Promise<TableFetch> => {
          const table = tables.get(name);
          if (!table) throw new ApiError('internal_error', `no table ${name} in ${api.id}`);
          const ready = opening.then(async (db) => {
            await db.createTable(name, table.columns);
            return db;
          });
          ready.catch(() => undefined);
          const fetched = await fetchTable({
            api,
            table,
            base,
            headers,
            windows,
            cap: ctx.limits.maxRows,
            policy,
            onRows: async (rows) => (await ready).insert(name, table.columns, rows),
          });
          await ready;
          return fetched;
        });
        const done = await settleAll(fetches);
        return done.some((f) => f.truncated);
      });
    },
  };
}

/** Promise.all that waits for every promise before rethrowing the first failure. */
async function settleAll<T>(ps: Promise<T>[]): Promise<T[]> {
  const r = await Promise.allSettled(ps);
  const failed = r.find((x): x is PromiseRejectedResult => x.status === 'rejected');
  if (failed) throw failed.reason;
  return r.map((x) => (x as PromiseFulfilledResult<T>).value);
}

/**
 * For `read:*` on http-files (whose tables are only known from the credential at run time), the
 * allowed tables are found as the statement is resolved: any plain lower-case name (not `pg_…`)
 * is taken as a file table, up to {@link MAX_DISCOVERY}; `run` then refuses a name that is not
 * one of the registered files. One check, whatever the number of names (it re-ran the check per
 * unknown name, up to 64 times, on the event loop).
 */
class DiscoveredTables implements ReadonlyMap<string, ScopedTable> {
  private readonly found = new Map<string, ScopedTable>();

  constructor(private readonly physical: string) {}

  get(key: string): ScopedTable | undefined {
    const hit = this.found.get(key);
    if (hit || key.includes('.') || !/^[a-z_][a-z0-9_]{0,62}$/.test(key) || key.startsWith('pg_') || this.found.size >= MAX_DISCOVERY) return hit;
    const entry: ScopedTable = { name: key, schema: this.physical, table: key, predicate: null };
    this.found.set(key, entry);
    return entry;
  }
  has(key: string): boolean {
    return this.found.has(key);
  }
  get size(): number {
    return this.found.size;
  }
  forEach(f: (value: ScopedTable, key: string, map: ReadonlyMap<string, ScopedTable>) => void): void {
    this.found.forEach((v, k) => f(v, k, this));
  }
  entries(): MapIterator<[string, ScopedTable]> {
    return this.found.entries();
  }
  keys(): MapIterator<string> {
    return this.found.keys();
  }
  values(): MapIterator<ScopedTable> {
    return this.found.values();
  }
  [Symbol.iterator](): MapIterator<[string, ScopedTable]> {
    return this.found[Symbol.iterator]();
  }
}

function discover(sqlText: string, schema: string, physical: string, initial: ReadonlySet<string> | 'all'): { policy: SqlPolicy; checked: ReturnType<typeof checkAndRewrite> } {
  const allowed: ReadonlyMap<string, ScopedTable> =
    initial === 'all' ? new DiscoveredTables(physical) : new Map([...initial].map((n) => [n, { name: n, schema: physical, table: n, predicate: null }]));
  // read:* reads whatever files the credential names; scoped reads: the credential's other files are
  // not known here, so a table outside the scopes is out of scope, never said to be missing
  const policy: SqlPolicy = { allowed, known: initial === 'all' ? [] : null, schemas: [schema] };
  return { policy, checked: checkAndRewrite(sqlText, policy) };
}

/** 429 for a file listing or statement that waited its whole deadline for its turn: nothing was fetched. */
function filesBusy(reason: 'listing_busy' | 'downloads_busy', message: string): ApiError {
  return new ApiError('rate_limited', message, { reason, retry_after_seconds: 1 }, { 'Retry-After': '1' });
}

/** A file listing that waited its whole deadline for its organization's turn. */
const listingBusy = (): ApiError =>
  filesBusy('listing_busy', "another listing of this organization's files was still reading them when this one's deadline came; nothing was fetched: retry when it finishes");

/** A statement or listing that waited its whole deadline for a place to download its files. */
const downloadsBusy = (): ApiError =>
  filesBusy(
    'downloads_busy',
    "every place for downloading files was taken (by this organization's other file statements and listings, or by as many as the server runs at once) until this statement's deadline; nothing was fetched or charged: retry when they finish, or send fewer at once",
  );

/**
 * A place among the file listings running (`listings`, one per organization), waited for until
 * `signal` aborts or the gate closes: then the shutdown's 503 or a revocation's answer, or at the
 * deadline `listing_busy`.
 */
async function admitted(listings: FairGate, orgId: string, signal: AbortSignal, deadline: number): Promise<() => void> {
  try {
    return await listings.acquire(orgId, Math.max(0, deadline - Date.now()), { signal });
  } catch (err) {
    if (err instanceof GateError) throw gateAnswer(err, signal, listingBusy);
    throw err;
  }
}

/**
 * The CAs an http-files credential's requests trust: with its own `options.ca`, those besides
 * Node's bundled roots (a private-CA server may redirect to a public one, such as a presigned
 * object-store URL, which must still verify); without, the default store. `extra`: RestConfig.ca.
 */
export function filesTrust(own: string | undefined, extra: string | undefined): string | undefined {
  if (own === undefined) return extra;
  bundledRoots ??= tls.rootCertificates.join('\n');
  return [bundledRoots, own, ...(extra !== undefined ? [extra] : [])].join('\n');
}
/** Node's bundled roots as one PEM text, joined on first use (not again for every file request) */
let bundledRoots: string | undefined;

function filesConnector(config: RestConfig, engines: EnginePool, shutdown: AbortSignal | undefined): LiveConnector {
  const schema = schemaOf('http-files');
  const maxBytes = config.httpFilesMaxBytes ?? DEFAULT_FILE_BYTES;
  // A listing is free, so it must not be a way to make the control plane download and parse
  // files without bound: one organization lists its files one listing at a time, and at most as
  // many listings run at once as query engines may (each holds up to twice the file limit).
  const places = config.maxEngines ?? engines.max;
  const listings = new FairGate(places, 1);
  // Statements and listings download files under a place of their own: as many at once as query
  // engines may run, half of them (at least one) for one organization; the same file wanted by
  // several at once is downloaded once (./downloads.ts).
  const downloads = new FileDownloads(places, Math.max(1, Math.floor(places / 2)));
  // the app's shutdown (after its drain) closes both gates: their waiters get its 503 at once,
  // whatever their own signal, and nothing waits for a place after it
  const close = (): void => {
    listings.close();
    downloads.close();
  };
  if (shutdown?.aborted) close();
  else shutdown?.addEventListener('abort', close, { once: true });
  /** How `count` files read at once are fetched. */
  const filePolicy = (count: number, signal: AbortSignal, deadline: number, credential: LiveRunContext['credential']): RequestPolicy => {
    const own = filesCa(credential.options);
    // the files one statement reads hold at most twice what one file may, together: each of them
    // its share (files are fetched at once, and an engine holds several times what it loads)
    const total = 2 * maxBytes;
    const each = Math.min(maxBytes, Math.floor(total / Math.max(1, count)));
    return {
      provider: 'the file server',
      kind: 'http-files',
      allowPrivate: config.httpFilesAllowPrivate === true,
      ca: filesTrust(own, config.ca),
      signal,
      deadline,
      maxBytes: each,
      retries: 2,
      // the customer's own server: a certificate svc does not trust is theirs to fix, not a retry
      tlsFailure: (reason: string) =>
        new ApiError(
          'invalid_request',
          `TLS to the file server failed (${reason}); ${own !== undefined ? "check that options.ca holds the CA that issued the server's certificate" : 'if the server uses a private CA, register its certificate as options.ca'}`,
          { reason: 'credential_rejected', connector_kind: 'http-files' },
        ),
      tooLarge: () =>
        new ApiError(
          'invalid_request',
          each < maxBytes
            ? `a file this statement reads is larger than ${each} bytes, its share of the ${total} bytes the ${count} files of one statement may hold together; read fewer files in one statement`
            : `a registered file is larger than ${maxBytes} bytes, the most one file may hold`,
          { reason: 'file_too_large', max_bytes: each },
        ),
      ...(config.onRequest ? { onRequest: (m: string, u: URL) => config.onRequest?.('http-files', m, u) } : {}),
    };
  };
  return {
    targetId: 'http-files',
    credentialKind: 'http-files',
    close,
    prepare(sqlText: string, scopes: ParsedScopes, _target: Target): PreparedLiveQuery {
      const physical = querySchema();
      const { policy, checked } = discover(sqlText, schema, physical, scopes.read);
      return result(scopes, policy, checked, physical);
    },
    /**
     * The registered files the scopes name, each fetched and read as a query would read it:
     * columns from its header (CSV) or keys (JSON), types inferred from the values (every column
     * may be null: a file declares nothing). A scoped name with no registered file is missing.
     */
    async describe(_target: Target, ctx: LiveRunContext): Promise<SchemaListing> {
      const { signal, deadline } = runSignal(ctx);
      const read = ctx.scopes.read;
      const files = fileSpecs(ctx.credential.options);
      const wanted = files.filter((f) => read === 'all' || read.has(f.table));
      const missing = read === 'all' ? [] : [...read].filter((name) => !files.some((f) => f.table === name)).sort();
      if (wanted.length === 0) return { tables: [], missing, truncated: false };
      const release = await admitted(listings, ctx.orgId, signal, deadline);
      try {
        const reads = await downloads.admit(fileReads(ctx, wanted, filePolicy(wanted.length, signal, deadline, ctx.credential)), downloadsBusy);
        try {
          const loaded = await settleAll([...reads.loaded]);
          return { tables: wanted.map((f, i) => definedTable(f.table, loaded[i]?.columns ?? [], () => true)), missing, truncated: false };
        } finally {
          reads.done();
        }
      } finally {
        release();
      }
    },
    async run(q: PreparedLiveQuery, ctx: LiveRunContext): Promise<ReadQueryResult> {
      const { signal, deadline } = runSignal(ctx);
      const files = new Map(fileSpecs(ctx.credential.options).map((f) => [f.table, f]));
      for (const name of q.tables) {
        if (!files.has(name)) {
          throw new ApiError('scope_violation', `table "${name}" is not one of the files registered for http-files; registered tables: ${[...files.keys()].sort().join(', ')}`, {
            reason: 'unknown_table',
            table: name,
          });
        }
      }
      const wanted = q.tables.map((name) => files.get(name) as FileSpec);
      // the place comes before the engine: a statement holding an engine never waits for a place
      const reads = await downloads.admit(fileReads(ctx, wanted, filePolicy(q.tables.length, signal, deadline, ctx.credential)), downloadsBusy);
      try {
        return await withDatabase(q, ctx, engines, signal, async (opening) => {
          try {
            const loaded = await settleAll(
              q.tables.map(async (name, t) => {
                const data = await (reads.loaded[t] as Promise<LoadedFile>);
                const db = await opening;
                await db.createTable(name, data.columns);
                for (let i = 0; i < data.rows.length; i += INSERT_BATCH_ROWS) await db.insert(name, data.columns, data.rows.slice(i, i + INSERT_BATCH_ROWS));
                return data.truncated;
              }),
            );
            return loaded.some(Boolean);
          } finally {
            reads.done(); // the rows are in the engine: the place can serve another statement while this one runs
          }
        });
      } finally {
        reads.done();
      }
    },
  };
}

/** What a statement or listing of `files` downloads, for {@link FileDownloads.admit}. */
function fileReads(ctx: LiveRunContext, files: readonly FileSpec[], policy: RequestPolicy): FileReads {
  return { orgId: ctx.orgId, version: ctx.credential.version, secret: ctx.credential.secret, files, maxRows: ctx.limits.maxRows, policy };
}

/**
 * One connector per REST target. Their statements run on `engines`, a pool its owner makes
 * (the app: control-plane/app.ts, sized by SVC_LIVE_REST_ENGINES), warms and closes. `shutdown`
 * is the owner's shutdown signal: when it aborts, the file listings and downloads still waiting
 * for their turn are answered with the shutdown's 503 at once, and none is admitted after it.
 */
export function restConnectors(config: RestConfig, engines: EnginePool, shutdown?: AbortSignal): LiveConnector[] {
  return [
    apiConnector(STRIPE, config.stripeApiBase, config, engines),
    apiConnector(GITHUB, config.githubApiBase, config, engines),
    apiConnector(HUBSPOT, config.hubspotApiBase, config, engines),
    apiConnector(SALESFORCE, config.salesforceApiBase, config, engines),
    filesConnector(config, engines, shutdown),
  ];
}

