/**
 * PostgreSQL's "program limit exceeded" (SQLSTATE 54000) covers values too large to build, which
 * cost an embedded engine (PGlite) its worker (reason `out_of_memory`, see
 * docs/scopes-and-queries.md#oversized-values-and-rows), but also checks that allocate nothing:
 * `chr(0)`, an array of 7 dimensions. Those are the database rejecting the
 * statement: `400 invalid_sql` with the SQLSTATE, the engine kept, the sender not held back (a
 * 30-byte statement must not end a worker and lock its organization out while it is replaced).
 */
import t from 'tap';
import { EnginePool, QueryDatabase, querySchema } from '../../control-plane/live/rest/engine.js';
import { ApiError } from '../../control-plane/errors.js';
import { api, openConnection, signupAgent, startServer } from '../helpers/server.js';

const CHEAP_LIMITS = [
  'SELECT chr(0) AS c',
  'SELECT ARRAY[[[[[[[1]]]]]]] AS a',
];

interface QueryBody {
  rows: Record<string, unknown>[];
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

t.test('demo (embedded engine): a limit check is an invalid statement, not a worker lost', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const q = (sql: string) => api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
  t.equal((await q('SELECT count(*)::int AS n FROM patients')).status, 200, 'warm');
  for (const sql of CHEAP_LIMITS) {
    const r = await q(sql);
    t.equal(r.status, 400, `${sql}: ${r.text}`);
    t.equal(r.body.error?.code, 'invalid_sql');
    t.equal(r.body.error?.details?.['sqlstate'], '54000');
    t.not(r.body.error?.details?.['reason'], 'out_of_memory', `${sql}: not reported as a value too large to build`);
    t.notMatch(r.body.error?.message ?? '', /more memory/);
    const next = await q('SELECT count(*)::int AS n FROM patients');
    t.equal(next.status, 200, `${sql}: the next statement runs at once, not held back (${next.text})`);
  }
});

t.test('API and file targets (engine pool): a limit check keeps the engine', async (t) => {
  const pool = new EnginePool(1);
  t.teardown(() => pool.close());
  const signal = new AbortController().signal;
  for (const sql of CHEAP_LIMITS) {
    const db = await QueryDatabase.open(pool, signal, querySchema());
    let caught: unknown;
    try {
      await db.read(sql, true, 100, 1_000_000, signal);
    } catch (err) {
      caught = err;
    } finally {
      await db.close();
    }
    t.ok(caught instanceof ApiError, `${sql}: a coded error (${String(caught)})`);
    const e = caught as ApiError;
    t.equal(e.code, 'invalid_sql');
    t.equal(e.details?.['sqlstate'], '54000');
    t.not(e.details?.['reason'], 'out_of_memory', `${sql}: not reported as a value too large to build`);
    t.equal(pool.idleCount, 1, `${sql}: the engine goes back to the pool`);
  }
});
