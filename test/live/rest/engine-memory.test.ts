/**
 * A pooled engine for API and file queries runs on the shared empty image and keeps only what it
 * writes; what one query loaded (its rows and their WAL) must not stay with the engine for the
 * next ones: an embedded PostgreSQL never checkpoints on its own, so without the checkpoint after
 * each query's DROP every query's WAL stayed in memory for the engine's life (up to 200 uses).
 */
import t from 'tap';
import { EnginePool, QueryDatabase, querySchema } from '../../../control-plane/live/rest/engine.js';

t.test("a reused engine does not keep earlier queries' rows or WAL", async (t) => {
  const pool = new EnginePool(1);
  t.teardown(() => pool.close());
  const columns = [
    { name: 'id', type: 'bigint' as const },
    { name: 'body', type: 'text' as const },
  ];
  // about 3 MB of rows per query, under the size after which an engine is ended rather than reused
  const rows = Array.from({ length: 6000 }, (_, i) => ({ id: i, body: `${i} `.padEnd(500, 'x') }));
  const owned: number[] = [];
  for (let i = 0; i < 6; i++) {
    const signal = new AbortController().signal;
    const q = await QueryDatabase.open(pool, signal, querySchema());
    await q.createTable('t', columns);
    await q.insert('t', columns, rows);
    await q.close();
    const e = await pool.take(signal);
    owned.push(await e.db.ownedBytes());
    pool.give(e, true);
  }
  t.equal(pool.idleCount, 1, 'one engine served every query');
  t.ok(owned[0]! > 0, `the engine holds its own files after a query (${owned[0]} bytes)`);
  t.ok(owned[5]! <= owned[0]! + 2 * 1024 * 1024, `what it holds does not grow with each query (${owned.map((b) => (b / 1048576).toFixed(1)).join(', ')} MB)`);
  t.ok(owned[5]! < 3 * 3 * 1024 * 1024, 'less than what three queries loaded');
});
