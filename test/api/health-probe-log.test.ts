/**
 * GET /healthz is probed every few seconds by load balancers: at LOG_LEVEL=info it writes no log
 * line (fastify's request lines are not written for it), at debug one line per probe; other
 * requests are logged as before. A server-side answer the code chose (503 relay_unavailable) is
 * one warning with its code, without a stack or the message; an internal_error (a failure of ours
 * the code caught and answered) stays an error with its stack.
 */
import { PassThrough } from 'node:stream';
import t from 'tap';
import type { TapTest } from '../helpers/tap.js';
import { generateKeyAndCsr } from '../../pki/index.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

async function linesOf(t: TapTest, level: string): Promise<{ level: number; msg: string; url?: string; req?: { url?: string } }[]> {
  const logs = new PassThrough();
  const lines: string[] = [];
  logs.on('data', (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
  const srv = await startServer({ env: { LOG_LEVEL: level }, logStream: logs });
  try {
    for (let i = 0; i < 3; i++) t.equal((await api(srv.url, 'GET', '/healthz')).status, 200);
    t.equal((await api(srv.url, 'GET', '/v1/connections/packs')).status, 401);
    await new Promise((r) => setTimeout(r, 100)); // log lines are written asynchronously
  } finally {
    await srv.close();
  }
  return lines.map((l) => JSON.parse(l) as { level: number; msg: string; url?: string; req?: { url?: string } });
}

t.test('at info: no line for a probe; other requests are logged', async (t) => {
  const lines = await linesOf(t, 'info');
  t.same(lines.filter((l) => l.req?.url === '/healthz' || l.url === '/healthz'), [], 'no probe line');
  t.ok(lines.some((l) => l.req?.url === '/v1/connections/packs' && l.msg === 'incoming request'), 'another request is');
});

t.test('at debug: one debug line per probe', async (t) => {
  const lines = await linesOf(t, 'debug');
  const probes = lines.filter((l) => l.url === '/healthz');
  t.equal(probes.length, 3);
  t.ok(probes.every((l) => l.level === 20 && l.msg === 'health probe answered'), 'at debug');
  t.same(lines.filter((l) => l.req?.url === '/healthz'), [], "fastify's own request lines are not written for it");
});

/** a server logging at info into `lines` (closed at the end of `t`) */
async function serverWithLogs(t: TapTest): Promise<{ srv: TestServer; lines: string[] }> {
  const logs = new PassThrough();
  const lines: string[] = [];
  logs.on('data', (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
  const srv = await startServer({ env: { LOG_LEVEL: 'info' }, logStream: logs });
  t.teardown(() => srv.close());
  return { srv, lines };
}

t.test('a relay without its tunnel: 503 logged as a warning with its code, no stack, no message', async (t) => {
  const { srv, lines } = await serverWithLogs(t);
  const a = await signupAgent(srv.url);
  const tok = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: {} })).body.token;
  const relay = (await api<{ relay_id: string }>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok, csr_pem: generateKeyAndCsr().csrPem } })).body.relay_id;
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relay}`, 'read:public.orders']);
  const r = await api<{ error: { code: string; request_id: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT * FROM orders' } });
  t.equal(r.status, 503);
  t.equal(r.body.error.code, 'relay_unavailable');
  await new Promise((res) => setTimeout(res, 100)); // log lines are written asynchronously
  const parsed = lines.map((l) => JSON.parse(l) as { level: number; msg: string; reqId?: string; code?: string; err?: unknown });
  const about = parsed.filter((l) => l.reqId === r.body.error.request_id && l.level >= 40);
  t.same(about.map((l) => [l.level, l.msg, l.code]), [[40, 'request answered with a server-side error', 'relay_unavailable']], 'one warning, with the code');
  t.notOk(about.some((l) => l.err !== undefined), 'no error object, so no stack');
  t.notMatch(lines.join('\n'), /has no live tunnel/, 'the message (which may quote a source) is not logged');
});

t.test('an internal_error the code answers (a failure of ours) stays an error, with its stack', async (t) => {
  const { srv, lines } = await serverWithLogs(t);
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  // the connection's target gone from the catalogue: runQuery answers internal_error (500)
  const catalogue = srv.svc.services.catalogue;
  const target = catalogue.target.bind(catalogue);
  catalogue.target = (id: string) => (id === 'demo-healthcare' ? undefined : target(id));
  const r = await api<{ error: { code: string; request_id: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT 1 FROM encounters' } });
  t.equal(r.status, 500);
  t.equal(r.body.error.code, 'internal_error');
  await new Promise((res) => setTimeout(res, 100)); // log lines are written asynchronously
  const parsed = lines.map((l) => JSON.parse(l) as { level: number; msg: string; reqId?: string; err?: { stack?: string } });
  const about = parsed.filter((l) => l.reqId === r.body.error.request_id && l.level >= 40);
  t.same(about.map((l) => [l.level, l.msg]), [[50, 'request failed']], 'one error, not a warning');
  t.match(about[0]?.err?.stack, /ApiError/, 'with its stack');
});
