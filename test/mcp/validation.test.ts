/**
 * Tool arguments are checked like the HTTP API's bodies: a missing, wrong or unknown argument of a
 * known tool is a tool error (`isError`) with `structuredContent.error.code` "invalid_request"
 * naming the argument, and the call is not made; an unknown tool is a JSON-RPC error, as the MCP
 * specification has it. Each tool's advertised input schema says what is enforced (no other
 * arguments). Driven by the SDK's own client against the real hosted server.
 */
import t from 'tap';
import type { TapTest } from '../helpers/tap.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { TOOLS } from '../../control-plane/mcp/tools.js';
import { hostedMcpClient, MCP_HEADERS, queryEvents, toolCall } from '../helpers/mcp.js';
import { api, openConnection, signupAgent, startServer, type Agent, type TestServer } from '../helpers/server.js';

type Json = Record<string, unknown>;

let srv: TestServer;
let agent: Agent;
let client: Client;
t.before(async () => {
  srv = await startServer();
  agent = await signupAgent(srv.url, 'Validation Co', 'validation-bot');
  client = await hostedMcpClient(srv.url, agent.key, 'svc-test-validation');
});
t.teardown(async () => {
  await client.close();
  await srv.close();
});

const call = async (name: string, args: Json): Promise<CallToolResult> => (await client.callTool({ name, arguments: args })) as CallToolResult;
const text = (r: CallToolResult): string => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
const errorOf = (r: CallToolResult): Json => ((r.structuredContent ?? {}) as Json)['error'] as Json;

/** a refusal of the arguments: a tool error shaped like the API's invalid_request, naming each argument */
function assertRefused(t: TapTest, r: CallToolResult, tool: string, fields: [string, RegExp][]): void {
  t.equal(r.isError, true, `${tool}: a tool error`);
  const err = errorOf(r);
  t.ok(err, `${tool}: structuredContent.error is there (${text(r)})`);
  t.equal(err?.['code'], 'invalid_request', `${tool}: code invalid_request`);
  t.equal(err?.['status'], 400, 'the status the HTTP API answers invalid_request with');
  const details = err?.['details'] as { field: string; problem: string; in: string; issues: { field: string; problem: string }[] };
  t.equal(details.in, 'arguments');
  t.equal(details.field, details.issues[0]?.field, 'the first issue is the field of the details');
  for (const [field, problem] of fields) {
    const issue = details.issues.find((i) => i.field === field);
    t.match(issue?.problem, problem, `${tool}: argument ${field} ${String(issue?.problem)}`);
    t.match(String(err?.['message']), `argument "${field}"`, `${tool}: the message names ${field}`);
  }
  t.match(text(r), new RegExp(`^${tool} failed: invalid_request: argument "`), 'the text starts like every failed call');
}

t.test('a missing, mistyped or out-of-range argument is a structured invalid_request', async (t) => {
  const conn = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:encounters']);
  assertRefused(t, await call('query', { connection_id: conn }), 'query', [['sql', /^is required$/]]);
  assertRefused(t, await call('create_account', { orgName: 'X', agentName: 'y' }), 'create_account', [
    ['org_name', /^is required$/],
    ['agent_name', /^is required$/],
    ['orgName', /^is not a known argument$/],
    ['agentName', /^is not a known argument$/],
  ]);
  assertRefused(t, await call('open_connection', { target_id: 'demo-healthcare', scopes: ['read:encounters'], ttl_seconds: 0 }), 'open_connection', [['ttl_seconds', />=1/]]);
  assertRefused(t, await call('open_connection', { target_id: 'demo-healthcare', scopes: 'read:encounters' }), 'open_connection', [['scopes', /array/]]);
  assertRefused(t, await call('top_up_wallet', { amount_cents: 100, auto_reload: { threshold_cents: 0, amount_cents: 1 } }), 'top_up_wallet', [['auto_reload.threshold_cents', />=1/]]);
  const listed = await api<{ connections: unknown[] }>(srv.url, 'GET', '/v1/connections', { key: agent.key });
  t.equal(listed.body.connections.length, 1, 'no refused open_connection opened one');
});

t.test('an unknown argument is refused, naming it, and the call is not made', async (t) => {
  const conn = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:encounters']);
  assertRefused(t, await call('query', { connection_id: conn, sql: 'SELECT 1', extra: 1 }), 'query', [['extra', /^is not a known argument$/]]);
  assertRefused(t, await call('get_usage', { org_id: 'x' }), 'get_usage', [['org_id', /^is not a known argument$/]]);
  // names every object has (hostile arguments): unknown arguments like any other, nothing runs
  assertRefused(t, await call('query', { connection_id: conn, sql: 'SELECT 1', constructor: 1 }), 'query', [['constructor', /^is not a known argument$/]]);
  assertRefused(t, await call('query', { connection_id: conn, sql: 'SELECT 1', hasOwnProperty: 'x' }), 'query', [['hasOwnProperty', /^is not a known argument$/]]);
  const many = await call('get_usage', Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`x${i}`, i])));
  t.equal((errorOf(many)['details'] as { issues: unknown[] }).issues.length, 20, 'at most 20 issues named');
  t.match(String(errorOf(many)['message']), /; and 5 more problem\(s\);/);
  const audit = await api<{ events: unknown[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: agent.key });
  t.same(audit.body.events, [], 'the query did not run: nothing audited');
  const ok = await call('query', { connection_id: conn, sql: 'SELECT 1 AS one' });
  t.notOk(ok.isError, text(ok));
});

t.test('an unknown tool is a JSON-RPC error (InvalidParams), as the MCP specification has it', async (t) => {
  const err = await call('no_such_tool', {}).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof McpError, `a JSON-RPC error, not a tool result (${String(err)})`);
  t.equal((err as McpError).code, ErrorCode.InvalidParams);
  // the SDK client puts "MCP error <code>: " before the message it received: once, not twice
  t.equal((err as McpError).message, 'MCP error -32602: Unknown tool: no_such_tool; tools/list lists the tools');
  const wire = await api<{ error?: { code: number; message: string } }>(srv.url, 'POST', '/mcp', { key: agent.key, body: toolCall(4, 'nope', {}), headers: MCP_HEADERS });
  t.same(wire.body.error, { code: ErrorCode.InvalidParams, message: 'Unknown tool: nope; tools/list lists the tools' }, 'the wire message is the bare one docs/cli-and-mcp.md quotes');
});

t.test('each advertised input schema is what is enforced: no other arguments', async (t) => {
  const { tools } = await client.listTools(); // the SDK client validates the listing
  t.equal(tools.length, TOOLS.length);
  for (const tool of tools) {
    t.equal(tool.inputSchema.type, 'object', tool.name);
    t.equal((tool.inputSchema as Json)['additionalProperties'], false, `${tool.name}: additionalProperties false`);
  }
  const query = tools.find((x) => x.name === 'query');
  t.same(Object.keys(query?.inputSchema.properties ?? {}).sort(), ['connection_id', 'sql']);
  t.same([...(query?.inputSchema.required ?? [])].sort(), ['connection_id', 'sql']);
});

t.test('a call asking to run as a task (this server declares no tasks capability) is a JSON-RPC error, and nothing runs', async (t) => {
  const conn = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:encounters']);
  const request = toolCall(7, 'query', { connection_id: conn, sql: 'SELECT count(*) FROM encounters' });
  const r = await api<{ id: number; error?: { code: number; message: string }; result?: unknown }>(srv.url, 'POST', '/mcp', {
    key: agent.key,
    body: { ...request, params: { ...(request['params'] as Json), task: { ttl: 60_000 } } },
    headers: MCP_HEADERS,
  });
  t.equal(r.status, 200);
  // the SDK refuses it before our handler, as the server declares no tasks capability
  t.type(r.body.error?.code, 'number', r.text);
  t.match(r.body.error?.message, /does not support task/);
  t.equal(r.body.result, undefined);
  t.same(await queryEvents(srv.url, conn, agent.key), [], 'the statement never ran: no query event, no charge');
});

t.test('tools/call params that are not a call (arguments not an object, no name) are JSON-RPC InvalidParams, not an internal error', async (t) => {
  // found by an outside review: the SDK's parse of the request answered -32603 (internal error), the code of a server fault
  const conn = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:encounters']);
  const cases: [string, Json | undefined, RegExp][] = [
    ['arguments null', { name: 'query', arguments: null }, /arguments/],
    ['arguments an array', { name: 'query', arguments: [conn, 'SELECT 1'] }, /arguments/],
    ['no name', { arguments: { connection_id: conn, sql: 'SELECT 1' } }, /name/],
    ['no params', undefined, /params/],
  ];
  for (const [what, params, names] of cases) {
    const r = await api<{ id: number; error?: { code: number; message: string }; result?: unknown }>(srv.url, 'POST', '/mcp', {
      key: agent.key,
      body: { jsonrpc: '2.0', id: 3, method: 'tools/call', ...(params === undefined ? {} : { params }) },
      headers: MCP_HEADERS,
    });
    t.equal(r.body.error?.code, ErrorCode.InvalidParams, `${what}: -32602 (${r.text})`);
    t.match(r.body.error?.message, names, `${what}: the message names what is wrong`);
    // the server's own one-line style, not the SDK's JSON list of zod issues nor its "MCP error" prefix
    t.match(r.body.error?.message, /^Invalid tools\/call request: [^\n[{]+$/, `${what}: one line in the server's words`);
    t.equal(r.body.result, undefined);
  }
  t.same(await queryEvents(srv.url, conn, agent.key), [], 'nothing ran');
});
