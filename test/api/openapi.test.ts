/**
 * GET /openapi.json: an OpenAPI 3.1 document generated from the routes' own schemas. Every
 * registered route is described (compared with fastify's own route table), the document is
 * structurally valid (operations, parameters, references, security), and every path of the
 * spec's endpoint tables appears. That real responses conform to it: openapi-conformance.test.ts.
 */
import t from 'tap';
import { Value } from 'typebox/value';
import { DASHBOARD_PATHS } from '../../control-plane/routes/system.js';
import { api, startServer, type TestServer } from '../helpers/server.js';
import { SPEC_ENDPOINTS } from '../mcp/spec-endpoints.js';

type Json = Record<string, unknown>;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/** (METHOD, fastify url) of every route fastify has, from its own route tree (HEAD excluded). */
function fastifyRoutes(tree: string): { method: string; url: string }[] {
  const out: { method: string; url: string }[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^(.*?)(?:├── |└── )(\S+) \(([A-Z, ]+)\)$/.exec(line);
    if (!m || m[1] === undefined || m[2] === undefined || m[3] === undefined) continue;
    const depth = m[1].length / 4;
    stack.length = depth;
    stack.push(m[2]);
    const url = stack.join('');
    for (const method of m[3].split(', ')) if (method !== 'HEAD') out.push({ method, url });
  }
  return out;
}

const toOpenApi = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

let srv: TestServer;
let doc: Json;
t.before(async () => {
  srv = await startServer();
  const r = await api(srv.url, 'GET', '/openapi.json');
  if (r.status !== 200) throw new Error(`openapi.json: ${r.status}`);
  doc = r.body;
});
t.teardown(() => srv.close());

const paths = (): Record<string, Record<string, Json>> => doc['paths'] as Record<string, Record<string, Json>>;

t.test('served without a key, OpenAPI 3.1, with the agent-key bearer scheme and the error body', async (t) => {
  t.equal(doc['openapi'], '3.1.0');
  const components = doc['components'] as Json;
  t.same((components['securitySchemes'] as Json)['agentKey'], { type: 'http', scheme: 'bearer', bearerFormat: 'svc_conn_…', description: String(((components['securitySchemes'] as Json)['agentKey'] as Json)['description']) });
  t.same(doc['security'], [{ agentKey: [] }]);
  const err = (components['schemas'] as Json)['Error'] as Json;
  const inner = (err['properties'] as Json)['error'] as Json;
  t.same(inner['required'], ['code', 'message', 'request_id']);
  for (const code of ['invalid_request', 'unauthorized', 'payment_required', 'scope_violation', 'not_found', 'connection_expired', 'rate_limited', 'dashboard_only', 'query_timeout']) {
    t.ok(((inner['properties'] as Json)['code'] as { enum: string[] }).enum.includes(code), `error code ${code} documented`);
  }
  t.ok((inner['properties'] as Json)['details'], 'details documented');
  // an error body the server really sends conforms to the documented Error schema
  const e = await api(srv.url, 'GET', '/v1/connections');
  t.equal(e.status, 401);
  t.ok(Value.Check(err, e.body), 'a real 401 body matches components.schemas.Error');
});

t.test('the server URL is where the API answers, also when PORT=0 picked the port', async (t) => {
  // walk-through: with PORT=0 (and no SVC_PUBLIC_URL) servers[0].url was http://127.0.0.1:0
  t.same(doc['servers'], [{ url: srv.url.replace(/\/$/, '') }]);
});

t.test('every route fastify registered is described, and every described operation is registered', async (t) => {
  const routes = fastifyRoutes(srv.svc.app.printRoutes({ commonPrefix: false }));
  t.ok(routes.length > 30, `${routes.length} routes found in fastify's table`);
  const described = new Set<string>();
  for (const [p, item] of Object.entries(paths())) for (const m of Object.keys(item)) if (METHODS.includes(m)) described.add(`${m.toUpperCase()} ${p}`);
  const undocumented: string[] = [];
  for (const r of routes) {
    if (r.url.endsWith('*') || DASHBOARD_PATHS.includes(r.url)) continue; // the dashboard's paths: checked below
    if (r.url === '/healthz' || r.url === '/metrics') continue; // liveness probe and Prometheus scrape, not part of the API
    const key = `${r.method} ${toOpenApi(r.url)}`;
    if (!described.has(key)) undocumented.push(key);
  }
  t.same(undocumented, [], 'no registered route is missing from the document');
  for (const key of described) {
    const [method, path] = key.split(' ') as [string, string];
    if (path === '/v1/auth/status') continue;
    t.ok(srv.svc.app.hasRoute({ method: method as 'GET', url: path.replace(/\{([^}]+)\}/g, ':$1') }), `${key} is a registered route`);
  }
  // the dashboard's wildcard paths are represented and really answer 501 dashboard_only
  t.ok(paths()['/v1/auth/status']?.['get']);
  const d = await api(srv.url, 'GET', '/v1/auth/status');
  t.equal(d.status, 501);
  t.equal((d.body['error'] as Json)['code'], 'dashboard_only');
});

t.test('structurally valid: unique operation ids, declared path parameters, responses with bodies, references that resolve', async (t) => {
  const ids = new Set<string>();
  const refs: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (k === '$ref' && typeof x === 'string') refs.push(x);
        walk(x);
      }
    }
  };
  walk(doc);
  for (const ref of refs) {
    const target = ref.replace(/^#\//, '').split('/').reduce<unknown>((o, k) => (o as Json | undefined)?.[k], doc);
    t.ok(ref.startsWith('#/') && target !== undefined, `${ref} resolves`);
  }
  for (const [p, item] of Object.entries(paths())) {
    t.ok(p.startsWith('/'), `${p} starts with /`);
    const templated = [...p.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    for (const [m, op] of Object.entries(item)) {
      t.ok(METHODS.includes(m), `${m} is an HTTP method`);
      const id = op['operationId'] as string;
      t.ok(id && !ids.has(id), `${m} ${p}: unique operationId ${id}`);
      ids.add(id);
      t.type(op['summary'], 'string');
      const params = (op['parameters'] ?? []) as Json[];
      for (const name of templated) t.ok(params.some((x) => x['in'] === 'path' && x['name'] === name && x['required'] === true), `${m} ${p}: path parameter ${name} declared`);
      for (const x of params) t.ok(['path', 'query', 'header'].includes(String(x['in'])) && typeof x['name'] === 'string' && x['schema'], `${m} ${p}: parameter ${String(x['name'])} well formed`);
      const responses = op['responses'] as Record<string, Json>;
      t.ok(responses['default'], `${m} ${p}: documents the error body for any other status`);
      const codes = Object.keys(responses).filter((c) => c !== 'default');
      t.ok(codes.every((c) => /^[1-5]\d\d$/.test(c)), `${m} ${p}: status codes`);
      for (const c of codes) t.ok(typeof responses[c]?.['description'] === 'string', `${m} ${p} ${c}: description`);
      const success = codes.filter((c) => c.startsWith('2'));
      // the MCP paths' GET and DELETE are not offered: 405 (and the errors any request may get)
      const only405 = codes.includes('405') && codes.every((c) => !c.startsWith('2'));
      const isDashboard = p === '/v1/auth/status';
      if (!only405 && !isDashboard) {
        t.ok(success.length > 0, `${m} ${p}: a success response is documented`);
        for (const c of success) {
          const content = responses[c]?.['content'] as Record<string, Json> | undefined;
          // a success with no body (204, an accepted MCP notification) declares no content
          if (!content) t.ok(c === '204' || c === '202', `${m} ${p} ${c}: no body`);
          else for (const [media, x] of Object.entries(content)) t.ok(Object.keys((x['schema'] ?? {}) as Json).length > 0, `${m} ${p} ${c} ${media}: the success body has a schema`);
        }
      }
      const isPublic = Array.isArray(op['security']) && (op['security'] as unknown[]).length === 0;
      if (!isPublic) t.ok(responses['401'], `${m} ${p}: documents 401`);
      if (op['requestBody']) t.ok((((op['requestBody'] as Json)['content'] as Json)['application/json'] as Json)['schema'], `${m} ${p}: request body schema`);
    }
  }
  t.equal(paths()['/v1/agent/account']?.['post']?.['security']?.toString(), '', 'signup needs no key');
});

t.test('every path of the spec endpoint tables appears with its method', async (t) => {
  for (const e of SPEC_ENDPOINTS) t.ok(paths()[e.path]?.[e.method.toLowerCase()], `${e.method} ${e.path}`);
  t.ok(paths()['/mcp']?.['post'], 'POST /mcp');
});
