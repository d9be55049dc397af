/**
 * The API call a tool (or a CLI command) makes, and the caller that makes it: in process with the
 * caller's own key (the hosted MCP server, POST /mcp) or over HTTP (`svc mcp`, the CLI).
 */

export interface ApiCall {
  readonly method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** path with its parameters already encoded */
  readonly path: string;
  readonly query?: Record<string, string | undefined>;
  readonly body?: unknown;
  /** no agent key (signup, relay registration) */
  readonly anonymous?: boolean;
  /** sent as the Idempotency-Key header (a top-up safe to send again) */
  readonly idempotencyKey?: string;
}

export interface ApiResult {
  readonly status: number;
  /** the parsed JSON body, or undefined when it is not JSON */
  readonly body: unknown;
  readonly text: string;
  /** response headers, when the caller has them (Retry-After) */
  readonly headers?: Headers;
}

export type ApiCaller = (call: ApiCall) => Promise<ApiResult>;

/** `?a=1&b=2` from the defined entries of `query` ('' when none). */
export function queryString(query: Record<string, string | undefined> | undefined): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}
