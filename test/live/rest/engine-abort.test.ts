/**
 * A query engine stopped while rows are being loaded into it (the statement's deadline, or the
 * control plane's shutdown): the load stops at once (the engine is terminated, as during the
 * statement's read) and is answered as what stopped it: the shutdown's 503 (not charged), the
 * deadline's query_timeout. Before, a load went on past the stop, and an engine terminated under
 * it was always answered query_timeout (charged), the shutdown's included.
 */
import t from 'tap';
import { EnginePool, QueryDatabase, querySchema, type LoadColumn } from '../../../control-plane/live/rest/engine.js';
import { ApiError } from '../../../control-plane/errors.js';
import { shutdownStop } from '../../../control-plane/query/errors.js';

const pool = new EnginePool(1);
t.before(() => pool.warm());
t.teardown(() => pool.close());

const columns: LoadColumn[] = [
  { name: 'id', type: 'bigint' },
  { name: 'label', type: 'text' },
];
const rows = Array.from({ length: 2000 }, (_, i) => ({ id: i, label: `row ${i}` }));

/** The answer a load stopped by `reason` gets; the engine it was stopped in is ended, never reused. */
async function stoppedLoad(reason: unknown): Promise<unknown> {
  const stop = new AbortController();
  const db = await QueryDatabase.open(pool, stop.signal, querySchema());
  await db.createTable('t', columns);
  const loading = db.insert('t', columns, rows).then(
    () => 'loaded',
    (e: unknown) => e,
  );
  stop.abort(reason);
  const answer = await loading;
  const after = await db.insert('t', columns, rows).then(
    () => 'loaded',
    (e: unknown) => e,
  );
  await db.close();
  return { answer, after };
}

t.test('the shutdown while rows are loaded: the load stops and is answered 503 shutting_down, not query_timeout', async (t) => {
  const { answer, after } = (await stoppedLoad(shutdownStop())) as { answer: unknown; after: unknown };
  for (const [what, a] of [
    ['the load in flight', answer],
    ['a load asked for after the stop', after],
  ] as const) {
    t.ok(a instanceof ApiError, `${what}: ${String(a)}`);
    t.equal((a as ApiError).code, 'service_unavailable', what);
    t.equal((a as ApiError).details?.['reason'], 'shutting_down', what);
    t.equal((a as ApiError).headers?.['Retry-After'], '1', what);
  }
  t.equal(pool.idleCount, 0, 'the engine the load was stopped in was ended, not kept for the next query');
});

t.test('the deadline while rows are loaded: query_timeout', async (t) => {
  const { answer } = (await stoppedLoad(new DOMException('the deadline', 'TimeoutError'))) as { answer: unknown };
  t.ok(answer instanceof ApiError, String(answer));
  t.equal((answer as ApiError).code, 'query_timeout');
});

t.test('a fresh engine serves the next query', async (t) => {
  const db = await QueryDatabase.open(pool, new AbortController().signal, querySchema());
  try {
    await db.createTable('t', columns);
    await db.insert('t', columns, rows);
    const r = await db.read(`SELECT count(*)::int AS n FROM ${db.schema}.t`, false, 10, 100_000, new AbortController().signal);
    t.same(r.rows, [{ n: 2000 }]);
  } finally {
    await db.close();
  }
});
