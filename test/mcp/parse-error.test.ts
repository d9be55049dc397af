/**
 * A body posted to /mcp that is no JSON text at all is JSON-RPC's parse error (-32700, id null,
 * 400), as the MCP transport answers it: invalid JSON, zero bytes announced as JSON, bytes that are
 * not UTF-8. JSON the route refuses for another reason (a `__proto__` key) and a missing key keep
 * the API's error body.
 */
import t from 'tap';
import { MCP_HEADERS } from '../helpers/mcp.js';
import { signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
let key: string;
t.before(async () => {
  srv = await startServer();
  key = (await signupAgent(srv.url, 'Parse Co', 'parse-bot')).key;
});
t.teardown(() => srv.close());

async function post(body: string | Uint8Array, auth = true): Promise<{ status: number; json: Record<string, unknown> }> {
  const headers: Record<string, string> = { ...MCP_HEADERS, 'content-type': 'application/json' };
  if (auth) headers['authorization'] = `Bearer ${key}`;
  const res = await fetch(`${srv.url}/mcp`, { method: 'POST', headers, body });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

const cases: [string, string | Uint8Array][] = [
  ['invalid JSON', '{"jsonrpc":'],
  ['zero bytes', ''],
  ['bytes that are not UTF-8', new Uint8Array([0x7b, 0xff, 0xfe, 0x7d])],
  ['a lone surrogate half in UTF-8 form', new Uint8Array([0x22, 0xed, 0xa0, 0x80, 0x22])],
];

for (const [what, body] of cases) {
  t.test(what, async (t) => {
    const r = await post(body);
    t.equal(r.status, 400);
    t.match(r.json, { jsonrpc: '2.0', error: { code: -32700, message: /^Parse error/ }, id: null });
  });
}

t.test('JSON refused for another reason keeps the API error body', async (t) => {
  const r = await post('{"__proto__":{"x":1}}');
  t.equal(r.status, 400);
  t.match(r.json, { error: { code: 'invalid_request' } });
  t.notOk('jsonrpc' in r.json);
});

t.test('without a key: 401 with the API error body, whatever the body', async (t) => {
  const r = await post('{"jsonrpc":', false);
  t.equal(r.status, 401);
  t.match(r.json, { error: { code: 'unauthorized' } });
});
