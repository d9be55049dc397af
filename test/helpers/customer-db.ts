/**
 * The customer database for relay tests: a fresh database on the real PostgreSQL at
 * TEST_DATABASE_URL when it answers, otherwise an embedded PGlite over the PostgreSQL wire
 * protocol (docs/decisions.md, "Tests speak the real protocols"). SVC_TEST_FORCE_PGLITE=1 forces the PGlite fallback.
 * The implementation is shared with the benchmarks (bench/customer-db.ts); read its header for
 * what the PGlite fallback can and cannot do (`concurrent`, `cancelAtDatabase`, `maxConnections`).
 */
import { customerDatabase as open, type CustomerDatabase } from '../../bench/customer-db.js';
import pg from 'pg';
import { api, realPostgresAvailable, signupAgent, TEST_DATABASE_URL, type Agent } from './server.js';
import type { TapTest } from './tap.js';

export type { CustomerDatabase, CustomerDatabaseKind } from '../../bench/customer-db.js';
export { PGLITE_MAX_CONNECTIONS } from '../../bench/customer-db.js';

export function customerDatabase(prefix: string): Promise<CustomerDatabase> {
  return open(prefix, { baseUrl: TEST_DATABASE_URL });
}

/** `url` with `sslmode=disable`: the test databases on loopback speak no TLS */
export const withSslmode = (url: string): string => `${url}${url.includes('?') ? '&' : '?'}sslmode=disable`;

/** A new agent whose organization holds `url` (sslmode=disable) as its `postgres` credential. */
export async function postgresAgent(base: string, url: string): Promise<Agent> {
  const a = await signupAgent(base);
  const r = await api(base, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: withSslmode(url) } });
  if (r.status !== 201) throw new Error(`credential: ${r.status} ${r.text}`);
  return a;
}

/** Drops the database and, on a real PostgreSQL, the login role a test created in it. */
export async function dropWithRole(db: CustomerDatabase | undefined, role: string): Promise<void> {
  if (!db) return;
  await db.drop();
  if (db.kind !== 'postgres') return;
  const pg = (await import('pg')).default;
  const c = new pg.Client({ connectionString: db.url.replace(/\/[^/]*$/, '/postgres') });
  await c.connect();
  await c.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
  await c.end();
}

/**
 * Errors raised in this (real PostgreSQL) database are not written to the server's log: a test
 * whose statement fails with a 600 MB error message would otherwise append those 600 MB to the log
 * of the machine's server on every run. Needs a superuser (as the default TEST_DATABASE_URL is);
 * returns false where the setting was refused, and the log then takes the message.
 */
export async function quietServerLog(url: string): Promise<boolean> {
  const pg = (await import('pg')).default;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET log_min_messages = fatal', current_database()); END $$");
    return true;
  } catch {
    return false;
  } finally {
    await c.end();
  }
}

/**
 * A customer database on the real PostgreSQL holding `orders (id int PRIMARY KEY)` with ids
 * 1…`rows`, and a client on it; both end with the test `t`. Undefined, the test skipped with the
 * reason, where no real PostgreSQL answers (tests that interrupt a running statement need one).
 */
export async function ordersOnRealPostgres(t: TapTest, prefix: string, rows: number): Promise<{ db: CustomerDatabase; client: pg.Client } | undefined> {
  if (!(await realPostgresAvailable())) {
    t.skip('no PostgreSQL answers at TEST_DATABASE_URL (PGlite cannot interrupt a running statement)', () => undefined);
    return undefined;
  }
  const db = await customerDatabase(prefix);
  t.teardown(() => db.drop());
  if (db.kind !== 'postgres') {
    t.skip('the customer database is PGlite here', () => undefined);
    return undefined;
  }
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  t.teardown(() => client.end());
  await client.query(`CREATE TABLE orders (id int PRIMARY KEY); INSERT INTO orders SELECT generate_series(1, ${Math.floor(rows)})`);
  return { db, client };
}
