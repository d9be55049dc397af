/**
 * Closing the app closes every part it owns, even when one of them fails to close: the failure is
 * the close's answer, and the parts after it (the SQL check worker, the store) are closed all the same.
 * An MCP answer (written by the MCP transport, not through Fastify's reply) sent while closing ends
 * its keep-alive socket like every other answer, so the close does not wait for its idle timeout.
 */
import http from 'node:http';
import t from 'tap';
import { MCP_HEADERS, toolCall } from '../helpers/mcp.js';
import { signupAgent, startServer } from '../helpers/server.js';
import { until } from '../helpers/tap.js';

t.test('a part that fails to close does not leave the later parts open', async (t) => {
  const srv = await startServer();
  srv.svc.restEngines.close = async () => {
    throw new Error('boom: the live API engines would not close');
  };
  await t.rejects(srv.svc.app.close(), /boom/, 'the close answers the failure');
  await t.rejects(srv.svc.services.sqlChecker.check(`SELECT ${'1+'.repeat(3000)}1`, { allowed: new Map(), known: [], schemas: [] }), { code: 'service_unavailable' }, 'the SQL check worker was closed after it');
  await t.rejects(srv.svc.store.query('SELECT 1'), 'and the store too');
});

t.test('an MCP answer written after the server stopped accepting closes its socket: the close does not wait for its keep-alive', async (t) => {
  const srv = await startServer();
  const a = await signupAgent(srv.url, 'Closing MCP Org');
  const app = srv.svc.app;
  // the close starts while the tool call reads the store, after the MCP request arrived (as when a
  // first POST /mcp is still loading the MCP SDK): its answer is written once the server has
  // stopped accepting, when Node no longer ends idle keep-alive sockets itself
  const store = srv.svc.store;
  const query = store.query.bind(store);
  let closed: Promise<void> | undefined;
  store.query = (async (text: string, params?: readonly unknown[]) => {
    if (!closed && text === 'SELECT * FROM orgs WHERE id = $1') {
      closed = srv.close();
      await until('the server stops accepting', () => !app.server.listening);
    }
    return query(text, params);
  }) as typeof store.query;
  const agent = new http.Agent({ keepAlive: true });
  t.teardown(() => agent.destroy());
  const body = JSON.stringify(toolCall(1, 'get_usage', {}));
  const answer = await new Promise<{ status: number; connection: string | undefined; text: string }>((resolve, reject) => {
    const req = http.request(`${srv.url}/mcp`, { method: 'POST', agent, headers: { ...MCP_HEADERS, authorization: `Bearer ${a.key}`, 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
  t.equal(answer.status, 200);
  t.match(answer.text, /wallet_balance_cents/, 'the call was answered');
  t.equal(answer.connection, 'close', 'the answer ends its keep-alive socket, as every answer sent while closing does');
  await closed;
});
