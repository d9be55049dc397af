/**
 * The `postgres` live target: a PostgreSQL the control plane reaches with the organization's own
 * connection URL. The same defence in depth as the relay path: the statement is checked and
 * rewritten by the PostgreSQL parser against `read:<schema>.<table>` / `filter:` scopes (the
 * relay's policy), then runs in a READ ONLY transaction with statement_timeout, read through a
 * cursor under the row and byte caps in one round trip (pg-read, postgres-read.ts), cancelled at
 * the database (CancelRequest) at the deadline, and always rolled back. The database's own
 * privileges apply too: the statement runs as the credential's role, so it reads only what that
 * role may read.
 */
import type { ConnectionOptions } from 'node:tls';
import pg from 'pg';
import type { ParsedScopes, Target } from '../catalogue/index.js';
import { checkDatabaseAddress, credentialRejected, databaseCredentialKind, databaseEndpoint, parseDatabaseUrl, scrub, type DatabaseOptions, type DatabaseUrl, type ReservedDatabase } from '../credentials/database.js';
import type { ReadQueryResult } from '../results/index.js';
import { classifyPgError, GuardedPgClient, PIN_SEARCH_PATH, type ReadFailure } from '../../pg-read/index.js';
import { ApiError } from '../errors.js';
import { abortAnswer, statementRejected } from '../query/errors.js';
import { oversizeError, readCollected, type CollectedOutcome } from './postgres-read.js';
import { LiveConnections, poolKey, type PoolDriver } from './pool.js';
import { postgresScopedTables, relayPolicy } from '../query/relay.js';
import { catalogLimits, postgresCatalogSql, postgresListing, type SchemaListing } from '../query/schema.js';
import type { SqlChecker } from '../query/sql/offload.js';
import { rowFiltersOf } from '../query/sql/index.js';
import type { CredentialKindDef, LiveConnector, LiveRunContext, PreparedLiveQuery } from './types.js';

const EXAMPLE = 'postgres://reader:password@db.example.com:5432/app?sslmode=verify-full';

export interface DatabaseNetwork {
  readonly allowPrivate: boolean;
  readonly reserved: readonly ReservedDatabase[];
}

export function parsePostgresUrl(secret: string): DatabaseUrl {
  return parseDatabaseUrl(secret, ['postgres:', 'postgresql:'], 5432, EXAMPLE);
}

export const postgresCredentialKind: CredentialKindDef = databaseCredentialKind({
  kind: 'postgres',
  product: 'PostgreSQL',
  schemes: ['postgres:', 'postgresql:'],
  example: EXAMPLE,
  prefer: 'TLS when the server offers it',
  parse: parsePostgresUrl,
});

interface PgErrorLike {
  code?: string;
  message?: string;
}

function tlsFor(url: DatabaseUrl, o: DatabaseOptions): false | ConnectionOptions {
  const servername = /^[\d.]+$|:/.test(url.host) ? undefined : url.host;
  switch (o.sslmode) {
    case 'disable':
      return false;
    case 'prefer':
    case 'require':
      return { rejectUnauthorized: false, ...(servername ? { servername } : {}) };
    case 'verify-ca':
      return { rejectUnauthorized: true, checkServerIdentity: () => undefined, ...(o.ca ? { ca: o.ca } : {}), ...(servername ? { servername } : {}) };
    case 'verify-full':
      return { rejectUnauthorized: true, ...(o.ca ? { ca: o.ca } : {}), ...(servername ? { servername } : {}) };
  }
}

const REJECTED = new Set(['28P01', '28000', '3D000']);

const PG_DRIVER: PoolDriver<pg.Client> = {
  kind: 'postgres',
  end: (client) => void client.end().catch(() => undefined),
  watch: (client, gone) => {
    client.on('error', gone);
    client.on('end', gone);
  },
};

/** A checked statement of a database target as the query path wants it: tables read, their row filters, the tables allowed. */
export function preparedFrom(
  checked: { readonly sql: string; readonly tables: readonly string[] },
  allowed: ReadonlyMap<string, { readonly name: string; readonly predicate: string | null }>,
): PreparedLiveQuery {
  return { sql: checked.sql, tables: checked.tables, rowFilters: rowFiltersOf(allowed, checked.tables), tablesAllowed: [...new Set([...allowed.values()].map((t) => t.name))].sort() };
}

export class PostgresConnector implements LiveConnector {
  readonly targetId = 'postgres';
  readonly credentialKind = 'postgres';
  /** a statement may wait for a pooled connection: it starts when it is sent (ctx.onStart) */
  readonly signalsStart = true;

  /** pooled connections per organization, for its current credential (pool.ts) */
  readonly connections: LiveConnections<pg.Client>;

  constructor(
    private readonly network: DatabaseNetwork,
    /** the app's check worker (large statements are checked there) */
    private readonly checker: SqlChecker,
    poolSize = 4,
  ) {
    this.connections = new LiveConnections(PG_DRIVER, poolSize);
  }

  /** At registration: a host no query may reach is refused now (400 address_not_allowed), as the query would be. */
  async checkCredential(secret: string): Promise<void> {
    await checkDatabaseAddress('postgres', parsePostgresUrl(secret), this.network);
  }

  /** The organization's credential was replaced or deleted: its pooled connections end now. */
  forget(orgId: string): void {
    this.connections.forget(orgId);
  }

  /** Ends every pooled connection (shutdown). */
  close(): void {
    this.connections.close();
  }

  async prepare(sqlText: string, scopes: ParsedScopes, _target: Target, caller?: { readonly tenant: string }): Promise<PreparedLiveQuery> {
    const policy = relayPolicy(scopes);
    const checked = await this.checker.check(sqlText, policy, caller?.tenant);
    return { ...preparedFrom(checked, policy.allowed), plan: { direct: checked.kind === 'explain' } };
  }

  /** The scoped tables from the database's catalog: our own statement, run like a query (read-only, deadline, caps). */
  async describe(_target: Target, ctx: LiveRunContext): Promise<SchemaListing> {
    const tables = postgresScopedTables(ctx.scopes);
    if (tables.length === 0) return { tables: [], missing: [], truncated: false };
    const sql = postgresCatalogSql(tables);
    const result = await this.run({ sql, tables: [], rowFilters: {}, tablesAllowed: [], plan: { direct: false } }, { ...ctx, limits: catalogLimits(ctx.limits) });
    return postgresListing(result, tables);
  }

  async run(q: PreparedLiveQuery, ctx: LiveRunContext): Promise<ReadQueryResult> {
    const secret = ctx.credential.secret;
    const { url, options: opts, address } = await databaseEndpoint('postgres', ctx.credential, parsePostgresUrl, this.network);
    const deadline = Date.now() + ctx.limits.timeoutMs;
    const settings = (ssl: false | ConnectionOptions): pg.ClientConfig => ({
      host: address,
      port: url.port,
      user: url.user,
      password: url.password,
      database: url.database,
      ssl,
      application_name: 'svc-live',
      connectionTimeoutMillis: Math.max(100, Math.min(5000, deadline - Date.now())),
    });

    const key = poolKey([ctx.credential.version ?? null, secret, ctx.credential.options, address]);
    const client = await this.connections.acquire(ctx.orgId, key, () => connect(settings, tlsFor(url, opts), opts.sslmode === 'prefer', secret, url), deadline, ctx.signal);
    // it has its connection: the statement goes to the database now (acquire gave up, and ran
    // nothing, when its signal aborted while it waited)
    ctx.onStart?.();
    // one round trip (pg-read): READ ONLY, statement_timeout, the cursor read under the caps,
    // ROLLBACK; cancelled at the database (CancelRequest) at the deadline or when the query is
    // stopped; a row larger than the budget left is never read (the wire guard closes the socket
    // before pg decodes it)
    let out: CollectedOutcome;
    try {
      out = await readCollected(client, {
        sql: q.sql,
        cursor: (q.plan as { direct?: boolean } | undefined)?.direct === true ? undefined : 'svc_live_cursor',
        timeoutMs: Math.max(1, deadline - Date.now()),
        deadlineMs: Math.max(0, deadline - Date.now()),
        maxRows: ctx.limits.maxRows,
        maxBytes: ctx.limits.maxBytes,
        // functions, operators and types resolve in the catalog only (PIN_SEARCH_PATH)
        settings: [`SET LOCAL idle_in_transaction_session_timeout = ${Math.max(1000, ctx.limits.timeoutMs * 2)}`, PIN_SEARCH_PATH],
        signal: ctx.signal,
      });
    } catch (err) {
      this.connections.release(ctx.orgId, key, client, false);
      throw err;
    }
    // a connection goes back to the pool only after a clean ROLLBACK, and never after a cancel
    // (the cancel could land on its next statement) or a message the guard refused
    this.connections.release(ctx.orgId, key, client, await out.settled);
    if (out.ok) return out.result;
    throw liveError(out.failure, ctx, secret, url);
  }
}

/** A failed read as the `postgres` target answers it (pg-read's SQLSTATE table, sqlstate.ts). */
function liveError(f: ReadFailure, ctx: LiveRunContext, secret: string, url: DatabaseUrl): ApiError {
  const oversize = oversizeError(f, ctx.limits.maxBytes);
  if (oversize) return oversize;
  const timeout = (): ApiError => new ApiError('query_timeout', `the statement ran past its ${ctx.limits.timeoutMs} ms deadline and was cancelled at the database`);
  if (f.kind === 'timeout') return timeout();
  // stopped by its signal: a revocation, the shutdown (503, not charged), the backstop deadline
  if (f.kind === 'aborted' || ctx.signal.aborted) return abortAnswer(ctx.signal, timeout);
  if (f.kind === 'empty') return statementRejected('the database', 'empty statement');
  const e = classifyPgError(f.kind === 'database' || f.kind === 'consumer' ? f.error : undefined);
  const message = scrub(e.message, secret, url);
  switch (e.kind) {
    case 'query_canceled':
      return timeout();
    case 'insufficient_privilege':
    case 'read_only':
      return statementRejected('the database', message, { sqlstate: e.sqlstate, refused: true });
    case 'statement':
    case 'multiple_statements':
    case 'parameter_count':
      return statementRejected('the database', message, { sqlstate: e.sqlstate, refused: false });
    default:
      // a socket error (EPIPE, ECONNRESET), or a SQLSTATE of class 08, 53 or 57: the connection failed
      return new ApiError('service_unavailable', 'the connection to the postgres database was lost during the statement; retry', { connector_kind: 'postgres' });
  }
}

async function connect(settings: (ssl: false | ConnectionOptions) => pg.ClientConfig, ssl: false | ConnectionOptions, prefer: boolean, secret: string, url: DatabaseUrl): Promise<pg.Client> {
  const attempt = async (tls: false | ConnectionOptions): Promise<pg.Client> => {
    // guarded from the startup on: a server's oversized message is never decoded, even before the query
    const c = new GuardedPgClient(settings(tls));
    c.on('error', () => undefined); // a dropped connection surfaces as the failed query
    try {
      await c.connect();
      return c;
    } catch (err) {
      await c.end().catch(() => undefined);
      throw err;
    }
  };
  try {
    return await attempt(ssl);
  } catch (err) {
    const e = err as PgErrorLike;
    if (prefer && ssl !== false && /does not support SSL/i.test(e.message ?? '')) return connectPlain(attempt, secret, url);
    throw connectError(err, secret, url);
  }
}

async function connectPlain(attempt: (tls: false) => Promise<pg.Client>, secret: string, url: DatabaseUrl): Promise<pg.Client> {
  try {
    return await attempt(false);
  } catch (err) {
    throw connectError(err, secret, url);
  }
}

function connectError(err: unknown, secret: string, url: DatabaseUrl): ApiError {
  const e = err as PgErrorLike;
  if (e.code && REJECTED.has(e.code)) return credentialRejected('postgres', `${scrub(e.message ?? '', secret, url)}, SQLSTATE ${e.code}`);
  if (/does not support SSL|certificate|self.signed|SSL|TLS/i.test(e.message ?? '')) {
    return new ApiError('invalid_request', `TLS to the postgres server failed: ${scrub(e.message ?? '', secret, url)}; check sslmode / ca of the registered credential`, {
      reason: 'credential_rejected',
      connector_kind: 'postgres',
    });
  }
  return new ApiError('service_unavailable', 'the postgres server of the registered credential cannot be reached; retry, or check its host and port', {
    connector_kind: 'postgres',
    reason: 'unreachable',
  });
}
