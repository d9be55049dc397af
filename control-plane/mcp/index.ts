/**
 * The hosted MCP tool server: POST /mcp (and /v1/mcp), the MCP streamable HTTP transport of the
 * official SDK in stateless mode (a fresh server and transport per request, JSON responses),
 * authenticated by the agent key like every other route (401 without it). Each tool call is made
 * in process through fastify's inject with the caller's own Authorization header, so a tool
 * behaves exactly like its HTTP operation: same auth, validation, rate limits, handlers, errors.
 */
import { setMaxListeners } from 'node:events';
import { Type } from 'typebox';
import { ApiError } from '../errors.js';
import { keptOnceLoaded } from '../once.js';
import { inProcessCall } from '../http/in-process.js';
import { isUnreadableBody } from '../http/strings.js';
import { type App, ErrorSchema, errors } from '../routes/context.js';
import { queryString, type ApiCaller } from './api.js';

export { queryString, type ApiCall, type ApiCaller, type ApiResult } from './api.js';

export const MCP_PATHS = ['/mcp', '/v1/mcp'] as const;

/** A JSON-RPC 2.0 error answered outside any request's id (the transport's own: a body that is not JSON, an internal error). */
const JsonRpcErrorSchema = Type.Object(
  {
    jsonrpc: Type.Literal('2.0'),
    error: Type.Object({ code: Type.Integer(), message: Type.String(), data: Type.Optional(Type.Unknown()) }),
    id: Type.Null(),
  },
  { description: 'a JSON-RPC 2.0 error: -32700 (parse error) for a body that is no JSON text, as the MCP transport answers it; -32600 (invalid request) for an empty batch' },
);

/** The JSON-RPC error body of a message that cannot be read (code -32700), as the SDK's transport writes it. */
function jsonRpcParseError(detail: string): { jsonrpc: '2.0'; error: { code: number; message: string }; id: null } {
  return { jsonrpc: '2.0', error: { code: -32700, message: `Parse error: ${detail}` }, id: null };
}

/**
 * An empty batch is JSON-RPC 2.0's "Invalid Request" (-32600), answered with one error; the SDK's
 * transport took it for a batch of notifications only and answered 202 with nothing.
 */
const EMPTY_BATCH = { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request: an empty batch; send one JSON-RPC request, or an array of at least one' }, id: null } as const;

interface McpParts {
  readonly createMcpServer: typeof import('./server.js').createMcpServer;
  readonly Transport: typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js').StreamableHTTPServerTransport;
}
/**
 * The SDK's server and transport and the tools, loaded on the first MCP request: a control plane
 * no agent asks over MCP does not load them (about 0.3 s of CPU at every start). A load that
 * failed is tried again by the next request.
 */
const mcpParts: () => Promise<McpParts> = keptOnceLoaded(() =>
  Promise.all([import('./server.js'), import('@modelcontextprotocol/sdk/server/streamableHttp.js')]).then(([server, http]) => ({
    createMcpServer: server.createMcpServer,
    Transport: http.StreamableHTTPServerTransport,
  })),
);

/**
 * Tool calls as in-process requests with the caller's key. `gone` aborts when the MCP client
 * leaves before its answer: a query or schema listing it started stops at its source, as when an
 * agent closes its own HTTP connection (http/in-process.ts).
 */
function injectCaller(app: App, authorization: string, remoteAddress: string, gone: AbortSignal): ApiCaller {
  return async (call) => {
    const inProcess = inProcessCall(gone);
    const headers: Record<string, string> = { ...inProcess.headers };
    if (!call.anonymous) headers['authorization'] = authorization;
    if (call.body !== undefined) headers['content-type'] = 'application/json';
    if (call.idempotencyKey !== undefined) headers['idempotency-key'] = call.idempotencyKey;
    const res = await app
      .inject({
        method: call.method,
        url: call.path + queryString(call.query),
        headers,
        remoteAddress,
        ...(call.body !== undefined ? { payload: JSON.stringify(call.body) } : {}),
      })
      .finally(() => inProcess.release());
    let body: unknown;
    try {
      body = res.body ? (JSON.parse(res.body) as unknown) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.statusCode, body, text: res.body, headers: headersOf(res.headers) };
  };
}

/** An injected answer's headers as fetch's Headers, as the HTTP caller has them (Idempotent-Replayed). */
function headersOf(raw: Readonly<Record<string, string | string[] | number | undefined>>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, String(v));
  }
  return headers;
}

/**
 * `closing`: whether the app is closing (app.ts). An answer sent then ends its keep-alive socket;
 * the MCP transport writes its answer itself, past the onSend hook that says so for the others.
 */
export function mcpRoutes(app: App, closing: () => boolean): void {
  for (const url of MCP_PATHS) {
    app.post(
      url,
      {
        schema: {
          summary: 'MCP tool server (streamable HTTP transport, stateless, JSON responses): every agent operation as a tool',
          description:
            'A JSON-RPC 2.0 message of the Model Context Protocol (initialize, tools/list, tools/call …). Send Accept: application/json, text/event-stream. Tools: list_targets, describe_target, list_packs, open_connection, list_connections, describe_connection, revoke_connection, query, list_audit_events, export_audit, verify_audit, get_usage, top_up_wallet, webhook, credential and relay tools. Tool errors carry the API error code.',
          tags: ['mcp'],
          body: Type.Unknown({ description: 'a JSON-RPC 2.0 request or notification' }),
          response: { ...errors(400, 415), 400: Type.Union([ErrorSchema, JsonRpcErrorSchema]) },
        },
        // a body that is no JSON text at all is JSON-RPC's parse error, as the MCP transport answers
        // it; anything else (auth, media type, limits) goes to the app's error handler
        errorHandler: (error, _req, reply) => {
          if (!isUnreadableBody(error)) throw error;
          const detail = error instanceof ApiError ? error.message.replace(/^the body /, 'the message ') : 'the message is not valid JSON';
          return reply.code(400).type('application/json; charset=utf-8').send(jsonRpcParseError(detail));
        },
      },
      async (req, reply) => {
        if (Array.isArray(req.body) && req.body.length === 0) return reply.code(400).type('application/json; charset=utf-8').send(EMPTY_BATCH);
        const { createMcpServer, Transport } = await mcpParts();
        const authorization = req.headers.authorization ?? '';
        // the client leaving before its answer stops the tool calls it started
        const gone = new AbortController();
        // each call of a JSON-RPC batch (up to the transport's 100) follows it while it runs: not a leak
        setMaxListeners(0, gone.signal);
        const server = createMcpServer(injectCaller(app, authorization, req.ip, gone.signal));
        const transport = new Transport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        reply.hijack(); // the transport writes the response itself
        // an answer written once the server stopped accepting is not ended by Node as idle: without
        // this its socket kept the close waiting for its keep-alive timeout (72 s), e.g. a first
        // POST /mcp that was still loading the SDK when the close began
        const raw = reply.raw;
        const writeHead = raw.writeHead.bind(raw) as (...args: unknown[]) => typeof raw;
        raw.writeHead = ((...args: unknown[]) => {
          if (closing()) raw.setHeader('connection', 'close');
          return writeHead(...args);
        }) as typeof raw.writeHead;
        const onClose = (): void => {
          if (!reply.raw.writableFinished) gone.abort();
          void transport.close();
          void server.close();
        };
        reply.raw.once('close', onClose);
        // gone already, while its key was checked: its 'close' has been emitted
        if (reply.raw.destroyed) onClose();
        try {
          await server.connect(transport);
          await transport.handleRequest(req.raw, reply.raw, req.body);
        } catch (err) {
          req.log.error({ err: { message: (err as Error).message } }, 'mcp request failed');
          if (!reply.raw.headersSent) {
            reply.raw.writeHead(500, { 'content-type': 'application/json' });
            reply.raw.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'internal error' }, id: null }));
          } else if (!reply.raw.writableEnded) reply.raw.end();
        }
      },
    );
    // stateless: no server-initiated stream and no session to delete
    for (const method of ['GET', 'DELETE'] as const) {
      app.route({
        method,
        url,
        // answers 405 itself: not listed in the Allow of other methods' 405 (http/methods.ts)
        config: { refusesMethod: true },
        schema: { summary: `Not offered: the MCP server is stateless (no ${method === 'GET' ? 'server-sent event stream' : 'session'}); answers 405`, tags: ['mcp'], response: { 405: ErrorSchema } },
        handler: async (_req, reply) => {
          void reply.header('allow', 'POST');
          throw new ApiError('method_not_allowed', `${method} ${url} is not offered: this MCP server is stateless; POST JSON-RPC messages to ${url}`);
        },
      });
    }
  }
}
