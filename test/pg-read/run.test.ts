/**
 * pg-read's runReadOnly on the local PostgreSQL (TEST_DATABASE_URL; skipped when none answers):
 * one write per read, the caps, the cursor, read-only enforcement, the deadline and the abort
 * (cancelled at the database), statement_timeout, the wire guard's refusals, the caller's own
 * transaction, and whether the connection may be used again.
 */
import net from 'node:net';
import t from 'tap';
import pg from 'pg';
import { classifyPgError, GuardedPgClient, runReadOnly, type ReadOnlyRequest, type ReadOutcome } from '../../pg-read/index.js';
import { realPostgresAvailable, TEST_DATABASE_URL } from '../helpers/server.js';
import { holdingProxy } from '../helpers/holding-proxy.js';

if (!(await realPostgresAvailable())) {
  t.skip(`no PostgreSQL answers at ${TEST_DATABASE_URL}: pg-read's reads are not exercised here (the relay and live tests exercise them on PGlite too)`, () => undefined);
} else {
  const APP = `svc-pg-read-test-${process.pid}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  t.teardown(() => admin.end());

  const connect = async (): Promise<GuardedPgClient> => {
    const c = new GuardedPgClient({ connectionString: TEST_DATABASE_URL, application_name: APP });
    c.on('error', () => undefined);
    await c.connect();
    t.teardown(() => c.end().catch(() => undefined));
    return c;
  };

  /** a read collecting its rows; the outcome, the rows, the batches and the cancels */
  async function read(c: pg.ClientBase, text: string, o: Partial<ReadOnlyRequest> = {}) {
    const rows: unknown[][] = [];
    const batches: number[] = [];
    let cancels = 0;
    const out: ReadOutcome = await runReadOnly(c, {
      text,
      timeoutMs: 10_000,
      maxRows: 1000,
      maxBytes: 1_000_000,
      rowBudget: (bytes) => 1_000_000 - bytes,
      onRows: (b) => {
        batches.push(b.length);
        rows.push(...b);
      },
      onCancel: () => void cancels++,
      ...o,
    });
    return { out, rows, batches, cancels: () => cancels, reusable: await out.settled };
  }

  const running = async (needle: string): Promise<number> => {
    for (let i = 0; i < 50; i++) {
      const r = await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state = $2 AND position($3 in query) > 0', [APP, 'active', needle]);
      if (r.rows[0]?.n === 0) return 0;
      await new Promise((res) => setTimeout(res, 50));
    }
    return 1;
  };

  t.test('a read is one write; rows, fields, command, parameters', async (t) => {
    const c = await connect();
    // what reaches the socket: corked writes are handed to it at once (_writev), a lone one by _write
    type Sink = { _write: (...a: unknown[]) => unknown; _writev?: (...a: unknown[]) => unknown };
    const stream = (c as unknown as { connection: { stream: Sink } }).connection.stream;
    const own = { _write: stream._write, _writev: stream._writev };
    let writes = 0;
    stream._write = (...a: unknown[]) => {
      writes++;
      return own._write.apply(stream, a);
    };
    stream._writev = (...a: unknown[]) => {
      writes++;
      return own._writev?.apply(stream, a);
    };
    const r = await read(c, 'SELECT g AS n, $1::text AS tag FROM generate_series(1, 3) g', { params: ['x'] });
    Object.assign(stream, own);
    t.equal(writes, 1, 'BEGIN, the timeout, the statement, the lock release, ROLLBACK and Sync in one write');
    t.ok(r.out.ok);
    if (!r.out.ok) return;
    t.same(r.out.result.fields.map((f) => f.name), ['n', 'tag']);
    t.same(r.rows, [[1, 'x'], [2, 'x'], [3, 'x']]);
    t.equal(r.out.result.command, 'SELECT 3');
    t.notOk(r.out.result.truncated);
    t.equal(r.reusable, true);
    const ro = await read(c, 'SHOW transaction_read_only');
    t.same(ro.rows, [['on']], 'the statement ran in a read-only transaction');
    const idle = await c.query<{ s: string }>("SELECT current_setting('statement_timeout') AS s");
    t.equal(idle.rows[0]?.s, '0', 'the statement_timeout was transaction-local');
  });

  t.test('caps: the row past the cap, the byte cap, batches', async (t) => {
    const c = await connect();
    const rows = await read(c, 'SELECT g FROM generate_series(1, 10) g', { maxRows: 3 });
    t.ok(rows.out.ok && rows.out.result.truncated, 'truncated');
    t.same(rows.rows, [[1], [2], [3]]);
    t.equal(rows.reusable, true, 'the row limit ended the statement: the connection is kept');
    t.equal(rows.cancels(), 0);
    const exact = await read(c, 'SELECT g FROM generate_series(1, 3) g', { maxRows: 3 });
    t.ok(exact.out.ok && !exact.out.result.truncated, 'exactly the cap: not truncated');
    const bytes = await read(await connect(), "SELECT repeat('x', 100) FROM generate_series(1, 100000) g", { maxBytes: 1000, rowBudget: (bytes) => 1_000_000 - bytes });
    t.ok(bytes.out.ok && bytes.out.result.truncated);
    t.equal(bytes.rows.length, 10, 'the rows that fit');
    if (bytes.out.ok) t.equal(bytes.out.result.bytes, 1000);
    t.equal(bytes.cancels(), 1, 'the statement still sending was cancelled');
    t.equal(bytes.reusable, false, 'and its connection is not used again');
    const batched = await read(c, 'SELECT g FROM generate_series(1, 23) g', { batchRows: 5 });
    t.same(batched.rows.map((r) => r[0]), Array.from({ length: 23 }, (_, i) => i + 1), 'in order');
    t.ok(batched.batches.every((n) => n <= 5), `batches of at most 5: ${batched.batches.join(',')}`);
    const shaped = await runReadOnly<string>(c, {
      text: 'SELECT g FROM generate_series(1, 5) g',
      timeoutMs: 5000,
      maxRows: 100,
      maxBytes: 7,
      shape: (v) => ({ row: `#${String(v[0])}`, bytes: 2 }),
      rowBudget: () => 1000,
    });
    t.ok(shaped.ok && shaped.result.truncated && shaped.result.rows === 3 && shaped.result.bytes === 6, 'the caller’s measure counts');
    await shaped.settled;
  });

  t.test('a cursor: only a query is declared; FETCH under the cap', async (t) => {
    const c = await connect();
    const q = await read(c, 'SELECT g FROM generate_series(1, 10) g', { cursor: 'svc_test_cursor', maxRows: 4 });
    t.ok(q.out.ok && q.out.result.truncated);
    t.same(q.rows, [[1], [2], [3], [4]]);
    t.equal(q.reusable, true);
    const all = await read(c, 'SELECT g FROM generate_series(1, 4) g', { cursor: 'svc_test_cursor', maxRows: 4 });
    t.ok(all.out.ok && !all.out.result.truncated, 'as many rows as the cap: not truncated');
    const show = await read(c, 'SHOW search_path', { cursor: 'svc_test_cursor' });
    t.notOk(show.out.ok, 'a statement that is not a query cannot be declared');
    if (!show.out.ok && show.out.failure.kind === 'database') {
      t.equal(classifyPgError(show.out.failure.error).kind, 'statement');
      t.equal(show.out.failure.before, false, 'the statement’s own failure');
    } else t.fail(`a database failure: ${JSON.stringify(show.out)}`);
    t.equal(show.reusable, true, 'rolled back and kept');
    const after = await read(c, 'SELECT 1');
    t.same(after.rows, [[1]]);
  });

  t.test('read-only, one statement, and the connection after a failure', async (t) => {
    const c = await connect();
    await admin.query('CREATE TABLE IF NOT EXISTS pg_read_t (id int)');
    t.teardown(() => admin.query('DROP TABLE IF EXISTS pg_read_t'));
    const w = await read(c, 'INSERT INTO pg_read_t VALUES (1)');
    t.ok(!w.out.ok && w.out.failure.kind === 'database' && classifyPgError(w.out.failure.error).kind === 'read_only');
    t.equal(w.reusable, true);
    const m = await read(c, 'SELECT 1; DELETE FROM pg_read_t');
    t.ok(!m.out.ok && m.out.failure.kind === 'database' && classifyPgError(m.out.failure.error).kind === 'multiple_statements');
    const sw = await read(c, "SELECT set_config('transaction_read_only', 'off', true)");
    t.notOk(sw.out.ok, 'no switch to read-write after the snapshot');
    const n = await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_read_t');
    t.equal(n.rows[0]?.n, 0, 'nothing was written');
    const lock = await read(c, 'SELECT pg_advisory_lock(4242421)');
    t.ok(lock.out.ok);
    const held = await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242421");
    t.equal(held.rows[0]?.n, 0, 'a session advisory lock does not outlive the read');
    const empty = await read(c, '-- nothing');
    t.equal(empty.out.ok ? 'ok' : empty.out.failure.kind, 'empty');
    t.equal(empty.cancels(), 0);
    t.same((await read(c, 'SELECT 2')).rows, [[2]], 'the connection answers after all of them');
  });

  t.test('the deadline and the abort cancel at the database; statement_timeout is the server’s', async (t) => {
    const c1 = await connect();
    const t0 = Date.now();
    const late = await read(c1, 'SELECT pg_sleep(5.01)', { deadlineMs: 300 });
    t.equal(late.out.ok ? 'ok' : late.out.failure.kind, 'timeout');
    t.ok(Date.now() - t0 < 3000, `at the deadline (${Date.now() - t0} ms)`);
    t.equal(late.cancels(), 1, 'one CancelRequest');
    t.equal(late.reusable, false, 'a cancelled connection is not used again');
    t.equal(await running('pg_sleep(5.01)'), 0, 'the statement is no longer running');

    const c2 = await connect();
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('stop')), 200);
    const stopped = await read(c2, 'SELECT pg_sleep(5.02)', { signal: ac.signal });
    t.equal(stopped.out.ok ? 'ok' : stopped.out.failure.kind, 'aborted');
    t.equal(stopped.reusable, false);
    t.equal(await running('pg_sleep(5.02)'), 0);

    const c3 = await connect();
    const server = await read(c3, 'SELECT pg_sleep(5.03)', { timeoutMs: 200, deadlineMs: 5000 });
    t.ok(!server.out.ok && server.out.failure.kind === 'database' && classifyPgError(server.out.failure.error).kind === 'query_canceled', 'statement_timeout');
    t.equal(server.cancels(), 0, 'the server stopped it itself');
    t.equal(server.reusable, true);

    const c4 = await connect();
    const ac4 = new AbortController();
    ac4.abort(new Error('before'));
    const early = await read(c4, 'SELECT 1', { signal: ac4.signal });
    t.equal(early.out.ok ? 'ok' : early.out.failure.kind, 'aborted');
    t.equal(early.reusable, true, 'nothing was sent');
  });

  t.test('a cancel that reaches the backend before its statement does is sent again until the statement stops', async (t) => {
    // review: once, a revoked relay statement ran on at the database until its own timeout although
    // the cancel was sent; the server ignores a CancelRequest that comes while the backend waits for
    // the client's next message. Here a proxy holds the read's one write for 800 ms, so the first
    // cancel (on a connection of its own, passed at once) comes before the statement
    const target = new URL(TEST_DATABASE_URL);
    let holding: net.Socket | undefined;
    const proxy = await holdingProxy({ host: target.hostname, port: Number(target.port || 5432) }, (_, client) => client === holding);
    t.teardown(() => proxy.close());
    const through = new URL(TEST_DATABASE_URL);
    through.host = `127.0.0.1:${proxy.port}`;
    const c = new GuardedPgClient({ connectionString: through.toString(), application_name: APP });
    c.on('error', () => undefined);
    await c.connect();
    t.teardown(() => c.end().catch(() => undefined));
    holding = [...proxy.sockets].find((s) => s.remotePort === (c as unknown as { connection: { stream: net.Socket } }).connection.stream.localPort);
    t.ok(holding, 'the proxy holds this connection');
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('stop')), 100);
    const stopped = await read(c, 'SELECT pg_sleep(5.04)', { signal: ac.signal });
    t.equal(stopped.out.ok ? 'ok' : stopped.out.failure.kind, 'aborted');
    // the held write reaches the backend after the first cancel; by a second after that, a repeated cancel has stopped it
    while (proxy.counts.delivered === 0) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 1000));
    t.equal(await running('pg_sleep(5.04)'), 0, 'the statement, begun after the first cancel, was stopped by a later one');
  });

  t.test('the wire guard: a row larger than the budget is never decoded', async (t) => {
    const c1 = await connect();
    const big = await read(c1, "SELECT repeat('x', 100000) AS v", { rowBudget: () => 1000 });
    t.ok(!big.out.ok && big.out.failure.kind === 'row_too_large');
    if (!big.out.ok && big.out.failure.kind === 'row_too_large') t.equal(big.out.failure.trip.declared, 100000);
    t.equal(big.reusable, false, 'the guard closed the connection');
    const c2 = await connect();
    const mixed = await read(c2, "SELECT g, CASE WHEN g < 3 THEN 'small' ELSE repeat('x', 100000) END FROM generate_series(1, 5) g", { rowBudget: () => 1000 });
    t.ok(mixed.out.ok && mixed.out.result.truncated, 'the rows before it, truncated');
    t.same(mixed.rows.map((r) => r[0]), [1, 2]);
    t.equal(mixed.reusable, false);
    await t.rejects(runReadOnly(new pg.Client(), { text: 'SELECT 1', timeoutMs: 1, maxRows: 1, maxBytes: 1, rowBudget: () => 1 }), /not guarded/);
  });

  t.test('in the caller’s transaction, with settings; a failing setting is not the statement’s', async (t) => {
    const c = await connect();
    await c.query('BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const r = await read(c, "SELECT current_setting('search_path'), current_setting('transaction_isolation')", { begin: null, settings: ['SET LOCAL search_path = pg_catalog'] });
    t.same(r.rows, [['pg_catalog', 'repeatable read']]);
    t.equal(r.reusable, true);
    const status = (c as unknown as { _txStatus?: string })._txStatus;
    t.equal(status, 'I', 'the read ended the transaction');
    await c.query('BEGIN READ ONLY');
    const bad = await read(c, 'SELECT 1', { begin: null, settings: ['SET LOCAL no_such_setting_at_all = 1'] });
    t.ok(!bad.out.ok && bad.out.failure.kind === 'database' && bad.out.failure.before, 'the setting failed before the statement ran');
    t.equal(bad.reusable, true, 'rolled back');
    t.equal((c as unknown as { _txStatus?: string })._txStatus, 'I');
    await c.query('BEGIN READ ONLY');
    const ac = new AbortController();
    ac.abort();
    const early = await read(c, 'SELECT 1', { begin: null, signal: ac.signal });
    t.equal(early.out.ok ? 'ok' : early.out.failure.kind, 'aborted');
    t.equal(early.reusable, true);
    t.equal((c as unknown as { _txStatus?: string })._txStatus, 'I', 'the caller’s transaction was rolled back');
  });

  t.test('what cannot be sent is the statement’s error, not a lost connection; caps that are not numbers are refused', async (t) => {
    const c = await connect();
    // the protocol counts parameters in 16 bits: 65536 of them were sent as 0 and the server
    // answered 08P01 (a connection-class SQLSTATE: callers said the database was unavailable)
    const many = await read(c, 'SELECT 1', { params: Array.from({ length: 65_536 }, () => 1) });
    t.ok(!many.out.ok && many.out.failure.kind === 'database' && !many.out.failure.before, 'a database failure of the statement');
    if (!many.out.ok && many.out.failure.kind === 'database') t.equal(classifyPgError(many.out.failure.error).kind, 'statement', classifyPgError(many.out.failure.error).message);
    t.equal(many.reusable, true);
    // a NUL ends the statement's text on the wire: what follows it was read as the Parse's other fields
    const nul = await read(c, "SELECT 'a\u0000b'");
    if (!nul.out.ok && nul.out.failure.kind === 'database') t.equal(classifyPgError(nul.out.failure.error).kind, 'statement', classifyPgError(nul.out.failure.error).message);
    else t.fail(`a database failure: ${JSON.stringify(nul.out)}`);
    t.equal(nul.reusable, true);
    // in the caller's transaction: ended, as after any failure
    await c.query('BEGIN READ ONLY');
    const inTx = await read(c, 'SELECT 1\u0000', { begin: null });
    t.notOk(inTx.out.ok);
    t.equal(inTx.reusable, true);
    t.equal((c as unknown as { _txStatus?: string })._txStatus, 'I', 'the caller’s transaction was rolled back');
    t.same((await read(c, 'SELECT 3')).rows, [[3]], 'the connection answers');
    // a row cap of -1 or NaN was no cap at all (an Execute limit of 0 is "every row")
    for (const maxRows of [-1, Number.NaN, 1.5]) await t.rejects(read(c, 'SELECT 1', { maxRows }), /maxRows/, `maxRows ${maxRows}`);
    for (const maxBytes of [-1, Number.NaN]) await t.rejects(read(c, 'SELECT 1', { maxBytes }), /maxBytes/, `maxBytes ${maxBytes}`);
    t.same((await read(c, 'SELECT 4')).rows, [[4]], 'nothing was sent');
  });

  t.test('a slow consumer: rows wait in bounded batches, in order', async (t) => {
    const c = await connect();
    let most = 0;
    let sum = 0;
    let n = 0;
    const out = await runReadOnly(c, {
      text: "SELECT g, repeat('v', 100) FROM generate_series(1, 20000) g",
      timeoutMs: 30_000,
      maxRows: 1_000_000,
      maxBytes: 1e9,
      batchRows: 500,
      rowBudget: () => 1e9,
      onRows: async (rows) => {
        most = Math.max(most, rows.length);
        for (const r of rows) sum += r[0] as number;
        n += rows.length;
        if (n % 2000 < 500) await new Promise((res) => setTimeout(res, 5));
      },
    });
    t.ok(out.ok);
    t.equal(n, 20000);
    t.equal(sum, (20000 * 20001) / 2);
    t.ok(most <= 500, `batches of at most 500 (${most})`);
    t.equal(await out.settled, true);
  });
}
