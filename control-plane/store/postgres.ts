import pg from 'pg';
import type { Row, Sql, Store } from './types.js';

const INT8_OID = 20;

/** 64-bit integers as numbers when exact, else as bigint (as PGlite gives them): never rounded. */
function int8(v: string): number | bigint {
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : BigInt(v);
}

/** pg type parsers for this pool only. */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === INT8_OID ? int8 : pg.types.getTypeParser(oid, format as 'text'))) as typeof pg.types.getTypeParser,
};

/** The store in an external PostgreSQL (DATABASE_URL): many control-plane replicas can share it. */
export async function openPostgresStore(url: string, poolSize = 10): Promise<Store> {
  const pool = new pg.Pool({ connectionString: url, max: poolSize, types, application_name: 'svc-control-plane', connectionTimeoutMillis: 5000, statement_timeout: 30_000 });
  // an idle client dropped by the server (restart, idle timeout) must not crash the process
  pool.on('error', () => undefined);
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
    pool: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
  };
}
