/**
 * The hosted MCP server with a JSON-RPC batch (several tool calls in one POST): every call of the
 * batch follows the one client's leaving (control-plane/http/in-process.ts), so its signal has one
 * listener per call still running, up to the transport's batch limit.
 */
import t from 'tap';
import { inProcessCalls } from '../../control-plane/http/in-process.js';
import { until } from '../helpers/tap.js';
import { sendThenLeave } from '../helpers/leave.js';
import { MCP_HEADERS, queryEvents, toolCall as call, type QueryEvent } from '../helpers/mcp.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ demo: 'eager', limits: { queryTimeoutMs: 20_000 } });
});
t.teardown(() => srv.close());

t.test('a batch of many query calls: all answered, no listener-leak warning, nothing left registered', async (t) => {
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  t.teardown(() => void process.off('warning', onWarning));
  const a = await signupAgent(srv.url, 'Batching MCP Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const batch = Array.from({ length: 16 }, (_, i) => call(i + 1, 'query', { connection_id: conn, sql: `SELECT ${i} AS n` }));
  const r = await api<{ id: number; result?: { isError?: boolean } }[]>(srv.url, 'POST', '/mcp', { key: a.key, body: batch, headers: MCP_HEADERS });
  t.equal(r.status, 200, 'the batch is answered');
  t.equal(r.body.length, 16, 'one answer per call');
  t.same(
    r.body.filter((x) => x.result?.isError !== true).map((x) => x.id).sort((x, y) => x - y),
    batch.map((_, i) => i + 1),
    'every call answered',
  );
  // warnings are emitted on the next tick
  await new Promise((r) => setImmediate(r));
  t.same(
    warnings.filter((w) => /MaxListeners|memory leak/.test(w)),
    [],
    'no MaxListenersExceededWarning for the calls of one batch',
  );
  t.equal(inProcessCalls(), 0, 'every call forgotten once answered');
});

t.test('a batch whose client leaves after one call is answered: that call stays ok, only the running one is stopped', async (t) => {
  const a = await signupAgent(srv.url, 'Half-patient MCP Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const running = srv.svc.services.running;
  const sent = sendThenLeave(
    srv.url,
    'POST',
    '/mcp',
    a.key,
    [call(1, 'query', { connection_id: conn, sql: 'SELECT count(*) AS quick FROM encounters' }), call(2, 'query', { connection_id: conn, sql: 'SELECT count(*) AS slow FROM encounters a, encounters b, encounters c' })],
    MCP_HEADERS,
  );
  let events: QueryEvent[] = [];
  await until('the quick call is answered and audited', async () => (events = await queryEvents(srv.url, conn, a.key)).length === 1);
  await until('the slow statement runs', () => running.count(conn) === 1);
  sent.leave();
  t.equal(await sent.done, undefined, 'the client gave up before the batch was answered');
  await until('the slow statement is stopped (its deadline is 20 s)', () => running.count(conn) === 0);
  await until('both audited', async () => (events = await queryEvents(srv.url, conn, a.key)).length === 2);
  t.match(events.find((e) => /quick/.test(e.sql_executed ?? '')), { outcome: 'ok' }, 'the answered call is not marked as the client leaving');
  t.match(events.find((e) => /slow/.test(e.sql_executed ?? '')), { outcome: 'error', error_code: 'client_closed_request' });
  await until('the calls are forgotten', () => inProcessCalls() === 0);
});

t.test('an empty batch is a JSON-RPC Invalid Request, answered with one error', async (t) => {
  // the transport took [] for a batch of notifications only: 202 and no answer (an auditor's check)
  const a = await signupAgent(srv.url, 'Empty Batch Org');
  const r = await api<{ jsonrpc: string; error?: { code: number; message: string }; id: null }>(srv.url, 'POST', '/mcp', { key: a.key, body: [], headers: MCP_HEADERS });
  t.equal(r.status, 400, r.text);
  t.equal(r.body.jsonrpc, '2.0');
  t.equal(r.body.error?.code, -32600);
  t.match(r.body.error?.message, /^Invalid Request: an empty batch/);
  t.equal(r.body.id, null);
});
