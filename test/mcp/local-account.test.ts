/**
 * `svc mcp` started without a key: tools answer unauthorized until create_account makes an
 * account, and from then on the session calls the API with that account's key (never logging it).
 * A second create_account makes a separate account and the session keeps the first key. The
 * compiled CLI as a child process, driven by the SDK's own client over stdio.
 */
import t from 'tap';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { ensureDist } from '../cli/dist.js';
import { localMcpClient } from '../helpers/mcp.js';

type Json = Record<string, unknown>;

let srv: TestServer;
t.before(async () => {
  ensureDist();
  srv = await startServer();
});
t.teardown(() => srv.close());

t.test('svc mcp without a key uses the key create_account returned for its later calls', async (t) => {
  const { client, stderr } = await localMcpClient(srv.url, {}, 'svc-test-local-account');
  t.teardown(() => client.close());
  const call = async (name: string, args: Json = {}): Promise<CallToolResult> => (await client.callTool({ name, arguments: args })) as CallToolResult;
  const text = (r: CallToolResult): string => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
  const structured = (r: CallToolResult): Json => (r.structuredContent ?? {}) as Json;

  const before = await call('get_usage');
  t.equal((structured(before)['error'] as Json)['code'], 'unauthorized', 'no key yet');
  t.match(text(before), /create_account tool/, 'the hint names create_account');
  // a stdio session has no header to send: the hint is where svc mcp reads its key
  const message = String((structured(before)['error'] as Json)['message']);
  t.match(message, /SVC_API_KEY/, `the hint names SVC_API_KEY (${message})`);
  t.notMatch(message, /Authorization/, 'no Authorization header to send over stdio');

  const created = await call('create_account', { org_name: 'Local MCP Co', agent_name: 'local-bot' });
  t.notOk(created.isError, text(created));
  const key = String(structured(created)['apiKey']);
  t.match(key, /^svc_conn_/);
  t.match(String(structured(created)['session_note']), /now makes its other tool calls with this apiKey/, 'the result says the session uses the key');
  t.match(text(created), /now makes its other tool calls with this apiKey/);

  const usage = await call('get_usage');
  t.notOk(usage.isError, `the next call is made with the new key: ${text(usage)}`);
  const opened = await call('open_connection', { target_id: 'demo-healthcare', scopes: ['read:encounters'] });
  t.notOk(opened.isError, text(opened));

  // a second account is a separate one: the session keeps the first key
  const second = await call('create_account', { org_name: 'Second Co', agent_name: 'other-bot' });
  t.notOk(second.isError, text(second));
  t.equal(structured(second)['session_note'], undefined, 'no switch, no note');
  const listed = await call('list_connections');
  t.same((structured(listed)['connections'] as Json[]).map((c) => c['connectionId']), [structured(opened)['connectionId']], 'still the first account');

  t.match(stderr(), /this session now calls the API with its key/);
  t.notOk(stderr().includes(key) || stderr().includes(String(structured(second)['apiKey'])), 'no key on stderr');
});
