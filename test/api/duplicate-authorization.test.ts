/**
 * A request with more than one Authorization header is refused 401 (malformed), whichever keys
 * they hold: Node keeps only the first, a proxy in front may check another, so the two would
 * disagree on who is calling. One header still authenticates as before.
 */
import http from 'node:http';
import t from 'tap';
import { signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

function get(path: string, authorization: string[]): Promise<{ status: number; body: string; wwwAuthenticate: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${srv.url}${path}`, { method: 'GET', headers: ['host', new URL(srv.url).host, ...authorization.flatMap((v) => ['authorization', v])] }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), wwwAuthenticate: res.headers['www-authenticate'] }));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('two Authorization headers are 401 malformed, one is fine', async (t) => {
  const a = await signupAgent(srv.url, 'First Org');
  const b = await signupAgent(srv.url, 'Second Org');
  const one = await get('/v1/agent/account/usage', [`Bearer ${a.key}`]);
  t.equal(one.status, 200, one.body);

  for (const [label, headers] of [
    ['two keys of two organizations', [`Bearer ${a.key}`, `Bearer ${b.key}`]],
    ['the same key twice', [`Bearer ${a.key}`, `Bearer ${a.key}`]],
    ['a key, then an unknown one', [`Bearer ${a.key}`, 'Bearer svc_conn_unknown']],
  ] as const) {
    const r = await get('/v1/agent/account/usage', [...headers]);
    t.equal(r.status, 401, `${label}: ${r.body}`);
    const e = (JSON.parse(r.body) as { error?: { code: string; message: string } }).error;
    t.equal(e?.code, 'unauthorized', label);
    t.match(e?.message, /more than one Authorization header/, label);
    t.equal(r.wwwAuthenticate, 'Bearer', `${label}: WWW-Authenticate`);
  }
});
