/**
 * MCP in tests: the SDK's own client of the hosted server (`POST /mcp`) and of `svc mcp` over stdio;
 * raw calls to the hosted server for tests that need the HTTP exchange itself (a client leaving
 * mid-call, batches), and the query events they leave in the audit trail.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SVC_JS } from '../cli/dist.js';
import { api } from './server.js';

/** the SDK's client of the hosted MCP server at `base` + `path`, sending `key` */
export async function hostedMcpClient(base: string, key: string, name = 'svc-test', path = '/mcp'): Promise<Client> {
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(base + path), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

/**
 * `svc mcp` (the compiled CLI, dist/ brought up to date by the caller) as a child process calling
 * the API at `base`, with `env` (SVC_API_KEY, …) and no config file, and the SDK's client over its
 * stdio; `stderr()` is what it wrote there so far.
 */
export async function localMcpClient(base: string, env: Record<string, string>, name: string): Promise<{ client: Client; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [SVC_JS, 'mcp'],
    env: { PATH: process.env['PATH'] ?? '', SVC_BASE_URL: base, SVC_CONFIG: '/nonexistent/svc-config.json', ...env },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

/** what the streamable HTTP transport requires of a POST */
export const MCP_HEADERS: Readonly<Record<string, string>> = { accept: 'application/json, text/event-stream' };

/** one JSON-RPC `tools/call` request */
export function toolCall(id: number, name: string, args: Record<string, unknown>): Record<string, unknown> {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } };
}

export type QueryEvent = { type: string; outcome?: string; error_code?: string | null; cost_cents?: number; sql_executed?: string };

/** the connection's `query` audit events, oldest first */
export async function queryEvents(base: string, conn: string, key: string): Promise<QueryEvent[]> {
  const r = await api<{ events: { body?: QueryEvent }[] }>(base, 'GET', `/v1/connections/${conn}/audit`, { key });
  return r.body.events.map((e) => e.body ?? (e as unknown as QueryEvent)).filter((e) => e.type === 'query');
}
