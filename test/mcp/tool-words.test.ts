/**
 * MCP surfaces (issue #16, "Messages and surfaces"), through the official SDK client against the
 * hosted server: a tool error names the tool to call where the HTTP API names a route, and
 * list_targets is compact (detail behind describe_target).
 */
import t from 'tap';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { oneLine } from '../../control-plane/mcp/render.js';
import { inToolWords } from '../../control-plane/mcp/run.js';
import { TOOLS } from '../../control-plane/mcp/tools.js';
import { hostedMcpClient } from '../helpers/mcp.js';
import { api, openConnection, signupAgent, startServer, type Agent, type TestServer } from '../helpers/server.js';

type Json = Record<string, unknown>;

let srv: TestServer;
let agent: Agent;
let client: Client;
t.before(async () => {
  srv = await startServer();
  agent = await signupAgent(srv.url, 'Words Co', 'words-bot');
  client = await hostedMcpClient(srv.url, agent.key);
});
t.teardown(async () => {
  await client?.close();
  await srv?.close();
});

const call = async (name: string, args: Json): Promise<CallToolResult> => (await client.callTool({ name, arguments: args })) as CallToolResult;
const text = (r: CallToolResult): string => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
const errorOf = (r: CallToolResult): { code: string; message: string; details?: Json } => (r.structuredContent as { error: { code: string; message: string; details?: Json } }).error;
const ROUTE = /\b(GET|POST|PATCH|PUT|DELETE) \/v1\//;

t.test('tool errors name the tool to call; the HTTP API keeps its routes', async (t) => {
  const conn = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:patients']);
  await api(srv.url, 'POST', `/v1/connections/${conn}/revoke`, { key: agent.key });

  const http = await api<{ error: { message: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: 'SELECT 1' } });
  t.equal(http.status, 410);
  t.match(http.body.error.message, /open a new one with POST \/v1\/connections$/, 'HTTP: the route');

  const revoked = await call('query', { connection_id: conn, sql: 'SELECT 1' });
  t.ok(revoked.isError);
  t.equal(errorOf(revoked).code, 'connection_revoked');
  t.match(errorOf(revoked).message, /open a new one with the open_connection tool$/);
  t.notMatch(text(revoked), ROUTE, 'no HTTP route in the text');
  t.match(text(revoked), /open_connection tool/);

  const missing = await call('describe_connection', { connection_id: 'conn_nope' });
  t.equal(errorOf(missing).code, 'not_found');
  t.match(errorOf(missing).message, /list yours with the list_connections tool/);
  t.notMatch(text(missing), ROUTE);

  const target = await call('describe_target', { target_id: 'nope' });
  t.match(errorOf(target).message, /list targets with the list_targets tool/);

  const credential = await call('open_connection', { target_id: 'postgres', scopes: ['read:orders'] });
  t.equal(errorOf(credential).code, 'invalid_request');
  t.match(errorOf(credential).message, /register one with the add_credential tool \{"connector_kind": "postgres", "secret": …\} \(the list_credential_kinds tool describes it\)/);
  t.notMatch(text(credential), ROUTE);
});

t.test('every tool operation named in a message becomes its tool; other routes stay as written', async (t) => {
  for (const tool of TOOLS) {
    const [method, template] = tool.operation.split(' ') as [string, string];
    const path = template.replace(/\{[a-z_]+\}/g, 'x_1');
    const words = inToolWords(`do it with ${method} ${path}; then go on`);
    // two tools share an operation (list_audit_events, export_audit): the message names the first
    const first = TOOLS.find((x) => x.operation === tool.operation)?.name;
    t.equal(words, `do it with the ${first} tool; then go on`, tool.operation);
  }
  t.equal(inToolWords('renewed by POST /v1/relay/renew (the relay does it)'), 'renewed by POST /v1/relay/renew (the relay does it)', 'no tool: unchanged');
  t.equal(inToolWords('see GET /v1/audit/verify?connection_id=conn_1.'), 'see the verify_audit tool.');
  t.equal(inToolWords('GET /v1/connections/targets, not a connection id'), 'the list_targets tool, not a connection id');
});

t.test('list_targets is compact; describe_target has the detail', async (t) => {
  const full = await api<{ targets: Json[] }>(srv.url, 'GET', '/v1/connections/targets', { key: agent.key });
  const listed = await call('list_targets', {});
  t.notOk(listed.isError, text(listed));
  const targets = (listed.structuredContent as { targets: Json[] }).targets;
  t.equal(targets.length, 20);
  const size = JSON.stringify(listed.structuredContent).length;
  t.ok(size < 16_000, `structured content is ${size} bytes (the HTTP list is ${full.text.length})`);
  t.ok(size * 5 < full.text.length, 'at most a fifth of the full list');
  for (const target of targets) {
    const id = String(target['id']);
    t.same(Object.keys(target).sort(), ['credential_kind', 'description', 'id', 'kind', 'name', 'pack', 'queryable', 'scopes', 'tables', 'tiers'], `${id}: the list fields`);
    t.ok(typeof target['description'] === 'string' && !String(target['description']).includes('\n') && String(target['description']).length <= 140, `${id}: a one-line description`);
    t.ok((target['tables'] as unknown[]).every((x) => typeof x === 'string'), `${id}: table names only`);
    t.ok((target['scopes'] as Json[]).every((s) => Object.keys(s).sort().join() === 'name,pattern,required'), `${id}: the scope grammar, without examples`);
    const http = full.body.targets.find((x) => x['id'] === id) as Json;
    t.same(target['tables'], (http['tables'] as Json[]).map((x) => x['name']), `${id}: every table`);
    t.same(target['tiers'], http['tiers']);
  }
  const healthcare = targets.find((x) => x['id'] === 'demo-healthcare') as Json;
  t.match(healthcare, { kind: 'demo', pack: 'healthcare', tables: ['patients', 'encounters', 'claims', 'prior_authorizations', 'coverage_eligibility', 'adt_events'] });
  const described = await call('describe_target', { target_id: 'demo-healthcare' });
  const tables = (described.structuredContent as { tables: { name: string; columns: unknown[] }[] }).tables;
  t.ok(tables.every((x) => x.columns.length > 0), 'describe_target has the columns');

  const tools = await client.listTools();
  t.match(tools.tools.find((x) => x.name === 'list_targets')?.description, /compactly[\s\S]*describe_target/, 'the description says where the detail is');
});

t.test('oneLine keeps a description to its first sentence, on one line', async (t) => {
  t.equal(oneLine('Short. Second sentence.'), 'Short.');
  t.equal(oneLine(`A synthetic health system, 2023-2025: ${'patients, '.repeat(20)}and claims.`), 'A synthetic health system, 2023-2025.');
  t.equal(oneLine('x'.repeat(300)).length, 140);
  t.equal(oneLine('No full stop'), 'No full stop');
});
