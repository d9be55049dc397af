/**
 * The embedded engine's statement batches (statements asked for together go to its thread in one
 * message) and its read's transaction opened in one round trip: each statement answers or fails
 * alone, first come first served against transactions and close(), nothing hangs.
 */
import t from 'tap';
import { EmbeddedPostgres, type EmbeddedError } from '../../control-plane/embedded/index.js';

t.test('a statement whose parameters cannot be sent to the thread fails alone, not its batch', async (t) => {
  const db = await EmbeddedPostgres.start();
  t.teardown(() => db.close());
  await db.exec('CREATE TABLE k (id int primary key)');
  // hold the engine so the three below queue up and go in one batch
  const gate = db.exclusive(() => new Promise((r) => setTimeout(r, 50)));
  const others = [db.query('INSERT INTO k VALUES (1) RETURNING id'), db.query('SELECT 2 AS two')];
  const bad = db.query('SELECT $1::text AS x', [Symbol('not cloneable')]);
  const others2 = [db.query('SELECT 3 AS three')];
  await gate;
  const r = await Promise.allSettled([...others, bad, ...others2]);
  t.equal(r[2]?.status, 'rejected', 'the bad one fails');
  t.same(
    r.map((x) => x.status),
    ['fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
    `the others answer on their own: ${r.map((x) => (x.status === 'rejected' ? String((x.reason as Error).message).slice(0, 60) : 'ok')).join(' | ')}`,
  );
});

t.test('a read whose settings fail leaves no aborted transaction behind', async (t) => {
  const db = await EmbeddedPostgres.start();
  t.teardown(() => db.close());
  const spec = { sql: 'SELECT 1 AS one', maxRows: 10, maxBytes: 10_000, direct: false };
  // e.g. an out-of-range setting (idle_in_transaction_session_timeout = 2 x queryTimeoutMs past 2^31-1 ms)
  await t.rejects(db.read({ ...spec, preamble: ['SET LOCAL idle_in_transaction_session_timeout = 4294967296'] }));
  const next = await db.read({ ...spec, preamble: [] }).then(
    (r) => ({ ok: true, rows: r.rows }),
    (e: EmbeddedError) => ({ ok: false, err: `${e.sqlState} ${e.message}` }),
  );
  t.equal(next.ok, true, `the next read runs: ${JSON.stringify(next)}`);
  const q = await db.query('SELECT 1 AS one').then(
    () => 'ok',
    (e: EmbeddedError) => `${e.sqlState} ${e.message}`,
  );
  t.equal(q, 'ok', 'and so does the next statement');
});

t.test('the engine thread dying mid-batch settles every queued statement', async (t) => {
  const db = await EmbeddedPostgres.start();
  const gate = db.exclusive(() => new Promise((r) => setTimeout(r, 20)));
  const qs = Array.from({ length: 200 }, (_, i) => db.query(i === 0 ? 'SELECT pg_sleep(0.3)' : 'SELECT $1::int AS i', i === 0 ? [] : [i]));
  await gate;
  setTimeout(() => void db.terminate(), 100);
  const settled = await Promise.race([Promise.allSettled(qs).then(() => true), new Promise((r) => setTimeout(() => r(false), 5000))]);
  t.equal(settled, true, 'every statement answered (resolved or rejected)');
  const after = await Promise.race([db.query('SELECT 1').then(() => 'ok', (e: EmbeddedError) => e.code), new Promise((r) => setTimeout(() => r('hung'), 2000))]);
  t.equal(after, 'EMBEDDED_ERR_TERMINATED');
});

t.test('statements asked for before a transaction or close() run before it (as one exclusive each did)', async (t) => {
  const db = await EmbeddedPostgres.start();
  await db.exec('CREATE TABLE o (id int primary key)');
  const inserts = Array.from({ length: 100 }, (_, i) => db.query('INSERT INTO o VALUES ($1)', [i]));
  // asked for after the 100 inserts: sees all of them
  const seen = db.exclusive(async (s) => (await s.query('SELECT count(*)::int AS n FROM o'))[0]?.['n']);
  t.equal(await seen, 100, 'a transaction asked for after 100 statements sees them all');
  const r = await Promise.allSettled(inserts);
  t.equal(r.filter((x) => x.status === 'rejected').length, 0);
  const late = Array.from({ length: 100 }, (_, i) => db.query('INSERT INTO o VALUES ($1)', [1000 + i]));
  const closing = db.close();
  const r2 = await Promise.allSettled(late);
  await closing;
  const failed = r2.filter((x) => x.status === 'rejected');
  t.equal(failed.length, 0, `statements asked for before close() all ran (${failed.length} failed: ${failed[0] ? String((failed[0] as PromiseRejectedResult).reason?.message) : ''})`);
});
