/**
 * GET /healthz is probed every few seconds by load balancers: at LOG_LEVEL=info it writes no log
 * line (fastify's request lines are not written for it), at debug one line per probe; other
 * requests are logged as before.
 */
import { PassThrough } from 'node:stream';
import t from 'tap';
import type { TapTest } from '../helpers/tap.js';
import { api, startServer } from '../helpers/server.js';

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
