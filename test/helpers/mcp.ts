/**
 * Raw calls to the hosted MCP server (`POST /mcp`) for tests that need the HTTP exchange itself
 * (a client leaving mid-call, batches), and the query events they leave in the audit trail.
 */
import { api } from './server.js';

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
