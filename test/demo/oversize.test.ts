/**
 * Issue #12 point 1 on the demo targets: a 600 MB value on the external-PostgreSQL demo engine
 * (SVC_DEMO_DATABASE_URL) is refused before pg decodes it (400 invalid_sql reason row_too_large,
 * or the rows that fit, truncated), audited, and the next query works. On the embedded (PGlite)
 * engine the statement runs in a worker thread: whatever becomes of the worker, the process stays
 * up, the answer is a coded error or a capped result, and the next query works.
 */
import t from 'tap';
import type { TapTest } from '../helpers/tap.js';
import { api, freshDatabase, openConnection, realPostgresAvailable, signupAgent, startServer, type TestServer } from '../helpers/server.js';

interface QueryBody {
  rows: Record<string, unknown>[];
  truncated: boolean;
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

const MAX_BYTES = 1_000_000;

async function exercise(t: TapTest, srv: TestServer, strict: boolean): Promise<void> {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const q = (sql: string) => api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
  const rssBefore = process.memoryUsage().rss;
  const big = await q("SELECT repeat(repeat('x', 1000000), 600) AS v FROM patients LIMIT 1");
  if (strict) {
    t.equal(big.status, 400, big.text);
    t.equal(big.body.error?.code, 'invalid_sql');
    t.equal(big.body.error?.details?.['reason'], 'row_too_large');
  } else {
    // PGlite builds the value inside its worker until its memory runs out (built as 600 copies of
    // 1 MB: repeat('x', 600000000) copies one byte at a time, 10 to 35 s of a liftoff-compiled
    // engine, which a loaded CI machine stretched past the deadline)
    t.equal(big.status, 400, big.text);
    t.equal(big.body.error?.code, 'invalid_sql');
    t.equal(big.body.error?.details?.['reason'], 'out_of_memory');
  }
  // (PGlite's database lives in a worker thread of this process: its own memory is not ours to bound)
  if (strict) t.ok(process.memoryUsage().rss - rssBefore < 400_000_000, 'the 600 MB value was never held in this process');
  let next = await q('SELECT count(*)::int AS n FROM patients');
  if (!strict) {
    // the worker it cost is being replaced: this organization is held back meanwhile
    t.equal(next.status, 429, `held back while the engine is replaced (${next.status})`);
    t.match(next.headers.get('retry-after'), /^\d+$/);
  }
  for (let i = 0; i < 40 && (next.status === 503 || next.status === 429); i++) {
    await new Promise((r) => setTimeout(r, 500)); // an engine being replaced
    next = await q('SELECT count(*)::int AS n FROM patients');
  }
  t.equal(next.status, 200, next.text);
  const outcomes = (await api<{ events: { type: string; outcome: string }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key })).body.events
    .filter((e) => e.type === 'query')
    .map((e) => e.outcome);
  t.ok(outcomes.length >= 2 && outcomes[0] !== 'ok', `the big one is audited: ${JSON.stringify(outcomes)}`);
}

t.test('external-PostgreSQL demo engine', async (t) => {
  if (!(await realPostgresAvailable())) return t.skip('no PostgreSQL server at TEST_DATABASE_URL', () => undefined);
  const demo = await freshDatabase('svc_demo_oversize');
  const srv = await startServer({ env: { SVC_DEMO_DATABASE_URL: demo.url }, limits: { maxResultBytes: MAX_BYTES, queryTimeoutMs: 60_000 }, demo: 'eager' });
  t.teardown(async () => {
    await srv.close();
    await demo.drop();
  });
  t.equal((await srv.svc.demoReady).kind, 'postgres');
  await exercise(t, srv, true);
});

t.test('embedded (PGlite) demo engine', async (t) => {
  const srv = await startServer({ limits: { maxResultBytes: MAX_BYTES, queryTimeoutMs: 30_000 } });
  t.teardown(() => srv.close());
  await exercise(t, srv, false);
});
