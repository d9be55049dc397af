/**
 * The embedded engine's read path (embedded/worker.ts `read`): the transaction, its settings, the
 * cursor and the first rows go to PGlite as one message, each further fetch as one. What an agent
 * gets must be what PGlite's own `query()` gives for the same statement (values, types, column
 * names), failures must carry the database's SQLSTATE wherever they happen (the settings, the
 * cursor, the first fetch, a later fetch), and nothing of one read may outlive it (settings,
 * cursor, transaction, the rows it fetched in the engine thread's memory).
 */
import t from 'tap';
import type { EmbeddedError, ReadQuerySpec } from '../../control-plane/embedded/index.js';
import { jsonRow } from '../../control-plane/results/index.js';
import { blankEngine } from '../helpers/engine.js';

const spec = (sql: string, o: Partial<ReadQuerySpec> = {}): ReadQuerySpec => ({ preamble: [], sql, maxRows: 1000, maxBytes: 10_000_000, direct: false, ...o });

async function sqlState(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return 'no error';
  } catch (e) {
    return (e as EmbeddedError).sqlState;
  }
}

t.test('values and column types as query() reads them, over one fetch and many', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  await db.exec(`CREATE TABLE t (id int PRIMARY KEY, name text, at timestamptz, d date, n numeric, f float8, b bool, j jsonb, a int[], big int8, raw bytea);
    INSERT INTO t SELECT g, 'n' || g, '2024-01-01T00:00:00Z'::timestamptz + g * interval '1 hour', '2024-01-01'::date + g, g / 4.0, g / 8.0, g % 2 = 0,
      jsonb_build_object('g', g, 'list', jsonb_build_array(g, NULL)), ARRAY[g, g + 1], g::int8 * 10000000000, decode(lpad(to_hex(g), 4, '0'), 'hex')
    FROM generate_series(1, 1200) g`);
  const sql = 'SELECT id, name, at, d, n, f, b, j, a, big, raw, NULL::text AS nothing, id AS id FROM t ORDER BY id';
  const reference = await db.exclusive((s) => s.query(sql.replace('id AS id', 'id AS id_2'), []));
  for (const maxRows of [3, 49, 50, 51, 1200]) {
    const r = await db.read(spec(sql, { maxRows }));
    t.equal(r.rows.length, Math.min(maxRows, 1200), `${maxRows}: rows`);
    t.equal(r.truncated, maxRows < 1200, `${maxRows}: truncated`);
    t.same(r.columns.map((c) => c.name), ['id', 'name', 'at', 'd', 'n', 'f', 'b', 'j', 'a', 'big', 'raw', 'nothing', 'id_2']);
    t.equal(r.bytes, Buffer.byteLength(JSON.stringify(r.rows)), `${maxRows}: bytes counted`);
    // the API's JSON values of the same rows read by query()
    t.same(r.rows, reference.slice(0, maxRows).map((row) => jsonRow(r.columns, Object.values(row))), `${maxRows}: the values query() reads`);
  }
  const first = (await db.read(spec(sql, { maxRows: 1 }))).rows[0];
  t.match(first, { id: 1, name: 'n1', at: '2024-01-01T01:00:00.000Z', b: false, j: { g: 1, list: [1, null] }, a: [1, 2], big: 10000000000, nothing: null, id_2: 1 });
  const types = (await db.read(spec(sql, { maxRows: 1 }))).columns.map((c) => c.type_oid);
  t.same(types, [23, 25, 1184, 1082, 1700, 701, 16, 3802, 1007, 20, 17, 25, 23], 'type oids from the row description');
});

t.test('the preamble applies inside the read and nothing of it outlives the read', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  const inside = await db.read(spec("SELECT current_setting('svc.org', true) AS org, current_setting('transaction_read_only') AS ro, current_setting('transaction_isolation') AS iso", { preamble: ["SELECT set_config('svc.org', 'org_1', true)", "SET LOCAL statement_timeout = '5s'"] }));
  t.same(inside.rows, [{ org: 'org_1', ro: 'on', iso: 'repeatable read' }]);
  const after = await db.read(spec("SELECT coalesce(current_setting('svc.org', true), '') AS org, current_setting('statement_timeout') AS st"));
  t.same(after.rows, [{ org: '', st: '0' }], 'settings were local to the read');
  t.same(await db.query("SELECT count(*)::int AS n FROM pg_cursors WHERE name = 'svc_cursor'"), [{ n: 0 }], 'no cursor left open');
  t.same(await db.query('SELECT 1 AS one'), [{ one: 1 }], 'no transaction left open: the next statement runs');
  t.equal(await sqlState(db.read(spec('SELECT 1', { preamble: ['CREATE TABLE x (id int)'] }))), '25006', 'the transaction is read only');
});

t.test('a failure anywhere carries its SQLSTATE, and the engine goes on', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  // rows in insertion order, computed as they are fetched (a sort would compute them all first)
  await db.exec('CREATE TABLE t (id int); INSERT INTO t SELECT generate_series(1, 1000)');
  const cases: [string, ReadQuerySpec, string][] = [
    ['a preamble that fails', spec('SELECT 1 AS one', { preamble: ["SET LOCAL statement_timeout = 'soon'"] }), '22023'],
    ['a statement that does not parse', spec('SELEC 1'), '42601'],
    ['an unknown column', spec('SELECT nope FROM t'), '42703'],
    ['an error in the first rows', spec('SELECT 1 / (id - 1) AS v FROM t'), '22012'],
    ['an error in a later fetch', spec('SELECT 1 / (id - 700) AS v FROM t', { maxRows: 1000 }), '22012'],
    ['an error through the direct path', spec('EXPLAIN SELECT nope FROM t', { direct: true }), '42703'],
  ];
  for (const [what, s, code] of cases) {
    t.equal(await sqlState(db.read(s)), code, what);
    t.same((await db.read(spec('SELECT count(*)::int AS n FROM t'))).rows, [{ n: 1000 }], `${what}: the next read answers`);
  }
  const before = await db.read(spec('SELECT 1 / (id - 700) AS v FROM t', { maxRows: 600 }));
  t.equal(before.rows.length, 600, 'the rows before a failing row, when a cap stops the read first');
  t.equal(before.truncated, true);
});

t.test('EXPLAIN goes through the direct path, one batch', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  await db.exec('CREATE TABLE t (id int PRIMARY KEY)');
  const r = await db.read(spec('EXPLAIN SELECT * FROM t WHERE id = 1', { direct: true }));
  t.same(r.columns.map((c) => c.name), ['QUERY PLAN']);
  t.ok(r.rows.length >= 1);
  t.match(String(r.rows[0]?.['QUERY PLAN']), /Index|Scan/);
});

// runs in the engine's thread (EmbeddedPostgres.runModule): that thread's heap after a full collection
const HEAP_PROBE = new URL(`data:text/javascript,${encodeURIComponent(`
import v8 from 'node:v8';
import vm from 'node:vm';
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');
export async function heap(db, progress) { gc(); gc(); progress(process.memoryUsage().heapUsed); }
`)}`);

t.test('what a read fetched is not kept in the engine thread after it', async (t) => {
  const db = await blankEngine();
  t.teardown(() => db.close());
  const heap = async (): Promise<number> => {
    let used = 0;
    await db.runModule(HEAP_PROBE, 'heap', (p) => (used = p as number));
    return used;
  };
  // reads and batched statements only (no query()/exec() of PGlite's own between them), as a demo engine gets
  const sql = "SELECT repeat('x', 100000) AS v FROM generate_series(1, 40)";
  await db.read(spec(sql, { maxBytes: 100_000_000 }));
  const before = await heap();
  for (let i = 0; i < 5; i++) {
    t.equal((await db.read(spec(sql, { maxBytes: 100_000_000 }))).rows.length, 40);
    t.equal((await db.read(spec(sql, { maxBytes: 100_000_000, direct: true }))).rows.length, 40);
    t.equal((await db.query(sql)).length, 40);
  }
  // 15 results of 4 MB each went through; kept in the thread (execProtocolRaw kept them), they grew it by about 60 MB
  const grown = (await heap()) - before;
  t.ok(grown < 25_000_000, `the thread's heap grew by ${(grown / 1e6).toFixed(1)} MB`);
});
