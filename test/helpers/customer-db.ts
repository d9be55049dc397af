/**
 * The customer database for relay tests: a fresh database on the real PostgreSQL at
 * TEST_DATABASE_URL when it answers, otherwise an embedded PGlite over the PostgreSQL wire
 * protocol (docs/decisions.md, "Tests speak the real protocols"). SVC_TEST_FORCE_PGLITE=1 forces the PGlite fallback.
 * The implementation is shared with the benchmarks (bench/customer-db.ts); read its header for
 * what the PGlite fallback can and cannot do (`concurrent`, `cancelAtDatabase`, `maxConnections`).
 */
import { customerDatabase as open, type CustomerDatabase } from '../../bench/customer-db.js';
import { TEST_DATABASE_URL } from './server.js';

export type { CustomerDatabase, CustomerDatabaseKind } from '../../bench/customer-db.js';
export { PGLITE_MAX_CONNECTIONS } from '../../bench/customer-db.js';

export function customerDatabase(prefix: string): Promise<CustomerDatabase> {
  return open(prefix, { baseUrl: TEST_DATABASE_URL });
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
