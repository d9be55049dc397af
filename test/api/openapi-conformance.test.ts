/**
 * The served OpenAPI document is exact: a flow through every operation of GET /openapi.json (its
 * successes and its main errors) against one real server, each real response checked against
 * the document with Ajv (JSON Schema 2020-12, formats checked, `$ref`s resolved through
 * components.schemas): its status must be one the operation declares (`default` does not count),
 * its content type one the status declares, its body valid, its required headers present. An
 * operation of the document the flow never reached fails the test, so a new route needs its
 * coverage here: one `call(...)` per response, keyed by the operation as the document names it.
 *
 * Also here, because they are responses like any other: requests without a body. A POST whose
 * body is optional works with no body (and with `Content-Type: application/json` and zero bytes);
 * one whose body is required says which fields are missing; whitespace, `null`, an array and a
 * Content-Length with no body behind it are refused with the error body.
 */
import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { generateKeyAndCsr } from '../../pki/index.js';
import { startServer, type TestServer } from '../helpers/server.js';
import type { TapTest } from '../helpers/tap.js';

type Json = Record<string, unknown>;
type Operation = { security?: unknown[]; responses: Record<string, { content?: Record<string, Json>; headers?: Record<string, { required?: boolean }> }> };

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const COMPONENTS_ID = 'urn:svc:openapi:components';

/** `#/components/schemas/X` → the same schema registered under COMPONENTS_ID (its `$defs`). */
function rebase(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rebase);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Json = {};
  for (const [k, v] of Object.entries(schema)) {
    out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/') ? `${COMPONENTS_ID}#/$defs/${v.slice('#/components/schemas/'.length)}` : rebase(v);
  }
  return out;
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** the JSON body, when there is one */
  readonly body: Json;
}

interface CallOptions {
  /** path parameters of the operation's template */
  readonly params?: Record<string, string>;
  /** appended as it is, e.g. `?kind=demo` */
  readonly query?: string;
  readonly key?: string;
  /** sent as JSON (content-type application/json) */
  readonly body?: unknown;
  /** sent as it is, with only the headers given */
  readonly raw?: string;
  readonly headers?: Record<string, string>;
}

class Conformance {
  private readonly ajv = new Ajv2020({ strict: true, allErrors: true });
  private readonly validators = new Map<string, ValidateFunction>();
  /** operation → statuses it answered */
  readonly seen = new Map<string, Set<number>>();

  /** the subtest the assertions go to (see use()) */
  private t: TapTest;

  constructor(
    t: TapTest,
    private readonly base: string,
    readonly doc: { paths: Record<string, Record<string, Operation>>; components: { schemas: Json } },
  ) {
    this.t = t;
    addFormats.default(this.ajv);
    this.ajv.addSchema({ $id: COMPONENTS_ID, $defs: rebase(doc.components.schemas) as Json });
  }

  /** Assertions go to `t` from now on (each subtest calls it first). */
  use(t: TapTest): this {
    this.t = t;
    return this;
  }

  /** Every operation of the document, as "METHOD /path". */
  operations(): string[] {
    return Object.entries(this.doc.paths).flatMap(([p, item]) => Object.keys(item).filter((m) => METHODS.includes(m)).map((m) => `${m.toUpperCase()} ${p}`));
  }

  operation(op: string): Operation {
    const [method, path] = op.split(' ') as [string, string];
    const o = this.doc.paths[path]?.[method.toLowerCase()];
    if (!o) throw new Error(`${op} is not an operation of the document`);
    return o;
  }

  isPublic(op: string): boolean {
    const s = this.operation(op).security;
    return Array.isArray(s) && s.length === 0;
  }

  private validator(op: string, status: number, media: string, schema: unknown): ValidateFunction {
    const id = `${op} ${status} ${media}`;
    let v = this.validators.get(id);
    if (!v) {
      v = this.ajv.compile(rebase(schema) as Json);
      this.validators.set(id, v);
    }
    return v;
  }

  /** Checks one real response against the document; returns the problems (none: it conforms). */
  problems(op: string, status: number, contentType: string | null, text: string, headers: (name: string) => string | null): string[] {
    const declared = this.operation(op).responses[String(status)];
    if (!declared) return [`status ${status} is not declared (declared: ${Object.keys(this.operation(op).responses).join(', ')})`];
    const out: string[] = [];
    for (const [name, h] of Object.entries(declared.headers ?? {})) if (h.required && headers(name) === null) out.push(`header ${name} is declared required and missing`);
    const content = declared.content;
    if (!content) return text === '' ? out : [...out, `no body is declared, got ${JSON.stringify(text.slice(0, 80))}`];
    const media = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
    const m = content[media];
    if (!m) return [...out, `content type ${JSON.stringify(contentType)} is not declared (declared: ${Object.keys(content).join(', ')})`];
    const check = (schema: unknown, value: unknown, where: string): void => {
      const v = this.validator(op, status, `${media}${where}`, schema);
      if (!v(value)) out.push(...(v.errors ?? []).slice(0, 5).map((e) => `${where}${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`));
    };
    try {
      if (media === 'application/x-ndjson') {
        const lines = text.split('\n').filter((l) => l !== '');
        if (lines.length === 0) out.push('an empty stream');
        lines.forEach((l, i) => check(m['x-item-schema'], JSON.parse(l) as unknown, `line ${i + 1} `));
      } else check(m['schema'], JSON.parse(text) as unknown, '');
    } catch (err) {
      out.push(`the body does not parse: ${(err as Error).message}`);
    }
    return out;
  }

  /** Records and checks a response obtained some other way (a raw socket). */
  record(op: string, status: number, contentType: string | null, text: string, headers: (name: string) => string | null, label: string): void {
    this.seen.set(op, (this.seen.get(op) ?? new Set()).add(status));
    this.t.same(this.problems(op, status, contentType, text, headers), [], `${label} → ${status} conforms to the document`);
  }

  /**
   * Sends one request to the operation `op` ("METHOD /path/{param}" as the document names it),
   * checks the response against the document and that its status is `expect`.
   */
  async call(op: string, expect: number, o: CallOptions = {}, label = ''): Promise<Answer> {
    const [method, template] = op.split(' ') as [string, string];
    this.operation(op);
    const path = template.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(o.params?.[name] ?? 'x'));
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (o.key) headers['authorization'] = `Bearer ${o.key}`;
    let body: string | undefined = o.raw;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(this.base + path + (o.query ?? ''), { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    let parsed: Json = {};
    try {
      parsed = text ? (JSON.parse(text) as Json) : {};
    } catch {
      // not JSON: x-ndjson, or reported by problems()
    }
    const name = `${op}${label ? ` (${label})` : ''}`;
    this.record(op, res.status, res.headers.get('content-type'), text, (h) => res.headers.get(h), name);
    if (res.status !== expect) this.t.fail(`${name}: expected ${expect}, got ${res.status} ${text.slice(0, 300)}`);
    return { status: res.status, headers: res.headers, text, body: parsed };
  }
}

/**
 * One HTTP/1.1 request written on a socket as it is (then, with `end`, the client's side closed);
 * the first response, read until its Content-Length is complete or the server closes (at most 5 s).
 */
async function rawRequest(port: number, request: string, end = false): Promise<{ status: number; headers: Map<string, string>; text: string }> {
  const data = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      got += d;
      const head = got.indexOf('\r\n\r\n');
      const len = /\r\ncontent-length: *(\d+)/i.exec(got.slice(0, head))?.[1];
      if (head >= 0 && len !== undefined && Buffer.byteLength(got.slice(head + 4)) >= Number(len)) socket.end();
    });
    socket.on('end', () => resolve(got));
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer in 5 s')));
    socket.write(request);
    if (end) socket.end();
  });
  const head = data.indexOf('\r\n\r\n');
  const lines = data.slice(0, head).split('\r\n');
  const headers = new Map<string, string>();
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    headers.set(l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim());
  }
  const length = Number(headers.get('content-length') ?? Number.NaN);
  const rest = Buffer.from(data.slice(head + 4));
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0] ?? '')?.[1]), headers, text: (Number.isNaN(length) ? rest : rest.subarray(0, length)).toString('utf8') };
}

const MCP_ACCEPT = { accept: 'application/json, text/event-stream' };

let srv: TestServer;
let receiver: http.Server;
let receiverUrl: string;
let c: Conformance;
const keys: Record<'main' | 'other' | 'broke' | 'mock' | 'refused', string> = { main: '', other: '', broke: '', mock: '', refused: '' };

t.before(async () => {
  // a webhook receiver that takes everything
  receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as net.AddressInfo).port}/hook`;
  srv = await startServer({
    // the receiver is on loopback; one pending mock event per organization (429 past it); four refused
    // statements a minute per key (a burst of two); 30 signups a minute from one address (429 past it, at the end)
    env: { SVC_WEBHOOK_ALLOW_PRIVATE: '1', SVC_WEBHOOK_MOCK_PENDING_MAX: '1', SVC_REFUSED_STATEMENTS_PER_MINUTE: '4', SVC_SIGNUP_RATE_LIMIT: '30' },
    demoWorkers: 1,
  });
  // the demo engine warms up while the operations that do not query run
  srv.svc.demoReady.catch(() => undefined);
});
t.teardown(async () => {
  await srv.close();
  await new Promise((resolve) => receiver.close(resolve));
});

t.test('the document', async (t) => {
  const res = await fetch(`${srv.url}/openapi.json`);
  const doc = (await res.json()) as Conformance['doc'];
  c = new Conformance(t, srv.url, doc);
  // the document describes its own answer
  await c.call('GET /openapi.json', 200);
  await c.call('GET /openapi.json', 400, { query: '?x=%00' }, 'a NUL byte in the query');
  t.ok(c.operations().length > 40, `${c.operations().length} operations`);
});

t.test('accounts and billing', async (t) => {
  c.use(t);
  const signup = await c.call('POST /v1/agent/account', 201, { body: { orgName: 'Conformance Co', agentName: 'conformance-bot', headless: true } });
  keys.main = String(signup.body['apiKey']);
  for (const [name, org] of [
    ['other', 'Other Co'],
    ['broke', 'Broke Co'],
    ['mock', 'Mock Co'],
    ['refused', 'Refused Co'],
  ] as const) {
    keys[name] = String((await c.call('POST /v1/agent/account', 201, { body: { orgName: org, agentName: 'bot' } })).body['apiKey']);
  }
  await c.call('POST /v1/agent/account', 400, { body: { orgName: 'x', agentName: 'y', extra: 1 } }, 'an unknown field');
  await c.call('POST /v1/agent/account', 415, { raw: 'orgName=x', headers: { 'content-type': 'text/plain' } }, 'a text body');
  await c.call('GET /v1/agent/account/usage', 200, { key: keys.main });
  await c.call('GET /v1/agent/account/usage', 401, { key: 'svc_conn_not-a-key' }, 'an unknown key');
  await c.call('GET /v1/agent/billing/config', 200, { key: keys.main });
  await c.call('POST /v1/agent/topup', 200, { key: keys.main, body: { amount_cents: 500, auto_reload: { threshold_cents: 100, amount_cents: 500 } } });
  await c.call('POST /v1/agent/topup', 400, { key: keys.main, body: { amount_cents: 5 } }, 'under the minimum');
  t.pass('accounts covered');
});

t.test('credentials', async (t) => {
  c.use(t);
  const k = keys.main;
  await c.call('GET /v1/connections/credentials/kinds', 200, { key: k });
  await c.call('GET /v1/connections/credentials', 200, { key: k }, 'none yet');
  await c.call('POST /v1/connections/credentials', 201, { key: k, body: { connector_kind: 'stripe', secret: 'rk_test_conformance1234' } });
  await c.call('POST /v1/connections/credentials', 201, { key: k, body: { connector_kind: 'stripe', secret: 'rk_test_conformance5678' } }, 'replaced');
  await c.call('POST /v1/connections/credentials', 400, { key: k, body: { connector_kind: 'stripe', secret: 'sk_test_full_secret_key' } }, 'a full secret key');
  await c.call('POST /v1/connections/credentials', 400, { key: k, body: { connector_kind: 'nope', secret: 'x' } }, 'an unknown kind');
  await c.call('GET /v1/connections/credentials', 200, { key: k });
  await c.call('DELETE /v1/connections/credentials/{connector_kind}', 200, { key: k, params: { connector_kind: 'stripe' } });
  await c.call('DELETE /v1/connections/credentials/{connector_kind}', 404, { key: k, params: { connector_kind: 'stripe' } }, 'none left');
});

t.test('MCP', async (t) => {
  c.use(t);
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'conformance', version: '1' } } };
  for (const path of ['/mcp', '/v1/mcp']) {
    const post = `POST ${path}`;
    await c.call(post, 200, { key: keys.main, headers: MCP_ACCEPT, body: init }, 'initialize');
    await c.call(post, 200, { key: keys.main, headers: MCP_ACCEPT, body: { jsonrpc: '2.0', id: 'l', method: 'tools/list' } }, 'tools/list');
    await c.call(post, 200, { key: keys.main, headers: MCP_ACCEPT, body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'get_usage', arguments: {} } } }, 'a tool call');
    await c.call(post, 200, { key: keys.main, headers: MCP_ACCEPT, body: { jsonrpc: '2.0', id: 3, method: 'no/such/method' } }, 'an unknown method: a JSON-RPC error');
    await c.call(post, 200, { key: keys.main, headers: MCP_ACCEPT, body: [{ jsonrpc: '2.0', id: 4, method: 'tools/list' }, { jsonrpc: '2.0', id: 5, method: 'ping' }] }, 'a batch');
    await c.call(post, 202, { key: keys.main, headers: MCP_ACCEPT, body: { jsonrpc: '2.0', method: 'notifications/initialized' } }, 'a notification');
    await c.call(post, 400, { key: keys.main, headers: MCP_ACCEPT, body: { hello: 'world' } }, 'not JSON-RPC');
    const notJson = await c.call(post, 400, { key: keys.main, headers: { ...MCP_ACCEPT, 'content-type': 'application/json' }, raw: '{"jsonrpc":' }, 'not JSON');
    // JSON-RPC's parse error, as the MCP transport answers it (it was the API's error body)
    t.match(notJson.body, { jsonrpc: '2.0', error: { code: -32700, message: /^Parse error/ }, id: null }, `${path}: not JSON is -32700`);
    await c.call(post, 406, { key: keys.main, headers: { accept: 'application/json' }, body: init }, 'without text/event-stream in Accept');
    await c.call(post, 415, { key: keys.main, headers: { ...MCP_ACCEPT, 'content-type': 'text/plain' }, raw: 'hi' }, 'a text body');
    await c.call(post, 415, { key: keys.main, headers: MCP_ACCEPT }, 'no body, no content type');
    await c.call(`GET ${path}`, 405, { key: keys.main });
    await c.call(`DELETE ${path}`, 405, { key: keys.main });
  }
});

const ids: { conn: string; revoked: string; relay: string; delivery: string } = { conn: '', revoked: '', relay: '', delivery: '' };

t.test('relays', async (t) => {
  c.use(t);
  const k = keys.main;
  const a = generateKeyAndCsr();
  const b = generateKeyAndCsr();
  const token = String((await c.call('POST /v1/relays/enroll-token', 201, { key: k, body: { ttl_seconds: 600, name: 'conformance-relay' } })).body['token']);
  await c.call('POST /v1/relays/enroll-token', 400, { key: k, body: { ttl_seconds: 1 } }, 'a ttl under the minimum');
  const reg = 'POST /v1/relays/register';
  await c.call(reg, 400, { body: { enroll_token: token, csr_pem: 'not a CSR' } }, 'not a CSR (the token stays usable)');
  await c.call(reg, 401, { body: { enroll_token: 'svc_enroll_unknown', csr_pem: a.csrPem } }, 'an unknown token');
  const relay = await c.call(reg, 201, { body: { enroll_token: token, csr_pem: a.csrPem } });
  ids.relay = String(relay.body['relay_id']);
  await c.call(reg, 409, { body: { enroll_token: token, csr_pem: a.csrPem } }, 'the token used');
  await c.call('GET /v1/relays', 200, { key: k });
  const params = { relay_id: ids.relay };
  await c.call('GET /v1/relays/{relay_id}', 200, { key: k, params });
  await c.call('GET /v1/relays/{relay_id}', 404, { key: keys.other, params }, "another organization's");
  await c.call('POST /v1/relays/{relay_id}/renew', 200, { key: k, params, body: { csr_pem: a.csrPem } }, 'the same key');
  await c.call('POST /v1/relays/{relay_id}/renew', 400, { key: k, params, body: { csr_pem: '' } }, 'an empty CSR');
  await c.call('POST /v1/relays/{relay_id}/renew', 404, { key: k, params: { relay_id: 'rly_nope' }, body: { csr_pem: a.csrPem } });
  await c.call('POST /v1/relays/{relay_id}/rotate-cert', 400, { key: k, params, body: { csr_pem: a.csrPem } }, 'a key used before');
  await c.call('POST /v1/relays/{relay_id}/rotate-cert', 200, { key: k, params, body: { csr_pem: b.csrPem } }, 'a new key');
  await c.call('POST /v1/relays/{relay_id}/rotate-cert', 404, { key: k, params: { relay_id: 'rly_nope' }, body: { csr_pem: b.csrPem } });

  // a connection through the relay, which has no tunnel: 503 relay_unavailable
  const viaRelay = await c.call('POST /v1/connections', 201, { key: k, body: { target_id: 'postgres-relay', scopes: [`relay:${ids.relay}`, 'read:public.orders'] } }, 'through a relay');
  await c.call('POST /v1/connections/{connection_id}/query', 503, { key: k, params: { connection_id: String(viaRelay.body['connectionId']) }, body: { sql: 'SELECT 1 FROM orders' } }, 'the relay offline');
  await c.call('GET /v1/connections/{connection_id}/schema', 503, { key: k, params: { connection_id: String(viaRelay.body['connectionId']) } }, 'the relay offline');

  await c.call('DELETE /v1/relays/{relay_id}', 200, { key: k, params });
  await c.call('DELETE /v1/relays/{relay_id}', 404, { key: keys.other, params }, "another organization's");
  await c.call('POST /v1/relays/{relay_id}/renew', 409, { key: k, params, body: { csr_pem: a.csrPem } }, 'a deleted relay');
  await c.call('GET /v1/relays', 200, { key: k }, 'with a revoked relay');
});

t.test('catalogue, connections, queries and audit', async (t) => {
  c.use(t);
  const k = keys.main;
  await c.call('GET /v1/connections/targets', 200, { key: k });
  await c.call('GET /v1/connections/targets', 200, { key: k, query: '?kind=live' }, 'live targets');
  const kind = await c.call('GET /v1/connections/targets', 400, { key: k, query: '?kind=other' }, 'an unknown kind');
  t.equal((kind.body['error'] as Json)['message'], 'query parameter "kind" must be one of "demo", "live"', 'the message names the values it takes');
  t.same((kind.body['error'] as Json)['details'], { field: 'kind', in: 'query', problem: 'must be one of "demo", "live"', allowed: ['demo', 'live'] });
  await c.call('GET /v1/connections/targets/{target_id}', 200, { key: k, params: { target_id: 'demo-healthcare' } });
  await c.call('GET /v1/connections/targets/{target_id}', 200, { key: k, params: { target_id: 'postgres-relay' } }, 'a live target');
  await c.call('GET /v1/connections/targets/{target_id}', 404, { key: k, params: { target_id: 'nope' } });
  await c.call('GET /v1/connections/packs', 200, { key: k });

  const conn = await c.call('POST /v1/connections', 201, { key: k, body: { target_id: 'demo-healthcare', scopes: ['read:encounters', 'period:2024-Q1'], tier: 'container', ttl_seconds: 600 } });
  ids.conn = String(conn.body['connectionId']);
  await c.call('POST /v1/connections', 400, { key: k, body: { target_id: 'demo-healthcare', scopes: ['write:encounters'] } }, 'a scope outside the grammar');
  await c.call('POST /v1/connections', 400, { key: k, body: { target_id: 'stripe', scopes: ['read:charges'] } }, 'no credential registered');
  await c.call('POST /v1/connections', 404, { key: k, body: { target_id: 'nope', scopes: ['read:x'] } }, 'an unknown target');
  await c.call('GET /v1/connections', 200, { key: k });
  await c.call('GET /v1/connections', 200, { key: k, query: '?status=active&limit=1' }, 'a page');
  await c.call('GET /v1/connections', 400, { key: k, query: '?limit=many' }, 'a bad limit');
  const status = await c.call('GET /v1/connections', 400, { key: k, query: '?status=open' }, 'an unknown status');
  t.same(((status.body['error'] as Json)['details'] as Json)['allowed'], ['active', 'expired', 'revoked'], 'every status it takes');
  await c.call('GET /v1/connections/{connection_id}', 200, { key: k, params: { connection_id: ids.conn } });
  await c.call('GET /v1/connections/{connection_id}', 404, { key: keys.other, params: { connection_id: ids.conn } }, "another organization's");

  const q = 'POST /v1/connections/{connection_id}/query';
  const params = { connection_id: ids.conn };
  await c.call(q, 200, { key: k, params, body: { sql: 'SELECT class_code, count(*) AS n FROM encounters GROUP BY 1 ORDER BY 1' } });
  await c.call(q, 200, { key: k, params, body: { sql: 'SELECT * FROM encounters LIMIT 3' } }, 'whole rows');
  // refused statements, with a key of their own: its budget (two here) is spent by the third
  const refusedConn = await c.call('POST /v1/connections', 201, { key: keys.refused, body: { target_id: 'demo-healthcare', scopes: ['read:encounters'] } });
  const rp = { connection_id: String(refusedConn.body['connectionId']) };
  await c.call(q, 400, { key: keys.refused, params: rp, body: { sql: 'SELEC 1' } }, 'SQL that does not parse');
  await c.call(q, 403, { key: keys.refused, params: rp, body: { sql: 'SELECT * FROM patients' } }, 'a table outside the scopes');
  await c.call(q, 429, { key: keys.refused, params: rp, body: { sql: 'SELECT * FROM claims' } }, 'the refused-statement budget spent');
  await c.call(q, 404, { key: keys.other, params, body: { sql: 'SELECT 1' } }, "another organization's");
  await c.call(q, 400, { key: k, params, body: {} }, 'no sql');

  // the trial of "broke" ends (its clock moved, as days passing would): a query neither the trial nor the empty wallet pays
  const broke = await c.call('POST /v1/connections', 201, { key: keys.broke, body: { target_id: 'demo-healthcare', scopes: ['read:*'] } });
  const brokeOrg = (await srv.svc.store.query<{ org_id: string }>('SELECT org_id FROM connections WHERE id = $1', [String(broke.body['connectionId'])]))[0]?.org_id;
  await srv.svc.store.query("UPDATE orgs SET trial_expires_at = now() - interval '1 day' WHERE id = $1", [brokeOrg]);
  await c.call(q, 402, { key: keys.broke, params: { connection_id: String(broke.body['connectionId']) }, body: { sql: 'SELECT 1' } }, 'the trial over and no money');

  const schema = 'GET /v1/connections/{connection_id}/schema';
  await c.call(schema, 200, { key: k, params });
  await c.call(schema, 404, { key: keys.other, params }, "another organization's");

  const audit = 'GET /v1/connections/{connection_id}/audit';
  await c.call(audit, 200, { key: k, params });
  await c.call(audit, 200, { key: k, params, query: '?format=jsonl' }, 'JSONL');
  await c.call(audit, 200, { key: k, params, headers: { accept: 'application/x-ndjson' } }, 'Accept: application/x-ndjson');
  await c.call(audit, 200, { key: k, params, query: '?after_seq=1&limit=1' }, 'a page');
  await c.call(audit, 400, { key: k, params, query: '?limit=-1' }, 'a bad limit');
  await c.call(audit, 404, { key: k, params: { connection_id: 'conn_nope' } });
  await c.call('GET /v1/audit/verify', 200, { key: k, query: `?connection_id=${ids.conn}` });
  await c.call('GET /v1/audit/verify', 400, { key: k }, 'no connection_id');
  await c.call('GET /v1/audit/verify', 404, { key: k, query: '?connection_id=conn_nope' });

  const revoked = await c.call('POST /v1/connections', 201, { key: k, body: { target_id: 'demo-healthcare', scopes: ['read:claims'] } });
  ids.revoked = String(revoked.body['connectionId']);
  await c.call('POST /v1/connections/{connection_id}/revoke', 200, { key: k, params: { connection_id: ids.revoked } });
  await c.call('POST /v1/connections/{connection_id}/revoke', 200, { key: k, params: { connection_id: ids.revoked } }, 'again: idempotent');
  await c.call('POST /v1/connections/{connection_id}/revoke', 404, { key: k, params: { connection_id: 'conn_nope' } });
  await c.call(q, 410, { key: k, params: { connection_id: ids.revoked }, body: { sql: 'SELECT 1' } }, 'a revoked connection');
  await c.call(schema, 410, { key: k, params: { connection_id: ids.revoked } }, 'a revoked connection');
  await c.call('GET /v1/audit/verify', 200, { key: k, query: `?connection_id=${ids.revoked}` }, 'a revoked chain');
});

t.test('webhooks', async (t) => {
  c.use(t);
  const k = keys.main;
  await c.call('GET /v1/agent/webhook', 200, { key: k }, 'none set');
  await c.call('POST /v1/agent/webhook', 200, { key: k, body: { url: receiverUrl } }, 'a generated secret');
  await c.call('POST /v1/agent/webhook', 200, { key: k, body: { url: receiverUrl, secret: `svcsec_${'a'.repeat(32)}`, connection_id: ids.conn } }, 'an override with its own secret');
  await c.call('POST /v1/agent/webhook', 400, { key: k, body: { url: 'ftp://example.com/hook' } }, 'a URL that is not http');
  await c.call('POST /v1/agent/webhook', 404, { key: k, body: { url: receiverUrl, connection_id: 'conn_nope' } }, 'an unknown connection');
  await c.call('GET /v1/agent/webhook', 200, { key: k });

  await c.call('GET /v1/webhooks/scenarios', 200, { key: k });
  const mock = await c.call('POST /v1/webhooks/trigger-mock-event', 202, { key: k }, 'no body: the default scenario');
  ids.delivery = String(mock.body['delivery_id']);
  await c.call('POST /v1/webhooks/trigger-mock-event', 400, { key: k, body: { scenario_id: 'nope' } }, 'an unknown scenario');
  await c.call('POST /v1/webhooks/trigger-mock-event', 404, { key: k, body: { connection_id: 'conn_nope' } }, 'an unknown connection');
  // one pending mock event per organization here: "mock" has a receiver that never answers, so its first stays pending
  await c.call('POST /v1/agent/webhook', 200, { key: keys.mock, body: { url: 'http://127.0.0.1:9/never' } }, 'a receiver that refuses connections');
  await c.call('POST /v1/webhooks/trigger-mock-event', 202, { key: keys.mock, body: { scenario_id: 'claim.submitted' } }, 'a scenario');
  await c.call('POST /v1/webhooks/trigger-mock-event', 429, { key: keys.mock, body: {} }, 'one too many pending');

  // the main organization's mock event arrives
  let delivered = false;
  for (let i = 0; i < 100 && !delivered; i++) {
    const d = await c.call('GET /v1/webhooks/deliveries/{delivery_id}', 200, { key: k, params: { delivery_id: ids.delivery } }, i === 0 ? '' : 'polled');
    if (d.status !== 200) break;
    delivered = d.body['status'] === 'delivered';
    if (!delivered) await new Promise((r) => setTimeout(r, 50));
  }
  t.ok(delivered, 'the mock event was delivered');
  await c.call('GET /v1/webhooks/deliveries/{delivery_id}', 404, { key: k, params: { delivery_id: 'dlv_nope' } });
  await c.call('GET /v1/webhooks/deliveries', 200, { key: k });
  await c.call('GET /v1/webhooks/deliveries', 200, { key: keys.mock, query: '?status=pending&limit=5' }, 'pending ones');
  await c.call('GET /v1/webhooks/deliveries', 200, { key: k, query: `?connection_id=${ids.conn}` }, 'of a connection');
  await c.call('GET /v1/webhooks/deliveries', 400, { key: k, query: '?status=lost' }, 'an unknown status');
  await c.call('GET /v1/webhooks/deliveries', 404, { key: k, query: '?connection_id=conn_nope' }, 'an unknown connection');
  await c.call('POST /v1/webhooks/deliveries/{delivery_id}/replay', 202, { key: k, params: { delivery_id: ids.delivery } });
  await c.call('POST /v1/webhooks/deliveries/{delivery_id}/replay', 404, { key: k, params: { delivery_id: 'dlv_nope' } });

  await c.call('GET /v1/sandbox/webhook-reliability', 200, { key: k }, 'off');
  await c.call('PATCH /v1/sandbox/webhook-reliability', 200, { key: k, body: { mode: 'rate_limit', retry_after_seconds: 3 } });
  await c.call('GET /v1/sandbox/webhook-reliability', 200, { key: k });
  await c.call('PATCH /v1/sandbox/webhook-reliability', 200, { key: k, body: { mode: 'off' } }, 'off again');
  await c.call('PATCH /v1/sandbox/webhook-reliability', 400, { key: k, body: { mode: 'flaky' } }, 'an unknown mode');

  await c.call('DELETE /v1/agent/webhook', 204, { key: k, query: `?connection_id=${ids.conn}` }, 'the override');
  await c.call('DELETE /v1/agent/webhook', 204, { key: k }, 'the default');
  await c.call('DELETE /v1/agent/webhook', 404, { key: k }, 'none left');
  await c.call('DELETE /v1/agent/webhook', 400, { key: k, query: '?connection_id=' }, 'an empty connection_id');
});

t.test('the dashboard paths', async (t) => {
  c.use(t);
  await c.call('GET /v1/auth/status', 501);
});

t.test('requests without a body', async (t) => {
  c.use(t);
  const k = keys.main;
  const enroll = 'POST /v1/relays/enroll-token';
  // optional bodies: nothing at all (like curl -X POST), or JSON with zero bytes, is {}
  await c.call(enroll, 201, { key: k }, 'no body, no content type');
  await c.call(enroll, 201, { key: k, headers: { 'content-type': 'application/json' }, raw: '' }, 'content-type JSON, zero bytes');
  await c.call(enroll, 201, { key: k, headers: { 'content-type': 'application/json; charset=utf-8' }, raw: '' }, 'with a charset, zero bytes');
  await c.call(enroll, 201, { key: k, body: {} }, '{}');
  // zero bytes under another content type is no body either (curl -X POST -d '' sends a form type)
  await c.call(enroll, 201, { key: k, headers: { 'content-type': 'application/x-www-form-urlencoded' }, raw: '' }, 'a form content type, zero bytes');
  await c.call(enroll, 201, { key: k, headers: { 'content-type': 'text/plain' }, raw: '' }, 'text/plain, zero bytes');
  await c.call(enroll, 415, { key: k, headers: { 'content-type': 'text/plain' }, raw: '{}' }, 'text/plain with bytes');
  const formSignup = await c.call('POST /v1/agent/account', 400, { headers: { 'content-type': 'application/x-www-form-urlencoded' }, raw: '' }, 'a form content type, zero bytes');
  t.same(((formSignup.body['error'] as Json)['details'] as Json)['missing'], ['orgName', 'agentName'], 'a required body left out names its fields whatever the content type');
  await c.call('POST /mcp', 415, { key: k, headers: { 'content-type': 'text/plain', accept: 'application/json, text/event-stream' }, raw: '' }, 'a JSON-RPC message is never optional');
  await c.call('POST /v1/webhooks/trigger-mock-event', 202, { key: keys.other, headers: { 'content-type': 'application/json' }, raw: '' }, 'zero bytes: no body, the default scenario (no receiver: queued all the same)');
  // routes that take no body at all do not mind an empty JSON one
  const revoke = 'POST /v1/connections/{connection_id}/revoke';
  await c.call(revoke, 200, { key: k, params: { connection_id: ids.revoked }, headers: { 'content-type': 'application/json' }, raw: '' }, 'content-type JSON, zero bytes');
  await c.call(revoke, 200, { key: k, params: { connection_id: ids.revoked }, body: {} }, '{}');
  // … but a field they would ignore is refused like any unknown field, and so is a body that is not an object
  const extra = await c.call(revoke, 400, { key: k, params: { connection_id: ids.revoked }, body: { reason: 'done' } }, 'a field it takes no notice of');
  t.equal((extra.body['error'] as Json)['message'], 'body field "reason" is not a known field: this operation takes no body (leave it out)');
  t.same((extra.body['error'] as Json)['details'], { field: 'reason', in: 'body', problem: 'is not a known field' });
  const arr = await c.call('POST /v1/webhooks/deliveries/{delivery_id}/replay', 400, { key: k, params: { delivery_id: ids.delivery }, headers: { 'content-type': 'application/json' }, raw: '[]' }, 'an array');
  t.equal((arr.body['error'] as Json)['message'], 'this operation takes no body, not an array: leave it out');
  // the connection belongs in the query: in the body it must not remove the organization's default instead
  await c.call('POST /v1/agent/webhook', 200, { key: k, body: { url: 'http://127.0.0.1:9/kept' } }, 'a default to keep');
  await c.call('DELETE /v1/agent/webhook', 400, { key: k, body: { connection_id: ids.conn } }, 'connection_id in the body');
  const kept = await c.call('GET /v1/agent/webhook', 200, { key: k }, 'the default is still set');
  t.match(kept.body['default'], { url: 'http://127.0.0.1:9/kept' });
  await c.call('DELETE /v1/agent/webhook', 204, { key: k }, 'removed once asked the documented way');
  // not operations of the API: their own answers, whatever the body
  const post = (path: string) => fetch(srv.url + path, { method: 'POST', headers: { authorization: `Bearer ${k}`, 'content-type': 'application/json' }, body: '{"user":"x"}' });
  t.equal((await post('/v1/auth/login')).status, 501, 'a dashboard path with a body is still 501 dashboard_only');
  t.equal((await post('/v1/no/such/route')).status, 404, 'an unknown route with a body is still 404');

  // hostile bodies on an optional-body route
  const ws = await c.call(enroll, 400, { key: k, headers: { 'content-type': 'application/json' }, raw: ' \n\t ' }, 'whitespace only');
  t.match((ws.body['error'] as Json)['message'], /not valid JSON/);
  for (const [raw, kind] of [
    ['null', 'null'],
    ['[]', 'an array'],
    ['[{"name":"x"}]', 'an array'],
    ['42', 'a number'],
    ['"x"', 'a string'],
  ] as const) {
    const r = await c.call(enroll, 400, { key: k, headers: { 'content-type': 'application/json' }, raw }, `the body ${raw}`);
    const e = r.body['error'] as Json;
    t.equal(e['message'], `the body must be a JSON object, not ${kind} (or leave the body out)`, `${raw}: says what the body must be`);
    t.same(e['details'], { field: 'body', in: 'body', problem: 'must be a JSON object' });
  }

  // required bodies: which fields are missing
  const signup = 'POST /v1/agent/account';
  for (const [label, o] of [
    ['no body, no content type', {}],
    ['content-type JSON, zero bytes', { headers: { 'content-type': 'application/json' }, raw: '' }],
  ] as const) {
    const r = await c.call(signup, 400, o, label);
    const e = r.body['error'] as Json;
    t.equal(e['code'], 'invalid_request');
    t.equal(e['message'], 'no body was sent; send a JSON object with the required fields "orgName", "agentName" (Content-Type: application/json)', `${label}: names the missing fields`);
    t.same(e['details'], { field: 'orgName', in: 'body', problem: 'is required', missing: ['orgName', 'agentName'] });
  }
  const empty = await c.call(signup, 400, { body: {} }, '{}');
  t.equal((empty.body['error'] as Json)['message'], 'body fields "orgName", "agentName" are required');
  const one = await c.call(signup, 400, { body: { orgName: 'x' } }, 'one field missing');
  t.equal((one.body['error'] as Json)['message'], 'body field "agentName" is required');
  t.same(((one.body['error'] as Json)['details'] as Json)['missing'], ['agentName']);
  const nul = await c.call(signup, 400, { headers: { 'content-type': 'application/json' }, raw: 'null' }, 'null');
  t.equal((nul.body['error'] as Json)['message'], 'the body must be a JSON object, not null');
  const query = await c.call('POST /v1/connections/{connection_id}/query', 400, { key: k, params: { connection_id: ids.conn } }, 'no body');
  t.match((query.body['error'] as Json)['message'], /"sql"/);

  // a Content-Length with nothing behind it: over the limit, refused at once (413) without waiting for
  // the bytes; with no content type, refused as a body of no known type (415)
  const port = Number(new URL(srv.url).port);
  for (const [contentType, status] of [
    ['content-type: application/json\r\n', 413],
    ['', 415],
  ] as const) {
    const label = `content-length 99999999999, no body${contentType ? '' : ', no content type'}`;
    const r = await rawRequest(port, `POST /v1/relays/enroll-token HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${k}\r\n${contentType}content-length: 99999999999\r\n\r\n`);
    c.record(enroll, r.status, r.headers.get('content-type') ?? null, r.text, (h) => r.headers.get(h.toLowerCase()) ?? null, label);
    t.equal(r.status, status, `${label}: ${status}`);
  }
  // under the limit, fewer bytes than announced and the client done sending: an answer, not a wait
  const short = await rawRequest(port, `POST /v1/relays/enroll-token HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${k}\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n{}`, true);
  c.record(enroll, short.status, short.headers.get('content-type') ?? null, short.text, (h) => short.headers.get(h.toLowerCase()) ?? null, 'content-length 10, 2 bytes, then the client done');
  t.equal(short.status, 400, 'fewer bytes than announced: 400');
});

t.test('every operation refuses a missing or unknown key (401) and a NUL byte in the query (400)', async (t) => {
  c.use(t);
  for (const op of c.operations()) {
    const declared = c.operation(op).responses;
    if (!c.isPublic(op)) {
      await c.call(op, 401, {}, 'no key');
      await c.call(op, 401, { key: 'svc_conn_unknown' }, 'an unknown key');
    }
    if (declared['400'] && !op.includes('/mcp')) await c.call(op, 400, { key: keys.other, query: '?q=%00' }, 'a NUL byte in the query');
  }
});

t.test('signups past the per-address limit: 429 with Retry-After', async (t) => {
  c.use(t);
  let status = 0;
  for (let i = 0; i < 40 && status !== 429; i++) {
    const r = await fetch(`${srv.url}/v1/agent/account`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ orgName: `Burst ${i}`, agentName: 'bot' }) });
    status = r.status;
    c.record('POST /v1/agent/account', status, r.headers.get('content-type'), await r.text(), (h) => r.headers.get(h), `signup ${i + 1} of a burst`);
  }
  t.equal(status, 429, 'the burst ends in 429');
});

t.test('every operation of the document was exercised: its success, 401 where a key is needed', async (t) => {
  c.use(t);
  const missing: string[] = [];
  for (const op of c.operations()) {
    const seen = c.seen.get(op) ?? new Set<number>();
    const declared = Object.keys(c.operation(op).responses).filter((s) => s !== 'default').map(Number);
    const successes = declared.filter((s) => s < 300);
    if (seen.size === 0) missing.push(`${op}: never called`);
    else if (successes.length > 0 && !successes.some((s) => seen.has(s))) missing.push(`${op}: no success (${successes.join(', ')}) seen`);
    if (!c.isPublic(op) && !seen.has(401)) missing.push(`${op}: 401 not seen`);
    const unseen = declared.filter((s) => !seen.has(s));
    if (unseen.length) t.comment(`${op}: declared, not reached here: ${unseen.join(', ')}`);
  }
  t.same(missing, [], 'every operation of the document is covered by this flow');
});
