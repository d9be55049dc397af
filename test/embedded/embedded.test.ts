import t from 'tap';
import { EmbeddedPostgres, EmbeddedError } from '../../control-plane/embedded/index.js';
import { blankEngine } from '../helpers/engine.js';

t.test('embedded engine runs SQL off the event loop and caps rows while reading', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  await db.exec(`CREATE TABLE t (id int primary key, name text, at timestamptz, n numeric, big bigint);
    INSERT INTO t SELECT g, 'n' || g, '2024-01-01T00:00:00Z'::timestamptz + g * interval '1 hour', g / 4.0, g * 10000000000 FROM generate_series(1, 2000) g;`);
  const rows = await db.query('SELECT count(*)::int AS c FROM t WHERE id > $1', [1000]);
  t.same(rows, [{ c: 1000 }]);

  const all = await db.read({ preamble: [], sql: 'SELECT id, name, at, n, big, id AS id FROM t ORDER BY id', maxRows: 1500, maxBytes: 10_000_000, direct: false });
  t.equal(all.rows.length, 1500);
  t.equal(all.truncated, true);
  t.same(all.columns.map((c) => c.name), ['id', 'name', 'at', 'n', 'big', 'id_2']);
  t.same(all.rows[0], { id: 1, name: 'n1', at: '2024-01-01T01:00:00.000Z', n: 0.25, big: 10000000000, id_2: 1 });
  t.equal(all.bytes, Buffer.byteLength(JSON.stringify(all.rows)));

  const capped = await db.read({ preamble: [], sql: 'SELECT id FROM t ORDER BY id', maxRows: 10_000, maxBytes: 100, direct: false });
  t.equal(capped.truncated, true);
  t.ok(capped.bytes <= 100);
  t.equal(capped.bytes, Buffer.byteLength(JSON.stringify(capped.rows)));

  const empty = await db.read({ preamble: [], sql: 'SELECT id FROM t WHERE false', maxRows: 10, maxBytes: 100, direct: false });
  t.same(empty.rows, []);
  t.equal(empty.bytes, 2);
  t.equal(empty.truncated, false);

  await t.rejects(db.query('SELECT nope FROM t'), { code: 'EMBEDDED_ERR_SQL', sqlState: '42703' });
});

t.test('a runaway statement is stopped by terminating its thread, and the event loop stays free meanwhile', async (t) => {
  const db = await blankEngine();
  const running = db.query('SELECT count(*) FROM generate_series(1, 1000000000)');
  // the event loop keeps ticking while the worker computes
  const ticks = await new Promise<number>((resolve) => {
    let n = 0;
    const iv = setInterval(() => {
      if (++n === 5) {
        clearInterval(iv);
        resolve(n);
      }
    }, 10);
  });
  t.equal(ticks, 5);
  await db.terminate();
  const err = await running.then(() => undefined, (e: unknown) => e);
  t.ok(err instanceof EmbeddedError);
  t.equal((err as EmbeddedError).code, 'EMBEDDED_ERR_TERMINATED');
  t.equal(db.alive, false);
});

t.test('dump and load a data directory', async (t) => {
  const a = await EmbeddedPostgres.start();
  await a.exec(`CREATE TABLE k (v text); INSERT INTO k VALUES ('kept');`);
  const tarball = await a.dump();
  await a.close();
  const b = await EmbeddedPostgres.start({ loadDataDir: tarball });
  t.teardown(() => b.close());
  t.same(await b.query('SELECT v FROM k'), [{ v: 'kept' }]);
});

t.test('statements asked for together go in one batch, each on its own: a failure is its own, a transaction is never entered', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  await db.exec('CREATE TABLE b (id int primary key)');
  // 40 at once, every third failing (division by zero, a duplicate key): the others commit
  const results = await Promise.allSettled(
    Array.from({ length: 40 }, (_, i) => (i % 3 === 2 ? db.query(i % 2 ? 'SELECT 1 / $1::int' : 'INSERT INTO b VALUES (0), (0)', i % 2 ? [0] : []) : db.query('INSERT INTO b VALUES ($1) RETURNING id', [i]))),
  );
  results.forEach((r, i) => {
    if (i % 3 === 2) t.equal(r.status === 'rejected' && (r.reason as EmbeddedError).sqlState, i % 2 ? '22012' : '23505', `statement ${i} failed alone`);
    else t.same(r.status === 'fulfilled' && r.value, [{ id: i }], `statement ${i} answered its own rows`);
  });
  t.same(await db.query('SELECT count(*)::int AS n FROM b'), [{ n: 27 }], 'each succeeding statement committed');
  // a transaction holding the engine is not entered by queued statements: they wait for its end
  let inside = 0;
  const tx = db.exclusive(async (s) => {
    await s.exec('BEGIN');
    await s.query('INSERT INTO b VALUES (1000)');
    await new Promise((r) => setTimeout(r, 50));
    inside = (await s.query('SELECT count(*)::int AS n FROM b'))[0]?.['n'] as number;
    await s.exec('ROLLBACK');
  });
  const outside = db.query('INSERT INTO b VALUES (2000) RETURNING id');
  await tx;
  t.same(await outside, [{ id: 2000 }]);
  t.equal(inside, 28, 'the queued insert did not run inside the transaction');
  t.same(await db.query('SELECT count(*)::int AS n FROM b'), [{ n: 28 }], 'rolled back alone');
});
