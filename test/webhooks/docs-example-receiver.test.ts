/**
 * The complete receiver of docs/webhooks.md, run as the docs say (its own Node.js process,
 * SVC_WEBHOOK_SECRET set, a control plane with SVC_WEBHOOK_ALLOW_PRIVATE=1), verifies real
 * deliveries: they are recorded as answered 204. The only change made to the text is the port:
 * 0 instead of 3000 (a fixed port may be taken), printed for the test to read.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import type { TapTest } from '../helpers/tap.js';
import { ROOT } from '../helpers/root.js';
import { api, openConnection, signupAgent, startServer, type Agent, type TestServer } from '../helpers/server.js';

const docs = fs.readFileSync(path.join(ROOT, 'docs/webhooks.md'), 'utf8');
const block = /A complete receiver with Node's standard library only:\n\n```js\n([\s\S]*?)\n```/.exec(docs)?.[1] ?? '';

interface Running {
  readonly child: ChildProcess;
  readonly url: string;
  exited: number | null | undefined;
  out: string;
}

/** the docs' receiver with `secret`, on a port of its own */
async function runExample(t: TapTest, secret: string): Promise<Running> {
  t.match(block, /\}\)\.listen\(3000\);$/, 'the docs’ receiver listens on 3000');
  const script = block.replace(/\.listen\(3000\);$/, `.listen(0, '127.0.0.1', function () { console.log('port=' + this.address().port); });`);
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, SVC_WEBHOOK_SECRET: secret }, stdio: ['ignore', 'pipe', 'pipe'] });
  const r: Running = { child, url: '', exited: undefined, out: '' };
  child.on('exit', (code) => (r.exited = code));
  t.teardown(() => void (r.exited === undefined && child.kill()));
  const port = await new Promise<string>((resolve, reject) => {
    const seen = (d: Buffer): void => {
      r.out += d.toString();
      const m = /port=(\d+)/.exec(r.out);
      if (m) resolve(m[1]!);
    };
    child.stdout!.on('data', seen);
    child.stderr!.on('data', seen);
    child.on('exit', () => reject(new Error(`the example exited: ${r.out}`)));
  });
  return Object.assign(r, { url: `http://127.0.0.1:${port}/` });
}

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ env: { SVC_WEBHOOK_ALLOW_PRIVATE: '1', SVC_WEBHOOK_RETRY_DELAYS: '50ms,100ms,150ms,200ms' } });
});
t.teardown(() => srv.close());

interface Attempt { status_code: number | null; error_class: string | null }
async function firstAttempt(agent: Agent, id: string): Promise<Attempt> {
  for (let i = 0; i < 400; i++) {
    const d = await api<{ attempts: Attempt[] }>(srv.url, 'GET', `/v1/webhooks/deliveries/${id}`, { key: agent.key });
    if (d.body.attempts.length > 0) return d.body.attempts[0]!;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no attempt of ${id}`);
}

async function mock(agent: Agent): Promise<string> {
  const r = await api<{ delivery_id: string }>(srv.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body: { scenario_id: 'claim.adjudicated' } });
  if (r.status !== 202) throw new Error(`trigger: ${r.status} ${r.text}`);
  return r.body.delivery_id;
}

t.test('the docs’ receiver accepts real deliveries signed with its secret, and refuses another secret’s', async (t) => {
  const agent = await signupAgent(srv.url, 'Docs Example');
  // a generated secret, as a customer would get it (the receiver is started with it, then set as the URL)
  const gen = await api<{ secret: string }>(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: 'http://127.0.0.1:9/' } });
  t.equal(gen.status, 200);
  const rx = await runExample(t, gen.body.secret);
  t.equal((await api(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: rx.url, secret: gen.body.secret } })).status, 200);
  t.match(await firstAttempt(agent, await mock(agent)), { status_code: 204, error_class: null }, 'a mock event: 204, both signatures verified');
  const conn = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:patients']);
  const list = await api<{ deliveries: { delivery_id: string }[] }>(srv.url, 'GET', `/v1/webhooks/deliveries?event=connection.created&connection_id=${conn}`, { key: agent.key });
  t.match(await firstAttempt(agent, list.body.deliveries[0]!.delivery_id), { status_code: 204 }, 'a connection event: 204');

  const wrong = await runExample(t, `svcsec_${'x'.repeat(43)}`);
  t.equal((await api(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: wrong.url, secret: gen.body.secret } })).status, 200);
  t.match(await firstAttempt(agent, await mock(agent)), { status_code: 401, error_class: 'http_status' }, 'a receiver with another secret answers 401');
});

t.test('a forged request whose signature header is not ASCII is answered 401; the receiver keeps running', async (t) => {
  const agent = await signupAgent(srv.url, 'Docs Example Forged');
  const secret = `svcsec_${'s'.repeat(43)}`;
  const rx = await runExample(t, secret);
  // "sha256=" + 64 bytes 0xE9: as long as a real signature in characters (Node reads header bytes as latin1), not in UTF-8 bytes
  const forged = Buffer.concat([Buffer.from('POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\nx-service-signature: sha256='), Buffer.alloc(64, 0xe9), Buffer.from('\r\n\r\n{}')]);
  const answer = await new Promise<string>((resolve) => {
    let got = '';
    const s = net.connect(Number(new URL(rx.url).port), '127.0.0.1', () => s.end(forged));
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('close', () => resolve(got));
    s.on('error', () => resolve(got));
  });
  t.match(answer, /^HTTP\/1\.1 401 /, 'refused with 401');
  t.equal(rx.exited, undefined, `the receiver did not crash ${rx.out}`);
  t.equal((await api(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: rx.url, secret } })).status, 200);
  t.match(await firstAttempt(agent, await mock(agent)), { status_code: 204 }, 'and still verifies real deliveries');
});
