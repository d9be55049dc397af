/**
 * The embedded engine's batch fast path (embedded/worker.ts: statements asked for together go
 * to PGlite as one extended-protocol message) against PGlite's own `query()` (what each statement
 * alone runs through): parameter kinds, result types and failures after a statement ran.
 */
import t from 'tap';
import { EmbeddedPostgres, type EmbeddedError } from '../../control-plane/embedded/index.js';
import { besideModule } from '../helpers/root.js';
import { blankEngine } from '../helpers/engine.js';

type Outcome = { ok: true; rows: unknown } | { ok: false; code: string | undefined; message: string };
const outcome = (p: Promise<unknown>): Promise<Outcome> =>
  p.then(
    (rows) => ({ ok: true as const, rows }),
    (e: EmbeddedError) => ({ ok: false as const, code: e.sqlState, message: e.message }),
  );

/** each statement through query(), then all of them queued into one batch */
async function aloneAndTogether(db: EmbeddedPostgres, cases: readonly (readonly [string, readonly unknown[]])[]): Promise<{ alone: Outcome[]; together: Outcome[] }> {
  const alone: Outcome[] = [];
  for (const [sql, params] of cases) alone.push(await outcome(db.exclusive((s) => s.query(sql, params))));
  const gate = db.exclusive(() => new Promise((r) => setTimeout(r, 50)));
  const queued = cases.map(([sql, params]) => outcome(db.query(sql, params)));
  await gate;
  return { alone, together: await Promise.all(queued) };
}

t.test('parameters read as by query() (and as node-postgres sends them)', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  const cases = [
    // a boolean for a text, unknown or json parameter is its word, as query() and node-postgres send it
    ['SELECT $1::text AS v', [true]],
    ['SELECT $1 AS v', [false]],
    ['SELECT $1::jsonb AS v', [true]],
    ['SELECT $1::varchar AS v, $2::bool AS w', [false, true]],
    ['SELECT $1::bool AS v', [1]],
    ['SELECT $1::int8 AS v', [2 ** 53 + 2]],
    ['SELECT $1::int8 AS v', [9223372036854775807n]],
    ['SELECT $1::numeric AS v', [-9223372036854775808n]],
    ['SELECT $1::float8 AS v, $2::float8 AS w, $3::float8 AS x, $4::float8 AS y', [-0, NaN, Infinity, -Infinity]],
    ['SELECT $1::numeric AS v', [0.1]],
    ['SELECT $1::jsonb AS v', [1.5]],
    ['SELECT $1::jsonb AS v', ['{"a":[1,"é"]}']],
    ['SELECT $1::text AS v, $2::text AS w, $3::text IS NULL AS x', ['', null, undefined]],
    ['SELECT $1::text AS v', ['\ud800 lone']],
    ['SELECT $1::text AS v', ['a\u0000b']],
    ['SELECT length($1::text) AS v', ['z'.repeat(2_000_000)]],
    ['SELECT $1::int AS v', ['x']],
  ] as const;
  const { alone, together } = await aloneAndTogether(db, cases);
  cases.forEach(([sql, params], k) => t.same(together[k], alone[k], `${sql} ${JSON.stringify(params, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'string' && v.length > 40 ? `${v.length} chars` : v))}`));
});

t.test('result types, statements without rows, DDL and a transaction inside a batch', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  await db.exec(`CREATE TYPE mood AS ENUM ('ok', 'sad'); CREATE DOMAIN pos AS int CHECK (VALUE > 0); CREATE TABLE r (id int)`);
  const cases = [
    [
      `SELECT ARRAY[1,2]::int[] AS a, ARRAY['x',NULL,'y,z']::text[] AS b, '{"a":[1]}'::json AS j, '[1,{"b":null}]'::jsonb AS jb, 1.10::numeric AS n,
              '2024-01-01 00:00:00+00'::timestamptz AS ts, '2024-01-01'::date AS d, '\\x00ff'::bytea AS by, ROW(1,'a') AS rec, '1 day'::interval AS i,
              9007199254740993::int8 AS big, 'ok'::mood AS m, 5::pos AS p, ARRAY['{"q":1}'::json] AS ja, NULL::int AS nul, 'NaN'::float8 AS nan, true AS t`,
      [],
    ],
    ['', []],
    ['DO $$BEGIN RAISE NOTICE $n$a notice$n$; RAISE WARNING $w$a warning$w$; END$$', []],
    ['CREATE TABLE made (x int)', []],
    ['INSERT INTO made VALUES (1), (2)', []],
    ['SELECT count(*)::int AS n FROM made', []],
    ['BEGIN', []],
    ['INSERT INTO r VALUES (1)', []],
    ['SELECT 1/0', []],
    ['COMMIT', []],
    ['SELECT count(*)::int AS n FROM r', []],
    ['SELECT 6::pos - 7 AS below, (-1)::pos AS bad', []],
    ['DROP TABLE made', []],
  ] as const;
  const { alone, together } = await aloneAndTogether(db, cases.slice(0, 3));
  for (let k = 0; k < 3; k++) t.same(together[k], alone[k], `${cases[k]?.[0].slice(0, 60)}`);
  // the rest change the database: once alone, rolled back by hand, then together
  const once: Outcome[] = [];
  for (const [sql, params] of cases.slice(3)) once.push(await outcome(db.exclusive((s) => s.query(sql, params))));
  const gate = db.exclusive(() => new Promise((r) => setTimeout(r, 50)));
  const queued = cases.slice(3).map(([sql, params]) => outcome(db.query(sql, params)));
  await gate;
  t.same(await Promise.all(queued), once, 'DDL, a transaction opened, aborted and ended, a domain check: the same answers');
});

t.test('a statement whose answer cannot be read fails alone: none of its batch runs twice', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  await db.exec('CREATE TABLE once (id serial primary key, at text)');
  // numeric values cannot be read in this engine from here on (as a parser that fails would)
  await db.runModule(besideModule('fixtures/failing-parser', import.meta.url), 'failNumeric');
  const gate = db.exclusive(() => new Promise((r) => setTimeout(r, 50)));
  const queued = [
    outcome(db.query('INSERT INTO once (at) VALUES ($1) RETURNING id', ['first'])),
    outcome(db.query('INSERT INTO once (at) VALUES ($1) RETURNING 1.5::numeric AS n', ['second'])),
    outcome(db.query('INSERT INTO once (at) VALUES ($1) RETURNING id', ['third'])),
  ];
  await gate;
  const [first, second, third] = await Promise.all(queued);
  t.match(first, { ok: true, rows: [{ id: 1 }] });
  t.match(second, { ok: false, message: /numeric unreadable/ }, 'the unreadable answer fails');
  t.match(third, { ok: true, rows: [{ id: 3 }] });
  t.same(await db.query('SELECT at FROM once ORDER BY id'), [{ at: 'first' }, { at: 'second' }, { at: 'third' }], 'each statement ran once');
});
