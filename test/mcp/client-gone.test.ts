/**
 * An MCP client that leaves before its tool call is answered stops what the call started, as an
 * agent closing its own HTTP connection does (test/api/client-gone): the hosted MCP server's tool
 * calls are in-process requests, which have no socket of their own to close, so the server tells
 * them (control-plane/http/in-process.ts).
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

t.test('the MCP client leaving mid-query stops the statement at its source and audits it as client_closed_request', async (t) => {
  const a = await signupAgent(srv.url, 'Impatient MCP Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const running = srv.svc.services.running;
  const engine = await srv.svc.demoReady;

  const sent = sendThenLeave(srv.url, 'POST', '/mcp', a.key, call(1, 'query', { connection_id: conn, sql: 'SELECT count(*) AS n FROM encounters a, encounters b, encounters c' }), MCP_HEADERS);
  await until('the statement runs', () => running.count(conn) === 1 && engine.stats().running === 1);
  await new Promise((r) => setTimeout(r, 300));
  const leftAt = Date.now();
  sent.leave();
  t.equal(await sent.done, undefined, 'the client gave up before any answer');
  // waits at most 10 s: a statement left to run would end at its 20 s deadline
  await until('the statement is stopped (its deadline is 20 s)', () => running.count(conn) === 0 && engine.stats().running === 0, 10_000);
  t.comment(`stopped ${Date.now() - leftAt} ms after the client left`);
  let events: QueryEvent[] = [];
  await until('the audit event', async () => (events = await queryEvents(srv.url, conn, a.key)).length > 0);
  t.match(events[0], { outcome: 'error', error_code: 'client_closed_request' }, 'audited as the client leaving');
  await until('the call is forgotten', () => inProcessCalls() === 0);

  const after = await api<{ result?: { isError?: boolean } }>(srv.url, 'POST', '/mcp', { key: a.key, body: call(2, 'query', { connection_id: conn, sql: 'SELECT count(*) AS n FROM encounters' }), headers: MCP_HEADERS });
  t.equal(after.status, 200);
  t.notOk(after.body.result?.isError, 'the next tool call runs at once');
  t.equal(inProcessCalls(), 0, 'an answered call leaves nothing registered');
});

t.test('an answered tool call is not stopped by the client closing afterwards', async (t) => {
  const a = await signupAgent(srv.url, 'Patient MCP Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const sent = sendThenLeave(srv.url, 'POST', '/mcp', a.key, call(1, 'query', { connection_id: conn, sql: 'SELECT count(*) AS n FROM encounters' }), MCP_HEADERS);
  t.equal(await sent.done, 200, 'answered, then the connection closed');
  sent.leave();
  const events = await queryEvents(srv.url, conn, a.key);
  t.equal(events.length, 1);
  t.match(events[0], { outcome: 'ok' }, 'answered and settled as ok');
});

t.test('a made-up in-process token from outside names nothing: the query runs as usual', async (t) => {
  const a = await signupAgent(srv.url, 'Forging Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const r = await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) AS n FROM encounters' }, headers: { 'x-svc-in-process-call': 'f'.repeat(32) } });
  t.equal(r.status, 200);
});
