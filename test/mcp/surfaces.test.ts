/**
 * Walks the specification's endpoint tables (spec-endpoints.ts) and checks each operation on the
 * three surfaces: described in the served OpenAPI document and registered in fastify; offered by
 * the hosted MCP server as a tool whose request is that very operation; registered as a CLI
 * command (its --help answers). What each surface really does is exercised in
 * test/api/openapi.test.ts, test/mcp/mcp.test.ts and test/cli/cli.test.ts.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { TOOLS } from '../../control-plane/mcp/tools.js';
import { hostedMcpClient } from '../helpers/mcp.js';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import { ensureDist, ROOT, SVC_JS } from '../cli/dist.js';
import { SPEC_ENDPOINTS } from './spec-endpoints.js';

const run = promisify(execFile);
let srv: TestServer;
t.before(async () => {
  ensureDist();
  srv = await startServer();
});
t.teardown(() => srv.close());

t.test('every spec operation: OpenAPI + registered route, MCP tool performing it, CLI command registered', async (t) => {
  const doc = (await api<{ paths: Record<string, Record<string, unknown>> }>(srv.url, 'GET', '/openapi.json')).body;
  const agent = await signupAgent(srv.url, 'Surfaces Co');
  const client = await hostedMcpClient(srv.url, agent.key, 'surfaces');
  t.teardown(() => client.close());
  const served = new Set((await client.listTools()).tools.map((x) => x.name));

  for (const e of SPEC_ENDPOINTS) {
    const op = `${e.method} ${e.path}`;
    t.ok(doc.paths[e.path]?.[e.method.toLowerCase()], `${op}: in /openapi.json`);
    t.ok(srv.svc.app.hasRoute({ method: e.method, url: e.path.replace(/\{([^}]+)\}/g, ':$1') }), `${op}: a registered route`);
    t.ok(served.has(e.mcp), `${op}: MCP tool ${e.mcp} served`);
    const tool = TOOLS.find((x) => x.name === e.mcp);
    t.equal(tool?.operation, op, `${op}: tool ${e.mcp} is declared to perform it`);
    // the tool's request really is this operation (method and path, parameters filled in)
    const sample = tool?.request({ connection_id: 'c1', target_id: 't1', relay_id: 'r1', delivery_id: 'd1', connector_kind: 'k1', csr_pem: 'x', sql: 'SELECT 1', scopes: ['read:x'], url: 'https://x', mode: 'off', amount_cents: 100, org_name: 'o', agent_name: 'a', enroll_token: 'x', secret: 's' });
    const pattern = new RegExp(`^${e.path.replace(/\{[^}]+\}/g, '[^/?]+')}$`);
    t.ok(sample && sample.method === e.method && pattern.test(sample.path), `${op}: tool ${e.mcp} requests ${sample?.method} ${sample?.path}`);
    const bin = e.bin === 'svc' ? SVC_JS : path.join(ROOT, 'dist/cli/svc-relay.js');
    const help = await run(process.execPath, [bin, ...e.cli, '--help']);
    t.match(help.stdout, new RegExp(`Usage: ${e.bin} ${e.cli.join(' ')}`), `${op}: \`${e.bin} ${e.cli.join(' ')}\` is a command`);
  }
});
