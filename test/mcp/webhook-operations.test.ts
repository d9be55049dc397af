/**
 * Every agent operation of the HTTP API is an MCP tool (and a `svc` command): the served OpenAPI
 * document is walked, not a list kept by hand. Found by an outside review: reading the receivers
 * (GET /v1/agent/webhook), removing one (DELETE /v1/agent/webhook), one delivery with its envelope
 * (GET /v1/webhooks/deliveries/{delivery_id}), the mock scenarios (GET /v1/webhooks/scenarios) and
 * the current fault profile (GET /v1/sandbox/webhook-reliability) had no tool and no command, and
 * the fault profile's parameters and the delivery filters could not be sent.
 */
import t from 'tap';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { TOOLS } from '../../control-plane/mcp/tools.js';
import fs from 'node:fs';
import path from 'node:path';
import { hostedMcpClient } from '../helpers/mcp.js';
import { api, signupAgent, startServer, tempDir, type TestServer } from '../helpers/server.js';
import { ensureDist, runSvc, type RunResult } from '../cli/dist.js';
import { Receiver } from '../webhooks/receiver.js';

type Json = Record<string, unknown>;

let srv: TestServer;
let receiver: Receiver;
let dir: string;
/** `svc args` against the server, with a config file of its own */
const svc = (args: readonly string[]): Promise<RunResult> =>
  runSvc(args, { PATH: process.env['PATH'] ?? '', HOME: dir, SVC_BASE_URL: srv.url, SVC_CONFIG: path.join(dir, 'config.json') });
t.before(async () => {
  ensureDist();
  // the receiver is on loopback; its deliveries are not what these tests look at
  srv = await startServer({ env: { SVC_WEBHOOK_ALLOW_PRIVATE: '1' } });
  receiver = await Receiver.start();
  dir = await tempDir('svc-webhook-ops-');
});
t.teardown(async () => {
  await receiver.close();
  await srv.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

t.test('every agent operation of /openapi.json is performed by a tool', async (t) => {
  const doc = (await api<{ paths: Record<string, Record<string, { tags?: string[] }>> }>(srv.url, 'GET', '/openapi.json')).body;
  const tools = new Set(TOOLS.map((x) => x.operation));
  const missing: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const tags = op.tags ?? [];
      // the MCP endpoint itself, the dashboard's paths (501) and the document are no agent operations
      if (path === '/openapi.json' || tags.includes('mcp') || tags.includes('dashboard')) continue;
      const name = `${method.toUpperCase()} ${path}`;
      if (!tools.has(name)) missing.push(name);
    }
  }
  t.same(missing, [], 'no operation without a tool');
});

t.test('the webhook tools over the hosted MCP server', async (t) => {
  const agent = await signupAgent(srv.url, 'Webhook Tools Co');
  const client = await hostedMcpClient(srv.url, agent.key, 'webhook-ops');
  t.teardown(() => client.close());
  const call = async (name: string, args: Json = {}): Promise<CallToolResult> => (await client.callTool({ name, arguments: args })) as CallToolResult;
  const body = (r: CallToolResult): Json => (r.structuredContent ?? {}) as Json;

  const set = await call('set_webhook', { url: receiver.url });
  t.notOk(set.isError, 'receiver set');
  const shown = await call('get_webhook');
  t.notOk(shown.isError);
  t.match(body(shown), { default: { url: receiver.url, connection_id: null }, overrides: [] }, 'get_webhook shows the default');
  t.notMatch(JSON.stringify(body(shown)), /svcsec_/, 'never the secret');

  const scenarios = await call('list_webhook_scenarios');
  t.match(body(scenarios), { default: 'adt.admission' });
  t.ok((body(scenarios)['scenarios'] as Json[]).some((x) => x['id'] === 'claim.adjudicated'), 'the scenarios are listed');

  const chaos = await call('set_webhook_reliability', { mode: 'transient_503', failures: 3 });
  t.match(body(chaos), { mode: 'transient_503', failures: 3 }, 'failures is sent');
  t.match(body(await call('get_webhook_reliability')), { mode: 'transient_503', failures: 3 }, 'get_webhook_reliability shows it');
  t.match(body(await call('set_webhook_reliability', { mode: 'slow', delay_ms: 250 })), { mode: 'slow', delay_ms: 250 }, 'delay_ms is sent');
  t.match(body(await call('set_webhook_reliability', { mode: 'rate_limit', retry_after_seconds: 7 })), { mode: 'rate_limit', retry_after_seconds: 7 }, 'retry_after_seconds is sent');
  const bad = await call('set_webhook_reliability', { mode: 'transient_503', failures: 11 });
  t.ok(bad.isError, 'failures outside 1…10 is refused');
  t.match(body(bad), { error: { code: 'invalid_request', details: { field: 'failures' } } });
  await call('set_webhook_reliability', { mode: 'off' });

  const trig = body(await call('trigger_mock_event', { scenario_id: 'claim.adjudicated' }));
  const id = String(trig['delivery_id']);
  const one = await call('describe_webhook_delivery', { delivery_id: id });
  t.notOk(one.isError);
  t.match(body(one), { delivery_id: id, event: 'claim.adjudicated', envelope: { id, event: 'claim.adjudicated' } }, 'one delivery with its envelope');
  t.match(body(await call('describe_webhook_delivery', { delivery_id: 'dlv_none' })), { error: { code: 'not_found' } });

  const filtered = body(await call('list_webhook_deliveries', { event: 'claim.adjudicated', limit: 1 }));
  t.same((filtered['deliveries'] as Json[]).map((d) => d['delivery_id']), [id], 'event and limit are sent');
  t.same((body(await call('list_webhook_deliveries', { event: 'adt.discharge' }))['deliveries'] as Json[]).length, 0, 'the event filter filters');

  const removed = await call('delete_webhook');
  t.notOk(removed.isError, 'the default is removed');
  t.match(body(removed), { deleted: true, connection_id: null });
  t.match(body(await call('get_webhook')), { default: null }, 'no default any more');
  t.match(body(await call('delete_webhook')), { error: { code: 'not_found' } }, 'removing it again: not_found');
});

t.test('the same operations as svc commands', async (t) => {
  const signup = await svc(['signup', '--org', 'Webhook CLI Co', '--agent', 'cli', '--json']);
  t.equal(signup.code, 0, signup.stderr);
  const json = async (args: string[]): Promise<{ code: number | null; body: Json }> => {
    const r = await svc([...args, '--json']);
    return { code: r.code, body: JSON.parse(r.stdout) as Json };
  };
  t.equal((await json(['webhook', 'set', receiver.url])).code, 0);
  t.match(await json(['webhook', 'show']), { code: 0, body: { default: { url: receiver.url } } }, 'svc webhook show');
  t.match(await json(['webhook', 'scenarios']), { code: 0, body: { default: 'adt.admission' } }, 'svc webhook scenarios');
  t.match(await json(['webhook', 'chaos', 'rate_limit', '--retry-after', '9']), { code: 0, body: { mode: 'rate_limit', retry_after_seconds: 9 } }, 'svc webhook chaos with its parameter');
  t.match(await json(['webhook', 'chaos']), { code: 0, body: { mode: 'rate_limit', retry_after_seconds: 9 } }, 'svc webhook chaos without a mode shows the profile');
  t.match(await json(['webhook', 'chaos', 'off']), { code: 0, body: { mode: 'off' } });
  const trig = await json(['webhook', 'test', '--scenario', 'eligibility.verified']);
  const id = String(trig.body['delivery_id']);
  t.match(await json(['webhook', 'delivery', id]), { code: 0, body: { delivery_id: id, envelope: { id } } }, 'svc webhook delivery <id>');
  const listed = await json(['webhook', 'deliveries', '--event', 'eligibility.verified', '--limit', '1']);
  t.same((listed.body['deliveries'] as Json[]).map((d) => d['delivery_id']), [id], 'svc webhook deliveries --event --limit');
  t.match(await json(['webhook', 'delete']), { code: 0, body: { deleted: true } }, 'svc webhook delete');
  t.match(await json(['webhook', 'delete']), { code: 4, body: { error: { code: 'not_found' } } }, 'again: not_found, exit 4');
});
