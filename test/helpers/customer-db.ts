/**
 * The customer database for relay tests: a fresh database on the real PostgreSQL at
 * TEST_DATABASE_URL when it answers, otherwise an embedded PGlite over the PostgreSQL wire
 * protocol (CONTRACT.md). SVC_TEST_FORCE_PGLITE=1 forces the PGlite fallback.
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
