/**
 * The OpenAPI 3.1 document served at GET /openapi.json, generated from the routes' own schemas:
 * an onRoute hook collects every route (method, URL, params, querystring, body, responses) as it
 * is registered, and the document is built from that collection on first request. Success bodies
 * are described exactly in openapi-bodies.ts (DOCUMENTED_RESPONSES): a route's own success schema
 * serves its serialization and may be open, so it is used only for a route not described there. Error
 * statuses are the route's, plus those any operation of its kind answers (400 for a malformed
 * body or a bad string, 413/415 where a body may be sent, 401/429 where a key is needed).
 * test/api/openapi-conformance.test.ts drives every operation and validates every real response
 * against the document.
 */
import type { AddressInfo } from 'node:net';
import { Type } from 'typebox';
import { API_ERRORS } from './errors.js';
import { COMPONENTS, DOCUMENTED_RESPONSES, type DocumentedResponse, errorSchema } from './openapi-bodies.js';
import type { App, Services } from './routes/context.js';
import { STRING_GUARD_EXEMPT } from './http/strings.js';

export interface CollectedRoute {
  readonly method: string;
  /** fastify form, e.g. /v1/connections/:connection_id */
  readonly url: string;
  readonly public: boolean;
  readonly schema: Record<string, unknown>;
}

type Json = Record<string, unknown>;

/** /v1/connections/:id → /v1/connections/{id} */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

function plain(schema: unknown): Json {
  // TypeBox schemas are JSON Schema; its markers are non-enumerable and vanish here
  return JSON.parse(JSON.stringify(schema ?? {})) as Json;
}

const ERROR_REF = { $ref: '#/components/schemas/Error' };

/** Replace the shared error schema (by its $id) with a reference to the component. */
function withRefs(schema: Json): Json {
  if (schema['$id'] === 'Error') return ERROR_REF;
  const out: Json = {};
  for (const [k, v] of Object.entries(schema)) {
    if (Array.isArray(v)) out[k] = v.map((x) => (x && typeof x === 'object' ? withRefs(x as Json) : x));
    else if (v && typeof v === 'object') out[k] = withRefs(v as Json);
    else out[k] = v;
  }
  return out;
}

function isEmpty(schema: Json): boolean {
  return Object.keys(schema).filter((k) => k !== 'description').length === 0;
}

function parameters(schema: unknown, where: 'path' | 'query' | 'header'): Json[] {
  const s = plain(schema);
  const props = (s['properties'] ?? {}) as Record<string, Json>;
  const required = new Set((s['required'] as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, p]) => ({
    name,
    in: where,
    required: where === 'path' ? true : required.has(name),
    schema: withRefs(p),
    ...(typeof p['description'] === 'string' ? { description: p['description'] } : {}),
  }));
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No content',
  400: 'Invalid request, scope or SQL',
  401: 'Missing, malformed, unknown or revoked agent key',
  402: 'Trial used up and the wallet cannot pay',
  403: 'Outside the scopes, or not a read',
  404: 'Unknown id, or one of another organization',
  405: 'Method not allowed',
  409: 'Conflict with the current state',
  410: 'The connection expired or was revoked',
  413: 'Body over the limit',
  415: 'Body not JSON',
  429: 'Rate limited; see Retry-After',
  501: 'Not implemented here',
  503: 'Temporarily unavailable; see Retry-After',
  504: 'The statement ran past its deadline',
};

const BODY_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const json = (schema: unknown): Json => ({ 'application/json': { schema } });

const RETRY_AFTER = { 'Retry-After': { required: true, description: 'whole seconds to wait before retrying', schema: { type: 'integer', minimum: 1 } } };

function errorResponse(status: number): Json {
  return { description: STATUS_TEXT[status] ?? 'Error', ...(status === 429 ? { headers: RETRY_AFTER } : {}), content: json(ERROR_REF) };
}

function documentedResponse(d: DocumentedResponse): Json {
  const content: Json = {};
  if (d.schema) content['application/json'] = { schema: plain(d.schema) };
  // OpenAPI 3.1 has no schema for the items of a stream; x-item-schema describes each line
  if (d.ndjson) content['application/x-ndjson'] = { schema: { type: 'string', description: 'one JSON value per line' }, 'x-item-schema': plain(d.ndjson) };
  const headers = d.status === 429 ? RETRY_AFTER : d.headers;
  return { description: d.description, ...(headers ? { headers } : {}), ...(Object.keys(content).length ? { content } : {}) };
}

const DEFAULT_RESPONSE: Json = {
  description: 'Any other error (500 internal_error, 503 while the service starts or stops, 408/431 for a request too slow or headers too large): the error body',
  content: json(ERROR_REF),
};

function operation(r: CollectedRoute, method: string): Json {
  const path = openApiPath(r.url);
  const key = `${method} ${path}`;
  const schema = r.schema;
  const op: Json = {
    operationId: `${method.toLowerCase()}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
    summary: typeof schema['summary'] === 'string' ? schema['summary'] : key,
    tags: Array.isArray(schema['tags']) ? schema['tags'] : ['other'],
  };
  if (typeof schema['description'] === 'string') op['description'] = schema['description'];
  if (r.public) op['security'] = [];
  const params = [
    ...(schema['params'] ? parameters(schema['params'], 'path') : []),
    ...(schema['querystring'] ? parameters(schema['querystring'], 'query') : []),
    ...(schema['headers'] ? parameters(schema['headers'], 'header') : []),
  ];
  // a path parameter the schema does not type is still a parameter
  for (const m of path.matchAll(/\{([^}]+)\}/g)) {
    if (!params.some((p) => p['name'] === m[1] && p['in'] === 'path')) params.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
  }
  if (params.length) op['parameters'] = params;
  if (schema['body']) {
    const optional = (schema['body'] as Json)['~optional'] === true;
    op['requestBody'] = {
      required: !optional,
      ...(optional ? { description: 'Optional: a request with no body (or an empty one) is handled as {}' } : {}),
      content: json(withRefs(plain(schema['body']))),
    };
  }

  const responses: Json = {};
  const declared = (schema['response'] ?? {}) as Record<string, unknown>;
  const documented = DOCUMENTED_RESPONSES[key];
  if (!documented) {
    // a route described nowhere else: its own success schema, when it types one
    for (const [code, s] of Object.entries(declared)) {
      const status = Number(code);
      const body = withRefs(plain(s));
      if (status >= 400 || (isEmpty(body) && status !== 204)) continue;
      responses[code] = status === 204 ? { description: STATUS_TEXT[204] } : { description: STATUS_TEXT[status] ?? 'Success', content: json(body) };
    }
  }
  // errors: those the route declares, and those every operation of its kind can answer
  const errorStatuses = new Set(Object.keys(declared).map(Number).filter((s) => s >= 400));
  // a malformed body, or a NUL byte or lone surrogate in any parameter or body string (http/strings.ts)
  if (BODY_METHODS.has(method) || !STRING_GUARD_EXEMPT.has(r.url)) errorStatuses.add(400);
  if (BODY_METHODS.has(method)) {
    errorStatuses.add(413);
    errorStatuses.add(415);
  }
  // the agent key, and its rate limit
  if (!r.public) {
    errorStatuses.add(401);
    errorStatuses.add(429);
  }
  for (const status of [...errorStatuses].sort()) responses[String(status)] = errorResponse(status);
  for (const d of documented ?? []) responses[String(d.status)] = documentedResponse(d);
  responses['default'] = DEFAULT_RESPONSE;
  op['responses'] = responses;
  return op;
}

export function buildOpenApi(routes: readonly CollectedRoute[], serverUrl: string, dashboardUrl: string): Json {
  const paths: Record<string, Json> = {};
  for (const r of routes) {
    const path = openApiPath(r.url);
    const item = (paths[path] ??= {});
    item[r.method.toLowerCase()] = operation(r, r.method);
  }
  // the dashboard's paths (answered 501 dashboard_only), one stands for all
  paths['/v1/auth/status'] = {
    get: {
      operationId: 'getV1AuthStatus',
      summary: `Owned by the dashboard (${dashboardUrl}); the service answers 501 dashboard_only, as for every /v1/auth/*, /v1/keys*, /v1/agent/keys*, /v1/api-keys*, /v1/sessions* path`,
      tags: ['dashboard'],
      security: [],
      responses: { '400': errorResponse(400), '501': { description: 'dashboard_only', content: json(ERROR_REF) }, default: DEFAULT_RESPONSE },
    },
  };
  const codes = Object.keys(API_ERRORS);
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc API',
      version: '1',
      description:
        'Scoped, metered, audited data access for software agents. Every error is `{"error": {"code", "message", "details"?, "request_id"}}`; codes: ' +
        codes.map((c) => `\`${c}\` (${API_ERRORS[c as keyof typeof API_ERRORS].status})`).join(', ') +
        '. The same operations are offered as MCP tools at POST /mcp and by the `svc` CLI.',
    },
    servers: [{ url: serverUrl }],
    security: [{ agentKey: [] }],
    paths: Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b))),
    components: {
      securitySchemes: {
        agentKey: { type: 'http', scheme: 'bearer', bearerFormat: 'svc_conn_…', description: 'The agent key from POST /v1/agent/account, sent as "Authorization: Bearer svc_conn_…"' },
      },
      schemas: { Error: plain(errorSchema(codes)), ...Object.fromEntries(Object.entries(COMPONENTS).map(([name, schema]) => [name, plain(schema)])) },
    },
  };
}

/**
 * Collects every route registered after this call and serves GET /openapi.json. Call it before
 * the route plugins.
 */
export function openApiRoutes(app: App, s: Services): void {
  const routes: CollectedRoute[] = [];
  app.addHook('onRoute', (r) => {
    const schema = (r.schema ?? {}) as Record<string, unknown>;
    if (schema['hide'] === true) return;
    for (const method of Array.isArray(r.method) ? r.method : [r.method]) {
      if (method === 'HEAD') continue;
      routes.push({ method, url: r.url, public: r.config?.public === true, schema });
    }
  });
  let doc: Json | undefined;
  app.get('/openapi.json', { config: { public: true }, schema: { summary: 'This OpenAPI 3.1 document', tags: ['system'], response: { 200: Type.Unknown() } } }, async () => (doc ??= buildOpenApi(routes, boundUrl(s.config.publicUrl, app.server.address()), s.config.dashboardUrl)));
}

/** A derived public URL with port 0 (PORT=0, no SVC_PUBLIC_URL) means: the port actually bound. */
export function boundUrl(url: string, address: AddressInfo | string | null): string {
  return /:0$/.test(url) && address && typeof address === 'object' ? url.replace(/:0$/, `:${address.port}`) : url;
}
