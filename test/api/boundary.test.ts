/**
 * The API's boundary: every string it accepts is refused with 400 invalid_request naming the
 * field when it holds a NUL byte or a lone surrogate (one rule, walked over the served OpenAPI
 * document, so a new route is covered without a new test); `__proto__` / `constructor` keys are
 * named; errors Node's HTTP parser raises (431, a malformed request line) use the error shape;
 * and a database credential whose host is a socket path is refused at registration.
 */
import net from 'node:net';
import t from 'tap';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

interface Op {
  parameters?: { name: string; in: string; schema?: { type?: string } }[];
  requestBody?: { content?: Record<string, { schema?: { properties?: Record<string, { type?: string | string[] }> } }> };
}
type Doc = { paths: Record<string, Record<string, Op>> };

const NUL = 'a\u0000b';

function errorOf(body: unknown): { code?: string; message?: string; details?: Record<string, unknown> } | undefined {
  return (body as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | undefined)?.error;
}

t.test('a NUL byte in any path parameter, query parameter or body string is 400 invalid_request naming it', async (t) => {
  const a = await signupAgent(srv.url, 'Boundary Org');
  const doc = (await api<Doc>(srv.url, 'GET', '/openapi.json')).body;
  let checked = 0;
  for (const [route, ops] of Object.entries(doc.paths)) {
    if (route === '/mcp' || route === '/v1/mcp') continue; // tool arguments: see test/mcp/mcp.test.ts
    for (const [method, op] of Object.entries(ops)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const params = op.parameters ?? [];
      const pathParams = params.filter((p) => p.in === 'path').map((p) => p.name);
      const fill = (bad: string | undefined): string => route.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(name === bad ? NUL : `x_${name}`));
      const cases: { label: string; path: string; body?: Record<string, unknown>; field: string }[] = [];
      for (const p of pathParams) cases.push({ label: `path ${p}`, path: fill(p), field: p });
      for (const p of params.filter((p) => p.in === 'query')) cases.push({ label: `query ${p.name}`, path: `${fill(undefined)}?${p.name}=${encodeURIComponent(NUL)}`, field: p.name });
      const props = op.requestBody?.content?.['application/json']?.schema?.properties ?? {};
      for (const [name, s] of Object.entries(props)) {
        const types = Array.isArray(s.type) ? s.type : [s.type];
        if (types.includes('string')) cases.push({ label: `body ${name}`, path: fill(undefined), body: { [name]: NUL }, field: name });
        if (types.includes('array')) cases.push({ label: `body ${name}[0]`, path: fill(undefined), body: { [name]: [NUL] }, field: `${name}[0]` });
      }
      for (const c of cases) {
        const r = await api(srv.url, method.toUpperCase(), c.path, { key: a.key, ...(c.body ? { body: c.body } : method === 'post' ? { body: {} } : {}) });
        const e = errorOf(r.body);
        t.equal(r.status, 400, `${method.toUpperCase()} ${route} ${c.label}: ${r.status} ${r.text.slice(0, 200)}`);
        t.equal(e?.code, 'invalid_request', `${method.toUpperCase()} ${route} ${c.label}: code`);
        t.equal(e?.details?.['field'], c.field, `${method.toUpperCase()} ${route} ${c.label}: names the field`);
        checked++;
      }
    }
  }
  t.ok(checked >= 40, `${checked} strings checked across the served document`);
});

t.test('the cases the review found, and object keys and lone surrogates', async (t) => {
  const signup = await api(srv.url, 'POST', '/v1/agent/account', { body: { orgName: `Evil${NUL}`, agentName: 'x', headless: true } });
  t.equal(signup.status, 400);
  t.match(errorOf(signup.body)?.message, /body field "orgName" contains a NUL byte/);
  const a = await signupAgent(srv.url, 'Boundary Two');
  const n = encodeURIComponent(NUL);
  for (const [path, field] of [
    [`/v1/connections/${n}`, 'connection_id'],
    [`/v1/connections?cursor=${n}`, 'cursor'],
    [`/v1/webhooks/deliveries?event=${n}`, 'event'],
    [`/v1/connections/conn_x/audit?cursor=${n}`, 'cursor'],
  ] as const) {
    const r = await api(srv.url, 'GET', path, { key: a.key });
    t.equal(r.status, 400, `${path}: ${r.text}`);
    t.equal(errorOf(r.body)?.details?.['field'], field, `${path} names ${field}`);
    t.match(errorOf(r.body)?.message, /contains a NUL byte/);
  }
  const scope = await api(srv.url, 'POST', '/v1/connections', { key: a.key, body: { target_id: 'postgres', scopes: ['read:orders', `filter:orders.region=eu${'\u0000'}`], ttl_seconds: 60 } });
  t.equal(scope.status, 400);
  t.equal(errorOf(scope.body)?.details?.['field'], 'scopes[1]');
  const key = await api(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: { [`na${'\u0000'}me`]: 'x' } });
  t.equal(key.status, 400);
  t.match(errorOf(key.body)?.message, /has a key that contains a NUL byte/);
  const lone = await api(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, raw: '{"name":"db\\ud800"}' });
  t.equal(lone.status, 400, lone.text);
  t.match(errorOf(lone.body)?.message, /lone UTF-16 surrogate/);
  let deep: unknown = 'a\u0000b';
  for (let i = 0; i < 80; i++) deep = { x: deep };
  const nested = await api(srv.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: a.key, body: { data: deep } });
  t.equal(nested.status, 400, nested.text.slice(0, 200));
  t.match(errorOf(nested.body)?.message, /nested more than 64 levels/);
  const pair = await api(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: { name: 'db \u{1F600}' } });
  t.not(pair.status, 400, 'a surrogate pair (an emoji) is fine');
});

t.test('__proto__ and constructor keys are named, not called invalid JSON', async (t) => {
  const a = await signupAgent(srv.url, 'Proto Org');
  const proto = await api(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, raw: '{"name":"x","__proto__":{"admin":true}}' });
  t.equal(proto.status, 400);
  t.equal(errorOf(proto.body)?.code, 'invalid_request');
  t.match(errorOf(proto.body)?.message, /"__proto__" key/);
  t.notMatch(errorOf(proto.body)?.message, /not valid JSON/);
  const ctor = await api(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, raw: '{"name":"x","constructor":{"prototype":{"admin":true}}}' });
  t.equal(ctor.status, 400);
  t.match(errorOf(ctor.body)?.message, /"constructor" key/);
  const broken = await api(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, raw: '{"name":' });
  t.match(errorOf(broken.body)?.message, /not valid JSON/, 'broken JSON is still called that');
});

/** Sends raw bytes on a real socket and returns what the server answered. */
function rawRequest(url: string, payload: string): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(u.port), u.hostname, () => s.write(payload));
    const chunks: Buffer[] = [];
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', reject);
    s.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    s.setTimeout(5000, () => s.destroy());
  });
}

function parseRaw(raw: string): { status: number; type: string; body: unknown } {
  const [head = '', body = ''] = raw.split('\r\n\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  const type = /content-type: ([^\r\n]+)/i.exec(head)?.[1] ?? '';
  return { status, type, body: JSON.parse(body) as unknown };
}

t.test('431 and a malformed request line answer in the error shape', async (t) => {
  const big = parseRaw(await rawRequest(srv.url, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(40_000)}\r\n\r\n`));
  t.equal(big.status, 431);
  t.match(big.type, /application\/json/);
  t.equal(errorOf(big.body)?.code, 'headers_too_large');
  t.match(errorOf(big.body)?.message, /headers are over the size limit/);
  const garbage = parseRaw(await rawRequest(srv.url, 'NOT A REQUEST\r\n\r\n'));
  t.equal(garbage.status, 400);
  t.equal(errorOf(garbage.body)?.code, 'invalid_request');
  const nulHeader = parseRaw(await rawRequest(srv.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n'));
  t.equal(nulHeader.status, 400, 'a NUL in a header is refused by the parser, in the error shape');
  t.equal(errorOf(nulHeader.body)?.code, 'invalid_request');
  const ok = await api(srv.url, 'GET', '/healthz');
  t.equal(ok.status, 200, 'the server serves on');
});

t.test('top-up of 0 without auto_reload says what 0 is for', async (t) => {
  const a = await signupAgent(srv.url, 'Topup Org');
  const r = await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 0 } });
  t.equal(r.status, 400, r.text);
  t.match(errorOf(r.body)?.message, /auto_reload/);
});

t.test('a database credential whose host is a socket path is refused at registration', async (t) => {
  const a = await signupAgent(srv.url, 'Socket Org');
  for (const secret of ['postgres://u:p@%2Fvar%2Frun%2Fpostgresql/db', 'postgresql://u:p@%2Ftmp:5432/db', 'mysql://u:p@%2Fvar%2Frun%2Fmysqld%2Fmysqld.sock/db']) {
    const kind = secret.startsWith('mysql') ? 'mysql' : 'postgres';
    const r = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: kind, secret } });
    t.equal(r.status, 400, `${kind}: ${r.text}`);
    t.equal(errorOf(r.body)?.details?.['field'], 'secret');
    t.match(errorOf(r.body)?.message, /Unix socket path/);
    t.notMatch(r.text, /var|tmp|mysqld/, 'the secret is not echoed');
  }
});

t.test('a path that does not decode, a non-UTF-8 charset and bytes that are not UTF-8 are refused in the error shape', async (t) => {
  const a = await signupAgent(srv.url, 'Bytes Org');
  const badPath = await fetch(`${srv.url}/v1/connections/%ED%A0%80`, { headers: { authorization: `Bearer ${a.key}` } });
  t.equal(badPath.status, 400);
  const badPathBody = (await badPath.json()) as unknown;
  t.equal(errorOf(badPathBody)?.code, 'invalid_request', 'the contract body, not fastify default');
  t.type((badPathBody as { error?: { request_id?: unknown } }).error?.request_id, 'string');

  const post = (contentType: string, body: Buffer) =>
    fetch(`${srv.url}/v1/connections`, { method: 'POST', headers: { authorization: `Bearer ${a.key}`, 'content-type': contentType }, body });
  const utf16 = await post('application/json; charset=utf-16', Buffer.from(JSON.stringify({ target_id: 'demo-healthcare', scopes: ['read:patients'] }), 'utf16le'));
  t.equal(utf16.status, 415, 'a charset other than UTF-8');
  t.equal(errorOf(await utf16.json())?.code, 'unsupported_media_type');

  const invalid = Buffer.concat([Buffer.from('{"target_id": "demo-healthcare", "scopes": ["read:pat'), Buffer.from([0xff, 0xfe]), Buffer.from('ients"]}')]);
  const notUtf8 = await post('application/json', invalid);
  t.equal(notUtf8.status, 400, 'bytes that are not UTF-8 are not decoded into U+FFFD');
  const e = errorOf(await notUtf8.json());
  t.equal(e?.code, 'invalid_request');
  t.match(e?.message, /not valid UTF-8/);

  const fine = await post('application/json; charset=UTF-8', Buffer.from(JSON.stringify({ target_id: 'demo-healthcare', scopes: ['read:patients'], ttl_seconds: 60 })));
  t.equal(fine.status, 201, 'charset=UTF-8 in any case is fine');
});

t.test('per-address limits count an IPv6 /64 as one client', async (t) => {
  const { clientKey } = await import('../../control-plane/http/rate-limit.js');
  t.equal(clientKey('203.0.113.9'), '203.0.113.9');
  t.equal(clientKey('::ffff:203.0.113.9'), '203.0.113.9', 'IPv4-mapped is the IPv4 address');
  t.equal(clientKey('2001:db8:1:2:aaaa::1'), clientKey('2001:db8:1:2:ffff:ffff:ffff:ffff'), 'one /64');
  t.not(clientKey('2001:db8:1:2::1'), clientKey('2001:db8:1:3::1'), 'another /64');
  t.equal(clientKey('2001:db8::1'), '2001:db8:0:0::/64');
  t.equal(clientKey('::1'), '0:0:0:0::/64');
  t.equal(clientKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
});

t.test('the server enforces a request timeout well under Node default (a trickled body held a socket for 300 s)', async (t) => {
  const { REQUEST_TIMEOUT_MS } = await import('../../control-plane/app.js');
  t.ok(REQUEST_TIMEOUT_MS <= 60_000, `requests must arrive within ${REQUEST_TIMEOUT_MS} ms (Node's default is 300 s)`);
  t.equal(srv.svc.app.server.requestTimeout, REQUEST_TIMEOUT_MS, 'the server enforces it');
});
