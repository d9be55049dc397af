/**
 * A customer database for tests and benchmarks of the relay path: a fresh database on a real
 * PostgreSQL when one answers, otherwise an embedded PGlite served over the PostgreSQL wire
 * protocol (@electric-sql/pglite-socket) on 127.0.0.1, port 0, so `pg` clients always speak the
 * real protocol. Lives in bench/ (compiled by tsc, no tap import) so that `npm run bench` and the
 * tests (test/helpers/customer-db.ts re-exports it) share one implementation.
 *
 * What the PGlite fallback is, read from pglite-socket 0.2.17's source: PGlite is ONE backend.
 * PGLiteSocketServer accepts up to `maxConnections` sockets (we open 32) and multiplexes them
 * onto it through a global queue, one protocol message at a time. Therefore:
 *  - several `pg` connections (a pg.Pool, plus a side connection) work, but their statements
 *    run one after another, never in parallel;
 *  - while one connection is inside an explicit transaction (BEGIN … COMMIT/ROLLBACK), the
 *    messages of every other connection wait until it ends. A stream stalled mid-transaction
 *    (e.g. a relay cursor waiting for credit) blocks all other connections: a test whose
 *    consumer waits on a second query while holding the first one open deadlocks here;
 *  - outside explicit transactions, the messages of an extended-protocol query (Parse, Bind,
 *    Execute, Sync) from two connections may interleave on the one backend: parameterised
 *    queries from several connections at once are only safe inside transactions (the relay's
 *    executor always wraps them in BEGIN READ ONLY) or with one connection;
 *  - CancelRequest is swallowed and pg_cancel_backend / statement_timeout cannot interrupt a
 *    running statement (PGlite runs it synchronously): cancellation AT the database needs
 *    `kind === 'postgres'`. Worse, a connection that must be OPENED while another holds a
 *    transaction waits for that transaction (its startup message is queued too): a client that
 *    opens a side connection (e.g. for pg_cancel_backend) and waits for it before ending its
 *    own transaction deadlocks. (svc-relay's executor cancels with a CancelRequest, which PGlite
 *    swallows, and drops the connection; nothing waits on a side connection.)
 * `concurrent` and `cancelAtDatabase` in the result say this to callers.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export type CustomerDatabaseKind = 'postgres' | 'pglite';

export interface CustomerDatabase {
  /** postgres:// URL of the database (user postgres) */
  readonly url: string;
  readonly kind: CustomerDatabaseKind;
  /** how many client connections may be open at once (PostgreSQL: its max_connections minus reserved) */
  readonly maxConnections: number;
  /** statements on different connections run in parallel (false on PGlite: one at a time) */
  readonly concurrent: boolean;
  /** pg_cancel_backend / statement_timeout interrupt a running statement (false on PGlite) */
  readonly cancelAtDatabase: boolean;
  /** drops the database / stops the embedded server; idempotent */
  drop(): Promise<void>;
}

export interface CustomerDatabaseOptions {
  /** the real PostgreSQL to try (default TEST_DATABASE_URL or postgres://postgres@127.0.0.1:5432/test) */
  readonly baseUrl?: string;
  /** use PGlite even when PostgreSQL answers (default: env SVC_TEST_FORCE_PGLITE=1) */
  readonly forcePglite?: boolean;
}

export const DEFAULT_CUSTOMER_DATABASE_URL = process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
/** sockets the PGlite fallback accepts at once */
export const PGLITE_MAX_CONNECTIONS = 32;

const answers = new Map<string, Promise<number | null>>();

/** max_connections usable by clients on the server at `url`, or null when nothing answers there */
function probe(url: string): Promise<number | null> {
  let p = answers.get(url);
  if (!p) {
    p = (async () => {
      const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1500 });
      c.on('error', () => undefined);
      try {
        await c.connect();
        const r = await c.query<{ max: string; reserved: string }>("SELECT current_setting('max_connections') AS max, current_setting('superuser_reserved_connections') AS reserved");
        const row = r.rows[0];
        return row ? Number(row.max) - Number(row.reserved) : 100;
      } catch {
        return null;
      } finally {
        await c.end().catch(() => undefined);
      }
    })();
    answers.set(url, p);
  }
  return p;
}

function forced(o: CustomerDatabaseOptions): boolean {
  return o.forcePglite ?? /^(1|true|yes)$/i.test(process.env['SVC_TEST_FORCE_PGLITE'] ?? '');
}

/** a database name: the prefix reduced to [a-z0-9_] plus a random suffix */
function databaseName(prefix: string): string {
  const clean = prefix.toLowerCase().replace(/[^a-z0-9_]/g, '_').replace(/^[^a-z_]/, '_').slice(0, 40) || 'svc';
  return `${clean}_${randomBytes(6).toString('hex')}`;
}

async function onPostgres(baseUrl: string, prefix: string, maxConnections: number): Promise<CustomerDatabase> {
  const name = databaseName(prefix);
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(baseUrl);
  u.pathname = `/${name}`;
  let dropped: Promise<void> | undefined;
  return {
    url: u.toString(),
    kind: 'postgres',
    maxConnections,
    concurrent: true,
    cancelAtDatabase: true,
    drop: () =>
      (dropped ??= (async () => {
        const c = new pg.Client({ connectionString: baseUrl });
        await c.connect();
        try {
          await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        } finally {
          await c.end();
        }
      })()),
  };
}

async function onPglite(): Promise<CustomerDatabase> {
  // imported lazily: starting PGlite costs ~1 s and some memory, only pay it when needed
  const [{ PGlite }, { PGLiteSocketServer }] = await Promise.all([import('@electric-sql/pglite'), import('@electric-sql/pglite-socket')]);
  const db = await PGlite.create();
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections: PGLITE_MAX_CONNECTIONS });
  try {
    await server.start();
  } catch (err) {
    await db.close();
    throw err;
  }
  const conn = server.getServerConn(); // "127.0.0.1:<port>"
  let dropped: Promise<void> | undefined;
  return {
    // PGlite has one database, "postgres"; the password is ignored
    url: `postgres://postgres@${conn}/postgres`,
    kind: 'pglite',
    maxConnections: PGLITE_MAX_CONNECTIONS,
    concurrent: false,
    cancelAtDatabase: false,
    drop: () =>
      (dropped ??= (async () => {
        await server.stop();
        await db.close();
      })()),
  };
}

/**
 * A fresh database on the real PostgreSQL at `baseUrl` (default TEST_DATABASE_URL), or undefined
 * when none answers there: a bench's control-plane store or demo datasets, which need a real
 * server (never PGlite).
 */
export async function postgresDatabase(prefix: string, baseUrl = DEFAULT_CUSTOMER_DATABASE_URL): Promise<CustomerDatabase | undefined> {
  const max = await probe(baseUrl);
  return max === null ? undefined : onPostgres(baseUrl, prefix, max);
}

/**
 * A fresh customer database: on the real PostgreSQL at `baseUrl` when it answers (and PGlite is
 * not forced), otherwise an embedded PGlite over the wire. `prefix` names the PostgreSQL database.
 */
export async function customerDatabase(prefix: string, o: CustomerDatabaseOptions = {}): Promise<CustomerDatabase> {
  const baseUrl = o.baseUrl ?? DEFAULT_CUSTOMER_DATABASE_URL;
  if (!forced(o)) {
    const max = await probe(baseUrl);
    if (max !== null) return onPostgres(baseUrl, prefix, max);
  }
  return onPglite();
}
