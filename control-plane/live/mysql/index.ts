/**
 * The `mysql` live target: MySQL or MariaDB reached with the organization's own connection URL.
 * The statement is checked and rewritten by check.ts, then runs on one of the organization's
 * pooled connections (pool.ts; no multi-statements, no LOCAL INFILE, a pinned sql_mode so string
 * literals are lexed the way the checker lexed them) inside `START TRANSACTION READ ONLY`, under a
 * server-side time limit (MariaDB max_statement_time / MySQL max_execution_time); rows are read
 * as they arrive, the socket is paused at the row or byte cap, and at the cap or the deadline the
 * statement is stopped at the server with `KILL QUERY` from a second connection. Always rolled
 * back; a connection goes back to the pool only after a clean ROLLBACK, never after a kill, a cap
 * reached mid-result, a wire-guard close or a connection error.
 */
import net from 'node:net';
import type { Connection, ConnectionOptions, SslOptions } from 'mysql2';
import type { ParsedScopes, Target } from '../../catalogue/index.js';
import { checkDatabaseAddress, credentialRejected, databaseCredentialKind, databaseEndpoint, parseDatabaseUrl, scrub, type DatabaseOptions, type DatabaseUrl } from '../../credentials/database.js';
import { RowCollector, uniqueColumnNames, type ColumnInfo, type ReadQueryResult } from '../../results/index.js';
import { ApiError } from '../../errors.js';
import { keptOnceLoaded } from '../../once.js';
import { abortAnswer, mapPolicyRefusal, statementRejected } from '../../query/errors.js';
import { preparedFrom, type DatabaseNetwork } from '../postgres.js';
import { LiveConnections, poolKey, type PoolDriver } from '../pool.js';
import type { CredentialKindDef, LiveConnector, LiveRunContext, PreparedLiveQuery } from '../types.js';
import { isMysqlSystemSchema, mysqlPolicy, nameCaseOf, type MysqlNameCase } from './policy.js';
import type { SqlChecker } from '../../query/sql/offload.js';
import { catalogLimits, type SchemaListing } from '../../query/schema.js';
import { mysqlCatalogSql, mysqlListing, mysqlScopedTables } from './schema.js';
import { guardMysqlConnection, type ConnectionGuard, type MysqlConnectionLike, type WireTrip } from '../../../protocol/wire-guard.js';

export { MYSQL_ALLOWED_FUNCTIONS } from './allowlists.js';
export { mysqlPolicy } from './policy.js';

const EXAMPLE = 'mysql://reader:password@db.example.com:3306/shop?sslmode=verify-full';

/** the session's sql_mode: backslash escapes on and double quotes as strings, as the checker parses */
export const MYSQL_SQL_MODE = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';

export function parseMysqlUrl(secret: string): DatabaseUrl {
  return parseDatabaseUrl(secret, ['mysql:', 'mariadb:'], 3306, EXAMPLE);
}

export const mysqlCredentialKind: CredentialKindDef = databaseCredentialKind({
  kind: 'mysql',
  product: 'MySQL or MariaDB',
  schemes: ['mysql:', 'mariadb:'],
  example: EXAMPLE,
  prefer: 'TLS (the certificate unchecked, as require) when the server offers it, else without',
  parse: parseMysqlUrl,
});

// MySQL column types → the PostgreSQL type ids the shared row code understands
const MYSQL_DECIMAL = new Set([0, 246]);
const MYSQL_LONGLONG = 8;
const typeOid = (columnType: number | undefined): number => (columnType === undefined ? 0 : MYSQL_DECIMAL.has(columnType) ? 1700 : columnType === MYSQL_LONGLONG ? 20 : 0);

function tlsFor(o: DatabaseOptions): SslOptions | undefined {
  switch (o.sslmode) {
    case 'disable':
      return undefined;
    case 'prefer': // asked for; a server that offers none is connected to again without (connect)
    case 'require':
      return { rejectUnauthorized: false };
    case 'verify-ca':
      return { rejectUnauthorized: true, verifyIdentity: false, ...(o.ca ? { ca: o.ca } : {}) };
    case 'verify-full':
      return { rejectUnauthorized: true, verifyIdentity: true, ...(o.ca ? { ca: o.ca } : {}) };
  }
}

/**
 * `socket` (opened to the checked address) to have its certificate checked against `host`, the
 * URL's host. For a host name mysql2 gives Node's TLS the name as servername, and the name is
 * checked. For an IP address it gives none (no SNI to an address), and Node then checks against
 * the socket's `_host`, which it sets only when it looked a name up: null for a socket opened to
 * an address, so the certificate was checked against "localhost" (test/live/mysql-tls.test.ts:
 * one for 127.0.0.1 refused, one naming only localhost accepted). Set, it is the URL's host.
 */
function checkedAs(host: string, socket: net.Socket): net.Socket {
  (socket as net.Socket & { _host: string | null })._host = host;
  return socket;
}

interface MysqlErrorLike {
  code?: string;
  errno?: number;
  /** set on a socket's error (read ECONNRESET): mysql2 keeps it when it renames the code HANDSHAKE_SSL_ERROR */
  syscall?: string;
  sqlState?: string;
  sqlMessage?: string;
  message?: string;
  fatal?: boolean;
}

const REJECTED = new Set([1044, 1045, 1049, 1698, 1130, 1251]);
/** mysql2's codes for a failed TLS upgrade: the server offers no TLS, the handshake or the certificate failed */
const TLS_FAILED = new Set(['HANDSHAKE_NO_SSL_SUPPORT', 'HANDSHAKE_SSL_ERROR']);
const DENIED = new Set([1142, 1143, 1227, 1792, 1370]);
const INTERRUPTED = new Set([1317, 1969, 3024, 1028]);

type Conn = Connection;

/** How often, and how many times, KILL QUERY is sent while the statement it stops has not ended. */
const KILL_AGAIN_MS = 500;
const KILL_TRIES = 5;

const run1 = (c: Conn, sql: string): Promise<unknown> =>
  new Promise((resolve, reject) => {
    c.query(sql, (err, rows) => (err ? reject(err) : resolve(rows)));
  });

/** What a connection learns once, when it is opened: the server, how it compares table names, its default database. */
interface ServerInfo {
  readonly mariadb: boolean;
  readonly names: MysqlNameCase;
  readonly database: string | null;
}

const serverInfo = new WeakMap<Conn, ServerInfo>();

const MYSQL_DRIVER: PoolDriver<Conn> = {
  kind: 'mysql',
  end: (c) => {
    try {
      c.end(() => c.destroy()); // COM_QUIT, so the server logs no aborted connection
    } catch {
      c.destroy();
    }
  },
  watch: (c, gone) => {
    c.on('error', gone);
    c.on('end', gone);
  },
};

export class MysqlConnector implements LiveConnector {
  readonly targetId = 'mysql';
  readonly credentialKind = 'mysql';
  /** a statement may wait for a pooled connection: it starts when it is sent (ctx.onStart) */
  readonly signalsStart = true;

  /** pooled connections per organization, for its current credential (pool.ts) */
  readonly connections: LiveConnections<Conn>;

  constructor(
    private readonly network: DatabaseNetwork,
    /** the app's check worker (every MySQL-dialect statement is checked there) */
    private readonly checker: SqlChecker,
    poolSize = 4,
  ) {
    this.connections = new LiveConnections(MYSQL_DRIVER, poolSize);
  }

  /** At registration: a host no query may reach is refused now (400 address_not_allowed), as the query would be. */
  async checkCredential(secret: string): Promise<void> {
    await checkDatabaseAddress('mysql', parseMysqlUrl(secret), this.network);
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
    // checked as a case-insensitive server compares names; run() checks again when the server is case-sensitive
    const policy = mysqlPolicy(scopes);
    const checked = await this.checker.checkMysql(sqlText, policy, caller?.tenant);
    const unqualified = checked.tables.some((name) => policy.allowed.get(name)?.schema === null);
    return { ...preparedFrom(checked, policy.allowed), plan: { sqlText, unqualified, databases: checked.assumedDatabases } satisfies MysqlPlan };
  }

  /** The scoped tables from information_schema: our own statement, run like a query (read-only, time limit, caps). */
  async describe(_target: Target, ctx: LiveRunContext): Promise<SchemaListing> {
    const tables = mysqlScopedTables(ctx.scopes);
    if (tables.length === 0) return { tables: [], missing: [], truncated: false };
    const result = await this.run({ sql: mysqlCatalogSql(tables), tables: [], rowFilters: {}, tablesAllowed: [] }, { ...ctx, limits: catalogLimits(ctx.limits) });
    return mysqlListing(result, tables);
  }

  async run(q: PreparedLiveQuery, ctx: LiveRunContext): Promise<ReadQueryResult> {
    const secret = ctx.credential.secret;
    const { url, options: opts, address } = await databaseEndpoint('mysql', ctx.credential, parseMysqlUrl, this.network);
    const deadline = Date.now() + ctx.limits.timeoutMs;
    const ssl = tlsFor(opts);
    const settings = (): ConnectionOptions => ({
      // always the checked address. With TLS the driver is given the URL's host name (its SNI, and
      // verify-full's identity check) and a socket already opened to the checked address: its own
      // lookup of the name, which a rebinding DNS could answer with a private or metadata address,
      // never happens
      ...(ssl ? { host: url.host, stream: () => checkedAs(url.host, net.connect({ host: address, port: url.port, noDelay: true })) } : { host: address }),
      port: url.port,
      user: url.user,
      password: url.password,
      database: url.database,
      ...(ssl ? { ssl } : {}),
      connectTimeout: Math.max(100, Math.min(5000, deadline - Date.now())),
      multipleStatements: false,
      flags: ['-LOCAL_FILES', '-MULTI_STATEMENTS'],
      // rows are read by mysql2's static parser: no code is generated from the server's column
      // names, and a column named __proto__ is read like any other (the generated parser refused it)
      disableEval: true,
      supportBigNumbers: true,
      bigNumberStrings: true,
      dateStrings: true,
      charset: 'utf8mb4_general_ci',
    });

    const key = poolKey([ctx.credential.version ?? null, secret, ctx.credential.options, address]);
    const conn = await this.connections.acquire(ctx.orgId, key, () => connect(settings(), secret, url, opts.sslmode === 'prefer'), deadline, ctx.signal);
    const threadId = conn.threadId;
    let timedOut = false;
    // its signal aborted before its deadline came (a KILL refused, e.g. by a password changed at
    // the server, leaves it running until its time limit: still answered as what stopped it)
    let stoppedFirst = false;
    let killing: Promise<void> | undefined;
    // the run's statements are over (answered or failed): a KILL QUERY is not sent again
    let over = false;
    let markOver = (): void => undefined;
    const overNow = new Promise<void>((resolve) => (markOver = resolve));
    const kill = (): void => {
      if (killing || threadId === null) return;
      killing = (async () => {
        // KILL QUERY stops only what the server is running: a statement sent just before it that
        // had not yet reached the server (still in the network, or waiting behind the session's
        // previous answer) would run on to its time limit. So it is sent again until the statement
        // has ended, as pg-read does with its cancel.
        for (let i = 0; i < KILL_TRIES && !over; i++) {
          if (i > 0) await Promise.race([new Promise((r) => setTimeout(r, KILL_AGAIN_MS).unref()), overNow]);
          if (over) break;
          // (as the statement's own connection was made: prefer goes on without TLS when the server offers none)
          let k: Conn | undefined;
          try {
            k = await connect({ ...settings(), connectTimeout: 3000 }, secret, url, opts.sslmode === 'prefer');
            await run1(k, `KILL QUERY ${Number(threadId)}`);
          } catch {
            // best effort: the server-side time limit stops it anyway
          } finally {
            k?.destroy();
          }
        }
      })();
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, Math.max(0, deadline - Date.now()));
    const onAbort = (): void => {
      if (!timedOut) stoppedFirst = true;
      kill();
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    let broken = false;
    let reusable = false;
    try {
      const info = await describe(conn);
      await checkForServer(this.checker, q, ctx.scopes, info.names, info.database, ctx.orgId);
      const seconds = Math.max(0.001, (deadline - Date.now()) / 1000);
      if (info.mariadb) await run1(conn, `SET SESSION max_statement_time = ${seconds.toFixed(3)}`);
      else await run1(conn, `SET SESSION max_execution_time = ${Math.max(1, Math.ceil(seconds * 1000))}`);
      await run1(conn, 'START TRANSACTION READ ONLY');
      if (ctx.signal.aborted) throw Object.assign(new Error('stopped before it was sent'), { errno: 1317 });
      ctx.onStart?.(); // the statement goes to the database now
      const result = await stream(conn, q.sql, ctx.limits.maxRows, ctx.limits.maxBytes, () => {
        broken = true;
        kill();
      });
      // stopped by its signal while it ran, its KILLs refused (the old password): it ended at the
      // server, but its rows are not answered, as a postgres statement's are not (pg-read)
      if (stoppedFirst) throw Object.assign(new Error('stopped'), { errno: 1317 });
      if (result.stopped && result.rows.length === 0) {
        throw new ApiError('invalid_sql', `the first row of the result is ${result.stopped.declared} bytes or more, more than the ${ctx.limits.maxBytes} bytes a response may hold; it was not read. Select fewer or shorter columns (e.g. LEFT(column, 1000)) or filter the rows`, {
          reason: 'row_too_large',
          row_bytes: result.stopped.declared,
          max_bytes: ctx.limits.maxBytes,
        });
      }
      if (timedOut) throw Object.assign(new Error('interrupted'), { errno: 1317 });
      const { stopped: _stopped, ...rows } = result;
      return rows;
    } catch (err) {
      if (err instanceof ApiError) throw err; // our own refusal (checkForServer): the connection is fine
      const e = err as MysqlErrorLike;
      if (timedOut || ctx.signal.aborted || (e.errno !== undefined && INTERRUPTED.has(e.errno))) {
        broken = true;
        const timeout = (): ApiError => new ApiError('query_timeout', `the statement ran past its ${ctx.limits.timeoutMs} ms deadline and was stopped at the database (KILL QUERY)`);
        // stopped by its signal (a revocation, the shutdown, the credential changed: 503, not charged) unless its own deadline came first
        throw timedOut && !stoppedFirst ? timeout() : abortAnswer(ctx.signal, timeout);
      }
      const message = scrub(e.sqlMessage ?? e.message ?? 'database error', secret, url);
      if (e.errno !== undefined && DENIED.has(e.errno)) throw statementRejected('the database', message, { errno: e.errno, refused: true });
      if (e.errno !== undefined && e.sqlState && !e.fatal) throw statementRejected('the database', message, { errno: e.errno, sqlstate: e.sqlState, refused: false });
      broken = true;
      throw new ApiError('service_unavailable', 'the connection to the mysql database was lost during the statement; retry', { connector_kind: 'mysql' });
    } finally {
      over = true;
      markOver();
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onAbort);
      if (killing) await killing;
      if (broken) conn.destroy();
      else {
        // never reused after a KILL QUERY was sent: it could land on the connection's next statement
        reusable = await run1(conn, 'ROLLBACK').then(
          () => killing === undefined,
          () => false,
        );
      }
      this.connections.release(ctx.orgId, key, conn, reusable);
    }
  }
}

/**
 * The session settings and server facts of a pooled connection, once per connection: the pinned
 * sql_mode (set first, before any statement of the agent's), the server's kind, how it compares
 * table names, and its default database.
 */
async function describe(conn: Conn): Promise<ServerInfo> {
  const known = serverInfo.get(conn);
  if (known) return known;
  await run1(conn, `SET SESSION sql_mode = '${MYSQL_SQL_MODE}'`);
  const row = ((await run1(conn, 'SELECT VERSION() AS v, @@lower_case_table_names AS l, DATABASE() AS d')) as { v?: string; l?: unknown; d?: string | null }[])[0];
  const info: ServerInfo = { mariadb: /mariadb/i.test(String(row?.v ?? '')), names: nameCaseOf(row?.l), database: row?.d ?? null };
  serverInfo.set(conn, info);
  return info;
}

interface MysqlPlan {
  readonly sqlText: string;
  /** whether the statement reads a table scoped without a schema (the credential's database) */
  readonly unqualified: boolean;
  /** schema names the agent wrote for such tables (`shop.orders` for `read:orders`): each must be the credential's database */
  readonly databases: readonly string[];
}

/**
 * What prepare() checked assumed a server that folds name case; a case-sensitive server
 * (`lower_case_table_names = 0`) compares names exactly, so the statement is checked again that
 * way and must come out the same (else `ORDERS` and `orders` could be mixed up). An unqualified
 * scoped table means the credential's database, which must not be a system schema.
 */
export async function checkForServer(checker: SqlChecker, q: PreparedLiveQuery, scopes: ParsedScopes, names: MysqlNameCase, database: string | null, tenant = ''): Promise<void> {
  const plan = q.plan as MysqlPlan | undefined;
  if (!plan) return;
  if (plan.unqualified && database !== null && isMysqlSystemSchema(database)) {
    throw new ApiError('scope_violation', `the credential's database is ${database}, a system schema, and cannot be read; scope the tables as read:<schema>.<table>, or register a credential whose URL names your data's database`, { reason: 'system_catalog' });
  }
  for (const d of plan.databases) {
    const same = database !== null && (names === 'fold' ? d.toLowerCase() === database.toLowerCase() : d === database);
    if (!same) {
      throw new ApiError('scope_violation', `tables of ${d} are not in this connection's scopes: an unqualified read: scope means the credential's database (${database ?? 'none'}); scope them as read:${d}.<table>`, { reason: 'table_not_in_scope' });
    }
  }
  if (names === 'fold') return;
  let again: string;
  try {
    again = (await checker.checkMysql(plan.sqlText, mysqlPolicy(scopes, 'exact'), tenant)).sql;
  } catch (err) {
    throw mapPolicyRefusal(err);
  }
  if (again !== q.sql) {
    throw new ApiError('scope_violation', 'this server compares table names case-sensitively (lower_case_table_names = 0): write table and CTE names exactly as scoped', { reason: 'table_not_in_scope' });
  }
}

const guards = new WeakMap<Conn, ConnectionGuard>();

/**
 * Every chunk the connection reads, from the server's greeting on, passes the wire guard before
 * mysql2's packet parser: no packet (or row of 16 MB packets) larger than the read's budget, or
 * 16 MiB between reads, is ever decoded.
 */
function guarded(c: Conn): Conn {
  guards.set(c, guardMysqlConnection(c as unknown as MysqlConnectionLike));
  return c;
}

/**
 * mysql2, loaded on the first MySQL statement: a server that never reads MySQL does not load its
 * ~80 modules (a load that failed is tried again by the next statement)
 */
const mysqlDriver: () => Promise<typeof import('mysql2')> = keptOnceLoaded(() => import('mysql2').then((m) => m.default));

/** mysql2's connect timeout when none is given */
const MYSQL_DRIVER_CONNECT_TIMEOUT_MS = 10_000;

/**
 * A connection with `o`. `prefer`: TLS was asked for only because the server might offer it, and
 * mysql2 has no fallback of its own: a server whose greeting offers none (refused by the driver
 * before anything is sent) is connected to again without TLS, as PostgreSQL's prefer does, within
 * what is left of `o.connectTimeout` (both attempts together keep the statement's deadline).
 */
async function connect(o: ConnectionOptions, secret: string, url: DatabaseUrl, prefer = false): Promise<Conn> {
  const began = Date.now();
  const c = guarded((await mysqlDriver()).createConnection(o));
  c.on('error', () => undefined); // a dropped connection surfaces as the failed query
  try {
    await new Promise<void>((resolve, reject) => c.connect((err) => (err ? reject(err) : resolve())));
    return c;
  } catch (err) {
    c.destroy();
    const e = err as MysqlErrorLike;
    if (prefer && o.ssl !== undefined && e.code === 'HANDSHAKE_NO_SSL_SUPPORT') {
      const { ssl: _, ...plain } = o;
      const left = (o.connectTimeout ?? MYSQL_DRIVER_CONNECT_TIMEOUT_MS) - (Date.now() - began);
      return connect({ ...plain, connectTimeout: Math.max(100, left) }, secret, url);
    }
    if (e.errno !== undefined && REJECTED.has(e.errno)) return Promise.reject(credentialRejected('mysql', scrub(e.sqlMessage ?? e.message ?? '', secret, url)));
    // a server that offers no TLS (HANDSHAKE_NO_SSL_SUPPORT: its message names neither SSL nor TLS) is a TLS refusal too, not an
    // unreachable server; a socket error during the TLS negotiation (HANDSHAKE_SSL_ERROR with a syscall: a reset) is the network
    if ((e.code !== undefined && TLS_FAILED.has(e.code) && e.syscall === undefined) || /SSL|TLS|certificate|self.signed/i.test(e.message ?? '')) {
      return Promise.reject(
        new ApiError('invalid_request', `TLS to the mysql server failed: ${scrub(e.message ?? '', secret, url)}; check sslmode / ca of the registered credential`, {
          reason: 'credential_rejected',
          connector_kind: 'mysql',
        }),
      );
    }
    return Promise.reject(new ApiError('service_unavailable', 'the mysql server of the registered credential cannot be reached; retry, or check its host and port', { connector_kind: 'mysql', reason: 'unreachable' }));
  }
}

/** packets of a result that are not rows (column definitions, EOF / OK) stay under this, besides the row budget */
const PACKET_SLACK = 4096;

/**
 * Read the result as it arrives, under the caps; at a cap the socket is paused and `stop` called.
 * A wire guard reads each packet's 3-byte length before mysql2 does: a packet (or a row split
 * into 16 MB packets) longer than the bytes still allowed is never read; the socket is closed,
 * `stop` kills the statement, and the rows before it come back truncated (`stopped` set).
 */
function stream(conn: Conn, sql: string, maxRows: number, maxBytes: number, stop: () => void): Promise<ReadQueryResult & { stopped: WireTrip | null }> {
  return new Promise((resolve, reject) => {
    let columns: ColumnInfo[] = [];
    let collector: RowCollector | undefined;
    let done = false;
    const guard = guards.get(conn);
    guard?.use({
      rowBudget: () => Math.max(0, maxBytes - (collector?.bytes ?? 2)) + PACKET_SLACK,
      onTrip: () => {
        stop();
        finish(); // mysql2 tells a query without a callback nothing of a lost connection
      },
    });
    // a connection lost mid-result reaches the connection, not the query (it has no callback)
    const onLost = (err: Error): void => {
      if (guard?.tripped) return finish();
      if (done) return;
      done = true;
      reject(err);
    };
    conn.once('error', onLost);
    function finish(): void {
      if (done) return;
      done = true;
      conn.removeListener('error', onLost);
      if (!guard?.tripped) guard?.use(null);
      const c = collector ?? new RowCollector(columns, maxRows, maxBytes);
      const stopped = guard?.tripped ?? null;
      resolve({ columns, rows: c.rows, truncated: c.truncated || stopped !== null, bytes: c.bytes, stopped });
    }
    const query = conn.query({ sql, rowsAsArray: true });
    query.on('fields', (fields: { name: string; columnType?: number }[]) => {
      if (collector) return;
      const names = uniqueColumnNames(fields.map((f) => f.name));
      columns = fields.map((f, i) => ({ name: names[i] as string, type_oid: typeOid(f.columnType) }));
      collector = new RowCollector(columns, maxRows, maxBytes);
    });
    query.on('result', (row: unknown) => {
      if (done) return;
      collector ??= new RowCollector(columns, maxRows, maxBytes);
      if (!collector.add(row as unknown[])) {
        conn.pause(); // read nothing more; the statement is stopped at the server
        stop();
        finish();
      }
    });
    query.on('error', (err: Error) => {
      if (guard?.tripped) return finish(); // the guard closed the connection: the rows so far
      if (!done) {
        done = true;
        conn.removeListener('error', onLost);
        guard?.use(null);
        reject(err);
      }
    });
    query.on('end', finish);
  });
}
