/**
 * The CLI's HTTP client (also the API caller of `svc mcp`): one call = one request with the agent
 * key as a Bearer token. Failures become a `CliFailure` with the documented exit status and a
 * message that says what to do next.
 */
import { queryString, type ApiCall, type ApiCaller, type ApiResult } from '../../control-plane/mcp/api.js';

/** Exit statuses (docs/cli-and-mcp.md): 0 ok, 1 verification failed, 2 usage, 3 auth, 4 other client error, 5 server or network error. */
export const EXIT = { ok: 0, verifyFailed: 1, usage: 2, auth: 3, client: 4, server: 5 } as const;

export class CliFailure extends Error {
  readonly exitCode: number;
  /** the API's error body, printed on stdout with --json */
  readonly body: unknown;
  constructor(exitCode: number, message: string, body?: unknown) {
    super(message);
    this.name = 'CliFailure';
    this.exitCode = exitCode;
    this.body = body;
  }
}

/** `--json`'s body for a failure without an API error body: the API's error shape, without a request id. */
export function localError(code: string, message: string): { error: { code: string; message: string } } {
  return { error: { code, message } };
}

export interface ClientOptions {
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  /** where the key would be read from, for messages */
  readonly keySource: string;
  readonly timeoutMs?: number;
}

export function exitCodeForStatus(status: number): number {
  if (status === 401) return EXIT.auth;
  if (status >= 400 && status < 500) return EXIT.client;
  return EXIT.server;
}

/** The connection a call is about (`/v1/connections/{id}/…`), to name it in the next step; else the placeholder. */
function connectionOf(path: string): string {
  const m = /^\/v1\/connections\/([^/?]+)\/(?:query|schema|audit|revoke)(?:$|\?)/.exec(path);
  if (!m?.[1]) return '<connection_id>';
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return '<connection_id>';
  }
}

/** What to do about a statement the API refused as invalid_sql, by `details.reason`. */
function sqlStep(reason: unknown, conn: string): string {
  switch (reason) {
    case 'too_complex':
      return 'split the statement or simplify it (fewer nested subqueries and shorter IN lists), then retry';
    case 'unsupported':
      return 'write that expression another way (a subquery or a CTE); the rest of the statement passed the scope check';
    case 'row_too_large':
    case 'message_too_large':
    case 'out_of_memory':
      return 'select fewer or shorter columns (e.g. left(column, 1000)) or fewer rows, then retry';
    default:
      return `fix the statement: one read (SELECT, WITH … SELECT, VALUES or TABLE) in the source's SQL dialect, naming tables and columns as svc schema ${conn} lists them`;
  }
}

/** Where to look up the id of what a 404 did not find, by the path asked for. */
function listFor(path: string): string {
  if (path.startsWith('/v1/connections/credentials')) return 'svc credentials list';
  if (path.startsWith('/v1/connections/targets') || path.startsWith('/v1/connections/packs')) return 'svc targets, svc packs';
  if (path.startsWith('/v1/relays')) return 'svc relay list';
  if (path.startsWith('/v1/webhooks/deliveries')) return 'svc webhook deliveries';
  if (path.startsWith('/v1/connections')) return 'svc connections';
  return 'svc connections, svc targets, svc relay list';
}

function nextStep(status: number, code: string, headers: Headers, o: ClientOptions, details: unknown, path: string, requestId: string | undefined): string {
  const d = details && typeof details === 'object' ? (details as Record<string, unknown>) : {};
  const reason = d['reason'];
  const conn = connectionOf(path);
  switch (code) {
    case 'invalid_sql':
      return sqlStep(reason, conn);
    case 'unauthorized':
      return `set SVC_API_KEY to your agent key (svc_conn_…) or run: svc signup --org <name> --agent <name>  (key looked up in ${o.keySource})`;
    case 'payment_required':
      return 'top up the wallet: svc topup <amount_cents>, then retry';
    case 'connection_expired':
    case 'connection_revoked':
      return 'open a new connection: svc connect <target_id> --scope <scope>';
    case 'scope_violation':
      return reason === 'table_not_in_scope' || reason === 'unknown_table'
        ? `read only the tables this connection may read (svc schema ${conn} lists them with their columns), or open a connection with wider scopes`
        : `read only the tables in the connection scopes (svc connection ${conn === '<connection_id>' ? '<id>' : conn} shows them), or open a connection with wider scopes`;
    case 'invalid_scope':
      return 'see the scope grammar: svc target <target_id>';
    case 'not_found':
      return `check the id: ${listFor(path)}`;
    case 'invalid_request':
      return `correct ${typeof d['field'] === 'string' ? `the ${d['field']} value` : 'the request'} as the message says, then retry (svc help <command> lists its arguments)`;
    case 'rate_limited':
      return `retry after ${headers.get('retry-after') ?? 'a few'} second(s)`;
    case 'relay_unavailable':
      // running and listed online, but too old to be sent a statement (query/relay.ts): starting it is no help
      if (reason === 'relay_outdated') return 'upgrade svc-relay on the machine next to the database and restart it (svc relay list shows it online: it runs, but without the search_path pin svc requires)';
      return 'start the relay next to the database (svc-relay run …) and check svc relay list';
    case 'query_timeout':
      return 'narrow the statement (filters, LIMIT) and retry';
    default:
      if (status >= 500) return `retry shortly; if it persists, quote the request id${requestId ? ` ${requestId}` : ''}`;
      return 'the message says what was refused; change the request accordingly, then retry';
  }
}

/**
 * A path segment "." or ".." (an id given as `..`) is read by fetch's URL parser as a path step,
 * however it is encoded (`%2e` too), so the request would reach another route. No id is either:
 * the answer is the API's not_found for it, without a request.
 */
function dotSegment(path: string): ApiResult | undefined {
  const seg = path.split('/').find((p) => /^(?:\.|%2e){1,2}$/i.test(p));
  if (seg === undefined) return undefined;
  const id = seg.replace(/%2e/gi, '.');
  const body = localError('not_found', `${JSON.stringify(id)} not found: no id is "." or ".."`);
  return { status: 404, body, text: JSON.stringify(body) };
}

export function httpCaller(o: ClientOptions): ApiCaller {
  return async (call: ApiCall): Promise<ApiResult> => {
    const dots = dotSegment(call.path);
    if (dots) return dots;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (!call.anonymous && o.apiKey) headers['authorization'] = `Bearer ${o.apiKey}`;
    if (call.body !== undefined) headers['content-type'] = 'application/json';
    if (call.idempotencyKey !== undefined) headers['idempotency-key'] = call.idempotencyKey;
    const res = await fetch(o.baseUrl.replace(/\/+$/, '') + call.path + queryString(call.query), {
      method: call.method,
      headers,
      signal: AbortSignal.timeout(o.timeoutMs ?? 120_000),
      ...(call.body !== undefined ? { body: JSON.stringify(call.body) } : {}),
    });
    const text = await res.text();
    let body: unknown;
    try {
      body = text ? (JSON.parse(text) as unknown) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.status, body, text, headers: res.headers };
  };
}

/** Make the call; a non-2xx answer or an unreachable server throws a CliFailure. */
export async function request(o: ClientOptions, call: ApiCall): Promise<ApiResult> {
  if (!call.anonymous && !o.apiKey) {
    throw new CliFailure(EXIT.auth, `no agent key: set SVC_API_KEY, or run svc signup --org <name> --agent <name> to create an account and store its key in ${o.keySource}`);
  }
  let r: ApiResult;
  try {
    r = await httpCaller(o)(call);
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    const why = e.name === 'TimeoutError' ? 'no answer in time' : (e.cause?.code ?? e.cause?.message ?? e.message);
    throw new CliFailure(EXIT.server, `cannot reach the svc API at ${o.baseUrl} (${why}); is the server running? set --base-url or SVC_BASE_URL`);
  }
  if (r.status >= 400) {
    // the API's error body: an object with a code (a proxy's JSON page may have an `error` of its own, e.g. a string)
    const raw = (r.body as { error?: unknown } | undefined)?.error;
    const e = raw && typeof raw === 'object' && typeof (raw as { code?: unknown }).code === 'string' ? (raw as { code: string; message?: unknown; details?: unknown; request_id?: unknown }) : undefined;
    const code = e?.code ?? `http_${r.status}`;
    const message = typeof e?.message === 'string' ? e.message : r.text.slice(0, 300);
    const requestId = typeof e?.request_id === 'string' ? e.request_id : undefined;
    const next = nextStep(r.status, code, r.headers ?? new Headers(), o, e?.details, call.path, requestId);
    // an answer without the API's error body (a proxy's page, say) still gets one on --json
    throw new CliFailure(exitCodeForStatus(r.status), `${code} (HTTP ${r.status}): ${message}${next ? `\nnext: ${next}` : ''}`, e ? r.body : localError(code, message));
  }
  return r;
}
