/**
 * Issue #12 point 1 on the REST / file targets: their statements run on embedded engines (PGlite
 * in worker threads). A 600 MB value cannot be built there: the answer is a coded
 * `400 invalid_sql` (reason `out_of_memory`, saying what to do), the process stays up, the engine
 * is replaced, and the next query works. Uses the real engine pool, no HTTP API.
 */
import t from 'tap';
import { EnginePool, QueryDatabase, querySchema } from '../../../control-plane/live/rest/engine.js';
import { ApiError } from '../../../control-plane/errors.js';

t.test('a 600 MB value on the embedded engine is a coded refusal, and the engine pool serves on', async (t) => {
  const pool = new EnginePool(1);
  t.teardown(() => pool.close());
  const signal = new AbortController().signal;
  const db = await QueryDatabase.open(pool, signal, querySchema());
  let caught: unknown;
  try {
    await db.read("SELECT repeat(repeat('x', 1000000), 600) AS v", true, 100, 1_000_000, signal);
  } catch (err) {
    caught = err;
  } finally {
    await db.close();
  }
  t.ok(caught instanceof ApiError, `a coded error: ${String(caught)}`);
  const e = caught as ApiError;
  t.equal(e.code, 'invalid_sql');
  t.equal(e.details?.['reason'], 'out_of_memory');
  t.match(e.message, /left\(column/);

  const again = await QueryDatabase.open(pool, signal, querySchema());
  try {
    const r = await again.read('SELECT 1 AS one', true, 100, 1_000_000, signal);
    t.same(r.rows, [{ one: 1 }], 'the next query runs');
  } finally {
    await again.close();
  }
});

t.test('an engine that loaded more than 16 MB for one query is ended, not reused (its WASM heap never shrinks)', async (t) => {
  const { HEAVY_LOAD_BYTES } = await import('../../../control-plane/live/rest/engine.js');
  const pool = new EnginePool(1);
  t.teardown(() => pool.close());
  const signal = new AbortController().signal;
  const light = await QueryDatabase.open(pool, signal, querySchema());
  await light.createTable('t', [{ name: 'v', type: 'text' }]);
  await light.insert('t', [{ name: 'v', type: 'text' }], [{ v: 'small' }]);
  await light.close();
  t.equal(pool.idleCount, 1, 'a light query gives its engine back');

  const heavy = await QueryDatabase.open(pool, signal, querySchema());
  await heavy.createTable('t', [{ name: 'v', type: 'text' }]);
  const row = { v: 'x'.repeat(1_000_000) };
  for (let i = 0; i * 1_000_000 <= HEAVY_LOAD_BYTES; i++) await heavy.insert('t', [{ name: 'v', type: 'text' }], [row]);
  await heavy.close();
  t.equal(pool.idleCount, 0, 'a heavy one ends it');

  const next = await QueryDatabase.open(pool, signal, querySchema());
  try {
    t.same((await next.read('SELECT 1 AS one', true, 100, 1_000_000, signal)).rows, [{ one: 1 }], 'a fresh engine serves the next query');
  } finally {
    await next.close();
  }
});
