/**
 * Statements the store sends for every query are kept prepared by the engine's thread
 * (`query(sql, params, true)`; embedded/worker.ts): parsed and planned once, then only bound and
 * run. They answer exactly as unprepared ones; one that fails is prepared again next time, so a
 * failure (a statement that errors, a function not there yet) never sticks; past the thread's cap
 * statements run unprepared.
 */
import t from 'tap';
import type { EmbeddedPostgres } from '../../control-plane/embedded/index.js';
import { blankEngine } from '../helpers/engine.js';

async function preparedHere(db: EmbeddedPostgres): Promise<{ name: string; statement: string }[]> {
  return (await db.query("SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'svc_prepared_%' ORDER BY name")) as { name: string; statement: string }[];
}

t.test('a prepared statement answers as an unprepared one, and stays prepared', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  await db.exec("CREATE TABLE k (id int PRIMARY KEY, v text); INSERT INTO k SELECT g, 'v' || g FROM generate_series(1, 50) g");
  const text = 'SELECT id, v, $2::text AS p FROM k WHERE id = $1';
  for (let i = 1; i <= 20; i++) {
    // several in one batch (asked for together) and one at a time
    const [a, b] = await Promise.all([db.query(text, [i, 'x'], true), db.query(text, [i + 1, 'y'], true)]);
    const plain = await db.query(text, [i, 'x']);
    t.same(a, plain, `row ${i}: the same answer prepared or not`);
    t.same(b, [{ id: i + 1, v: `v${i + 1}`, p: 'y' }]);
  }
  const kept = await preparedHere(db);
  t.equal(kept.length, 1, 'one statement kept prepared, by its text');
  t.equal(kept[0]?.statement, text);
});

t.test('a prepared statement that fails is prepared again and runs next time', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  const divide = 'SELECT 10 / $1::int AS q';
  await t.rejects(db.query(divide, [0], true), /division by zero/);
  t.same(await db.query(divide, [5], true), [{ q: 2 }], 'runs after its failure');
  await t.rejects(db.query(divide, [0], true), /division by zero/, 'fails again, alone');
  t.same(await db.query(divide, [2], true), [{ q: 5 }]);

  // its first parse fails (the function is not there yet), then it is
  const call = 'SELECT o FROM later_fn($1) AS o';
  await t.rejects(db.query(call, [1], true), /later_fn/);
  await db.exec('CREATE FUNCTION later_fn(x int) RETURNS int LANGUAGE sql AS $$ SELECT x + 1 $$');
  t.same(await db.query(call, [1], true), [{ o: 2 }], 'prepared once it can be');
  t.same(await db.query(call, [41], true), [{ o: 42 }]);
  t.ok((await preparedHere(db)).some((p) => p.statement === call), 'and kept prepared');
  // a prepared statement beside failing ones of its batch answers alone
  const r = await Promise.allSettled([db.query(divide, [0], true), db.query(call, [2], true), db.query(divide, [1], true)]);
  t.same(
    r.map((x) => x.status),
    ['rejected', 'fulfilled', 'fulfilled'],
  );
});

t.test('past the cap, statements run unprepared', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  const answers: unknown[] = [];
  for (let i = 0; i < 40; i++) answers.push(...(await db.query(`SELECT ${i} + $1::int AS n`, [1], true)));
  t.same(
    answers,
    Array.from({ length: 40 }, (_, i) => ({ n: i + 1 })),
  );
  t.equal((await preparedHere(db)).length, 32, 'at most 32 kept prepared');
});

t.test('a prepared statement gone (DEALLOCATE) or whose plan no longer fits runs at once, unprepared, then is prepared again', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  await db.exec('CREATE TABLE k (id int PRIMARY KEY); INSERT INTO k VALUES (1), (2)');
  const count = 'SELECT count(*)::int AS n FROM k WHERE id >= $1';
  t.same(await db.query(count, [1], true), [{ n: 2 }]);
  t.same(await db.query(count, [2], true), [{ n: 1 }], 'prepared by now');
  await db.exec('DEALLOCATE ALL');
  t.same(await db.query(count, [1], true), [{ n: 2 }], 'answered although its prepared statement was gone');
  t.same(await db.query(count, [2], true), [{ n: 1 }]);
  t.ok((await preparedHere(db)).some((p) => p.statement === count), 'prepared again');

  await db.exec('CREATE FUNCTION shape() RETURNS int LANGUAGE sql AS $$ SELECT 7 $$');
  const call = 'SELECT * FROM shape() AS s WHERE $1::int > 0';
  t.same(await db.query(call, [1], true), [{ s: 7 }]);
  t.same(await db.query(call, [1], true), [{ s: 7 }]);
  await db.exec("DROP FUNCTION shape(); CREATE FUNCTION shape() RETURNS TABLE (s text, t text) LANGUAGE sql AS $$ SELECT 'a', 'b' $$");
  t.same(await db.query(call, [1], true), [{ s: 'a', t: 'b' }], 'answered with its new columns, not "cached plan must not change result type"');
  t.same(await db.query(call, [1], true), [{ s: 'a', t: 'b' }]);
  // and a statement that failed for its own reasons is not run again
  await db.exec('CREATE TABLE once (n int)');
  const insert = 'INSERT INTO once SELECT 1 / $1::int';
  await t.rejects(db.query(insert, [0], true), /division by zero/);
  t.same(await db.query('SELECT count(*)::int AS n FROM once'), [{ n: 0 }]);
});
