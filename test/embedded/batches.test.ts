/**
 * The embedded engine's statement batches (statements asked for together go to its thread in one
 * message) and its read's transaction opened in one round trip: each statement answers or fails
 * alone, first come first served against transactions and close(), nothing hangs.
 */
import t from 'tap';
import type { EmbeddedError } from '../../control-plane/embedded/index.js';
import { blankEngine } from '../helpers/engine.js';

t.test('a statement whose parameters cannot be sent to the thread fails alone, not its batch', async (t) => {
  const db = await blankEngine();
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
  const db = await blankEngine();
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
  const db = await blankEngine();
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
  const db = await blankEngine();
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

t.test('statements sent together in one protocol message answer exactly as each alone, and fail alone', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  await db.exec(`CREATE TABLE v (id int primary key, big bigint, n numeric, f float8, b boolean, at timestamptz, j jsonb, a text[], name text)`);
  const cases: { readonly sql: string; readonly params: readonly unknown[] }[] = [
    { sql: 'INSERT INTO v VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *', params: [1, 9007199254740993n, '12.50', 0.1, true, '2024-01-02T03:04:05.678Z', '{"k":[1,2]}', '{x,y}', 'é\u{1F600}'] },
    { sql: 'SELECT * FROM v WHERE id = $1 AND b = $2 AND name IS NOT NULL', params: [1, true] },
    { sql: 'SELECT $1::int + 1 AS next, $2::text IS NULL AS was_null, $3::bigint AS big', params: [41, null, '-9223372036854775808'] },
    { sql: 'SELECT count(*) AS n FROM v WHERE at < $1', params: [new Date('2030-01-01T00:00:00Z')] }, // a Date: by its type, alone
    { sql: 'SELECT cardinality($1::text[]) AS n', params: [['a', 'b', 'c']] }, // an array: by its type, alone
    { sql: 'SELECT 1/0 AS boom', params: [] },
    { sql: 'SELECT no_such_column FROM v', params: [] },
    { sql: 'SELECT 1; SELECT 2', params: [] },
    { sql: 'UPDATE v SET name = $2 WHERE id = $1 RETURNING name', params: [1, 'after the errors'] },
    { sql: 'SELECT current_setting($1) AS level', params: ['transaction_isolation'] },
  ];
  // each alone, through a transaction of its own (`exclusive`): the engine's own query()
  const alone: unknown[] = [];
  for (const c of cases) {
    // the INSERT and UPDATE run for real once below; here each runs and is rolled back
    alone.push(
      await db.exclusive(async (s) => {
        await s.exec('BEGIN');
        try {
          return { ok: true, rows: await s.query(c.sql, c.params) };
        } catch (e) {
          const err = e as EmbeddedError;
          return { ok: false, code: err.sqlState, message: err.message, position: err.position };
        } finally {
          await s.exec('ROLLBACK');
        }
      }),
    );
  }
  // together: hold the engine so every one queues into one batch
  const gate = db.exclusive(() => new Promise((r) => setTimeout(r, 50)));
  const together = cases.map((c) =>
    db.query(c.sql, c.params).then(
      (rows) => ({ ok: true, rows }),
      (e: EmbeddedError) => ({ ok: false, code: e.sqlState, message: e.message, position: e.position }),
    ),
  );
  await gate;
  const got = await Promise.all(together);
  // the INSERT made row 1 for the statements after it in the batch; alone, each saw none
  t.same(got[0], alone[0], 'an INSERT … RETURNING: the same values (bigint, numeric, float, boolean, timestamptz, jsonb, text[], text)');
  t.match(got[1], { ok: true, rows: [{ id: 1, b: true }] }, 'the next statement sees the first one committed');
  t.same(got[2], alone[2], 'text, null and bigint parameters');
  t.same(got[3], { ok: true, rows: [{ n: 1 }] }, 'a Date parameter');
  t.same(got[4], alone[4], 'an array parameter');
  for (const k of [5, 6, 7]) t.same(got[k], alone[k], `an error answers alone, with its code and position: ${JSON.stringify(got[k]).slice(0, 120)}`);
  t.same(got[8], { ok: true, rows: [{ name: 'after the errors' }] }, 'a statement after errors in the same message runs and commits');
  t.same(got[9], alone[9]);
  t.same(await db.query('SELECT name FROM v WHERE id = 1'), [{ name: 'after the errors' }], 'committed');
  const inTx = await db.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'");
  t.same(inTx, [{ n: 0 }], 'no transaction left open');
});
