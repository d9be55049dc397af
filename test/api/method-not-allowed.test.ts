/**
 * docs/api.md, "Errors": `405 method_not_allowed` when the path exists, but not with this method,
 * with an `Allow` header listing the methods it takes (RFC 9110) and the usual error body; a path
 * that does not exist stays `404 not_found`. Walked over the served OpenAPI document, so a new
 * route is covered without a new test; HEAD on a GET route still answers as fastify does.
 */
import t from 'tap';
import { Value } from 'typebox/value';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

type Doc = { paths: Record<string, Record<string, unknown>>; components: { schemas: Record<string, unknown> } };
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
/** the MCP paths list GET and DELETE only to answer them 405 themselves */
const MCP = new Set(['/mcp', '/v1/mcp']);

interface ErrorBody {
  error?: { code?: string; message?: string; details?: Record<string, unknown>; request_id?: string };
}

/** the methods the document lists for a path (POST only on the MCP paths), HEAD where it has GET */
function methodsOf(path: string, ops: Record<string, unknown>): string[] {
  if (MCP.has(path)) return ['POST'];
  const methods = Object.keys(ops).map((m) => m.toUpperCase()).filter((m) => METHODS.includes(m));
  return methods.includes('GET') ? [...methods, 'HEAD'] : methods;
}

/**
 * What a URL is taken with: the methods of every documented path it matches, a parameter matching
 * any segment (so `/v1/relays/register`, a POST, is also `/v1/relays/{relay_id}`, a GET and a DELETE).
 */
function allowOf(doc: Doc, url: string): string[] {
  const allowed = new Set<string>();
  for (const [path, ops] of Object.entries(doc.paths)) {
    if (path === '/v1/auth/status') continue;
    const pattern = new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (pattern.test(url)) for (const m of methodsOf(path, ops)) allowed.add(m);
  }
  return [...allowed].sort();
}

t.test('every path of the document, asked with a method it does not take: 405 with Allow and the error body', async (t) => {
  const doc = (await api<Doc>(srv.url, 'GET', '/openapi.json')).body;
  const a = await signupAgent(srv.url, 'Methods Org');
  let checked = 0;
  for (const path of Object.keys(doc.paths)) {
    if (path === '/v1/auth/status') continue; // the dashboard's paths answer 501 to every method: below
    const url = path.replace(/\{([^}]+)\}/g, (_m, name: string) => `x_${name}`);
    const allowed = allowOf(doc, url);
    const allow = allowed.join(', ');
    for (const method of METHODS) {
      // taken, or answered 405 by the MCP routes themselves (below)
      if (allowed.includes(method) || (MCP.has(path) && method !== 'PUT' && method !== 'PATCH')) continue;
      for (const key of [a.key, undefined]) {
        const r = await api<ErrorBody>(srv.url, method, url, key ? { key } : {});
        const label = `${method} ${url}${key ? '' : ' (no key)'}`;
        t.equal(r.status, 405, `${label}: ${r.status} ${r.text.slice(0, 200)}`);
        t.equal(r.headers.get('allow'), allow, `${label}: Allow`);
        t.equal(r.body.error?.code, 'method_not_allowed', `${label}: code`);
        t.same(r.body.error?.details, { allow: allowed }, `${label}: details.allow`);
        t.ok(Value.Check(doc.components.schemas['Error'] as never, r.body), `${label}: the documented Error body`);
        checked++;
      }
    }
  }
  t.ok(checked >= 60, `${checked} requests checked`);
});

t.test('the Error schema documents details.allow', async (t) => {
  const doc = (await api<Doc>(srv.url, 'GET', '/openapi.json')).body;
  const details = JSON.stringify(doc.components.schemas['Error']);
  t.match(details, /"allow":\{"type":"array"/);
});

t.test('the defects reported against docs/api.md', async (t) => {
  const a = await signupAgent(srv.url, 'Reported Org');
  const cases: [string, string, string][] = [
    ['PUT', '/v1/connections', 'GET, HEAD, POST'],
    ['DELETE', '/v1/connections/anything', 'GET, HEAD'],
    ['GET', '/v1/agent/topup', 'POST'],
    ['PATCH', '/v1/agent/webhook', 'DELETE, GET, HEAD, POST'],
    ['GET', '/v1/connections/anything/query', 'POST'],
    ['PUT', '/v1/agent/account', 'POST'],
    ['PUT', '/v1/connections?limit=5', 'GET, HEAD, POST'],
    ['PUT', '/mcp', 'POST'],
    ['PATCH', '/v1/mcp', 'POST'],
    // a literal path also matched by a parameter: the methods of both
    ['PUT', '/v1/relays/register', 'DELETE, GET, HEAD, POST'],
  ];
  for (const [method, url, allow] of cases) {
    const r = await api<ErrorBody>(srv.url, method, url, { key: a.key });
    t.equal(r.status, 405, `${method} ${url}: ${r.text.slice(0, 200)}`);
    t.equal(r.headers.get('allow'), allow, `${method} ${url}: Allow`);
    t.equal(r.body.error?.code, 'method_not_allowed');
    t.match(r.body.error?.message, new RegExp(`${method} is not offered on ${url.split('?')[0]}; it takes ${allow}`));
    t.match(r.body.error?.request_id, /^req_/);
  }
  // the MCP paths' own 405s are unchanged
  const get = await api<ErrorBody>(srv.url, 'GET', '/mcp', { key: a.key });
  t.equal(get.status, 405);
  t.equal(get.headers.get('allow'), 'POST');
});

t.test('a path that does not exist stays 404 not_found, whatever the method', async (t) => {
  const a = await signupAgent(srv.url, 'Missing Org');
  for (const [method, url] of [
    ['GET', '/v1/nope'],
    ['PUT', '/v1/nope'],
    ['GET', '/v1/connections/a/b/c'],
    ['DELETE', '/v1/connections/a/query/more'],
    ['GET', '/v1/agent/topup/x'],
    ['POST', '/v2/connections'],
  ] as const) {
    const r = await api<ErrorBody>(srv.url, method, url, { key: a.key });
    t.equal(r.status, 404, `${method} ${url}: ${r.text.slice(0, 200)}`);
    t.equal(r.headers.get('allow'), null, `${method} ${url}: no Allow`);
    t.equal(r.body.error?.code, 'not_found');
  }
});

t.test('HEAD and OPTIONS', async (t) => {
  const a = await signupAgent(srv.url, 'Head Org');
  // HEAD on a GET route: answered by fastify as the GET, without a body (as before)
  const head = await api(srv.url, 'HEAD', '/v1/connections/targets', { key: a.key });
  t.equal(head.status, 200);
  t.equal(head.text, '');
  const headNoKey = await api(srv.url, 'HEAD', '/v1/connections');
  t.equal(headNoKey.status, 401, 'HEAD needs the key as GET does');
  // HEAD on a path without GET: 405, no body
  const headPost = await api(srv.url, 'HEAD', '/v1/agent/topup', { key: a.key });
  t.equal(headPost.status, 405);
  t.equal(headPost.headers.get('allow'), 'POST');
  t.equal(headPost.text, '');
  // OPTIONS is not offered: 405 saying what is
  const options = await api<ErrorBody>(srv.url, 'OPTIONS', '/v1/connections', { key: a.key });
  t.equal(options.status, 405);
  t.equal(options.headers.get('allow'), 'GET, HEAD, POST');
  t.equal(options.body.error?.code, 'method_not_allowed');
  t.equal((await api(srv.url, 'OPTIONS', '/v1/nope')).status, 404);
});

t.test('the dashboard paths still answer 501 to every method they did', async (t) => {
  for (const method of METHODS) {
    const r = await api<ErrorBody>(srv.url, method, '/v1/auth/status');
    t.equal(r.status, 501, method);
    t.equal(r.body.error?.code, 'dashboard_only');
  }
});
