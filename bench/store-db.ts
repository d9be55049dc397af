/**
 * A fresh database on the PostgreSQL at TEST_DATABASE_URL (default
 * `postgres://postgres@127.0.0.1:5432/test`) for a bench's control-plane store or demo datasets,
 * or undefined when no server answers there. `drop()` removes it (connections forced off).
 */
import pg from 'pg';

const ADMIN_URL = process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

export interface BenchDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

export async function benchDatabase(role: string): Promise<BenchDatabase | undefined> {
  const admin = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 1500 });
  try {
    await admin.connect();
  } catch {
    return undefined;
  }
  const name = `svc_bench_${role}_${process.pid}`;
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
