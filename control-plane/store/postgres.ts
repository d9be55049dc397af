import pg from 'pg';
import type { Row, Sql, Store } from './types.js';

const INT8_OID = 20;

/** pg type parsers for this pool only: 64-bit integers as numbers (our counters stay below 2^53). */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/** The store in an external PostgreSQL (DATABASE_URL): many control-plane replicas can share it. */
export async function openPostgresStore(url: string, poolSize = 10): Promise<Store> {
  const pool = new pg.Pool({ connectionString: url, max: poolSize, types, application_name: 'svc-control-plane' });
  // fail fast with a clear message when the server does not answer
  const client = await pool.connect();
  client.release();
  return {
    kind: 'postgres',
    query: async <T extends object = Row>(text: string, params: readonly unknown[] = []) =>
      (await pool.query(text, params as unknown[])).rows as T[],
    tx: async <T>(fn: (sql: Sql) => Promise<T>) => {
      const c = await pool.connect();
      const sql: Sql = {
        query: async <R extends object = Row>(text: string, params: readonly unknown[] = []) => (await c.query(text, params as unknown[])).rows as R[],
      };
      try {
        await c.query('BEGIN');
        const result = await fn(sql);
        await c.query('COMMIT');
        return result;
      } catch (err) {
        await c.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        c.release();
      }
    },
    close: () => pool.end(),
  };
}
