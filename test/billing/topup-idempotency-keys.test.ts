/**
 * POST /v1/agent/topup's Idempotency-Key, at its edges: one request is one digest whatever the
 * order of auto_reload's fields; a key is the same on every channel (no leading or trailing
 * space, which HTTP strips and the hosted MCP server's in-process calls did not); a key sent
 * twice in one request is refused rather than read as the two joined; a bad key is named as a
 * header; keys older than a day are forgotten by the store's clock even if the organization never
 * sends another, found by an index on their age.
 */
import net from 'node:net';
import t from 'tap';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { hostedMcpClient } from '../helpers/mcp.js';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import { sweepTopupKeys } from '../../control-plane/billing/index.js';

type Err = { error?: { code: string; message: string; details?: Record<string, unknown> } };
const usage = async (srv: TestServer, key: string): Promise<number> => (await api<{ wallet_balance_cents: number }>(srv.url, 'GET', '/v1/agent/account/usage', { key })).body.wallet_balance_cents;

/** one POST /v1/agent/topup written by hand, so a header can be sent twice */
function rawTopup(srv: TestServer, key: string, extra: string[], body: string): Promise<{ status: number; text: string }> {
  const u = new URL(srv.url);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(u.port), u.hostname);
    let data = '';
    sock.on('data', (d: Buffer) => (data += d.toString('utf8')));
    sock.on('end', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1]), text: data.slice(data.indexOf('\r\n\r\n') + 4) }));
    sock.on('error', reject);
    const head = ['POST /v1/agent/topup HTTP/1.1', `host: ${u.host}`, `authorization: Bearer ${key}`, 'content-type: application/json', `content-length: ${Buffer.byteLength(body)}`, 'connection: close', ...extra];
    sock.write(head.join('\r\n') + '\r\n\r\n' + body);
  });
}

t.test('Idempotency-Key edges (embedded store)', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());

  // auto_reload's fields in another order are the same request: replayed, not 409
  const a = await signupAgent(srv.url);
  const send = (raw: string) => api<Err>(srv.url, 'POST', '/v1/agent/topup', { key: a.key, raw, headers: { 'idempotency-key': 'order-1' } });
  t.equal((await send('{"amount_cents":500,"auto_reload":{"threshold_cents":100,"amount_cents":500}}')).status, 200);
  const reordered = await send('{"auto_reload":{"amount_cents":500,"threshold_cents":100},"amount_cents":500}');
  t.equal(reordered.status, 200, `auto_reload's fields in another order: ${reordered.text}`);
  t.equal(reordered.headers.get('idempotent-replayed'), 'true');
  t.equal(await usage(srv, a.key), 500, 'credited once');

  // a key with a space at either end: HTTP strips it, so it is refused everywhere rather than
  // being one key through the hosted MCP server and another through svc or the API
  const b = await signupAgent(srv.url, 'B');
  const client = await hostedMcpClient(srv.url, b.key, 'svc-test-topup-keys');
  t.teardown(() => client.close());
  for (const k of [' mk', 'mk ', '   ']) {
    const r = (await client.callTool({ name: 'top_up_wallet', arguments: { amount_cents: 400, idempotency_key: k } })) as CallToolResult;
    t.ok(r.isError, `top_up_wallet with idempotency_key ${JSON.stringify(k)} is refused`);
  }
  t.equal(await usage(srv, b.key), 0, 'nothing credited');
  const inner = await srv.svc.app.inject({ method: 'POST', url: '/v1/agent/topup', headers: { authorization: `Bearer ${b.key}`, 'content-type': 'application/json', 'idempotency-key': ' mk ' }, payload: '{"amount_cents":400}' });
  t.equal(inner.statusCode, 400, 'an in-process request with a padded key is refused');
  // the same key and body through the hosted MCP server and then over HTTP: credited once
  const viaMcp = (await client.callTool({ name: 'top_up_wallet', arguments: { amount_cents: 400, idempotency_key: 'mk' } })) as CallToolResult;
  t.notOk(viaMcp.isError, JSON.stringify(viaMcp.content));
  const viaHttp = await api(srv.url, 'POST', '/v1/agent/topup', { key: b.key, body: { amount_cents: 400 }, headers: { 'idempotency-key': 'mk' } });
  t.equal(viaHttp.headers.get('idempotent-replayed'), 'true');
  t.equal(await usage(srv, b.key), 400, 'credited once');

  // the header twice: refused, not read as "dup, dup" (a retry sending it once would credit again)
  const c = await signupAgent(srv.url, 'C');
  const twice = await rawTopup(srv, c.key, ['idempotency-key: dup', 'idempotency-key: dup'], '{"amount_cents":300}');
  t.equal(twice.status, 400, twice.text);
  t.equal((JSON.parse(twice.text) as Err).error?.details?.['field'], 'Idempotency-Key');
  t.equal(await usage(srv, c.key), 0, 'nothing credited');
  t.equal((await rawTopup(srv, c.key, ['idempotency-key: dup'], '{"amount_cents":300}')).status, 200, 'once: a top-up');

  // a bad key is named as the header it is
  const bad = await api<Err>(srv.url, 'POST', '/v1/agent/topup', { key: c.key, body: { amount_cents: 300 }, headers: { 'idempotency-key': 'x'.repeat(256) } });
  t.equal(bad.status, 400);
  t.equal(bad.body.error?.details?.['in'], 'header');
  t.match(bad.body.error?.message ?? '', /^header "idempotency-key"/);

  // the document names the header a replay is answered with, and the key's rule
  const doc = (await api<{ paths: Record<string, Record<string, { parameters?: { name: string; in: string; schema: { pattern?: string } }[]; responses: Record<string, { headers?: Record<string, unknown> }> }>> }>(srv.url, 'GET', '/openapi.json')).body;
  const op = doc.paths['/v1/agent/topup']?.['post'];
  t.ok(op?.responses['200']?.headers?.['Idempotent-Replayed'], 'the 200 declares Idempotent-Replayed');
  const param = op?.parameters?.find((p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key');
  t.ok(param && !new RegExp(param.schema.pattern ?? '').test(' k'), 'the header parameter refuses a padded key');

  // keys older than a day go, by the store's clock, whether or not their organization comes back
  await srv.svc.store.query("UPDATE topup_requests SET created_at = now() - interval '24 hours 1 second' WHERE org_id = $1", [a.orgId]);
  t.equal(await sweepTopupKeys(srv.svc.store), 1, "the organization's expired key is swept");
  const left = await srv.svc.store.query<{ n: number }>('SELECT count(*)::int AS n FROM topup_requests');
  t.equal(left[0]?.n, 2, 'keys of the last day stay');
  // the sweep reads keys by age across organizations through an index (migration 17), not the whole table
  const plan = await srv.svc.store.tx(async (sql) => {
    await sql.query('SET LOCAL enable_seqscan = off');
    return sql.query<{ 'QUERY PLAN': string }>("EXPLAIN DELETE FROM topup_requests WHERE created_at < now() - make_interval(hours => 24)");
  });
  t.match(plan.map((r) => r['QUERY PLAN']).join('\n'), /topup_requests_created_at/, 'the sweep can use the created_at index');
});
