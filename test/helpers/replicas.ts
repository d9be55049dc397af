/**
 * Two replicas (test servers in this process) on one fresh PostgreSQL store, their demo engines
 * started with them, and a client of that store to watch it (locks, rows). Closed and dropped at
 * the end of `t`. Callers check realPostgresAvailable first.
 */
import pg from 'pg';
import type { Limits } from '../../control-plane/config.js';
import { freshDatabase, startServer, type TestServer } from './server.js';
import type { TapTest } from './tap.js';

/** `env`: settings of both replicas (as in startServer) */
export async function twoReplicas(t: TapTest, prefix: string, limits: Partial<Limits>, env: Record<string, string> = {}): Promise<{ a: TestServer; b: TestServer; watcher: pg.Client }> {
  const db = await freshDatabase(prefix);
  const a = await startServer({ databaseUrl: db.url, demo: 'eager', limits, env });
  const b = await startServer({ databaseUrl: db.url, demo: 'eager', limits, env });
  const watcher = new pg.Client({ connectionString: db.url });
  await watcher.connect();
  t.teardown(async () => {
    await watcher.end();
    await a.close();
    await b.close();
    await db.drop();
  });
  return { a, b, watcher };
}
