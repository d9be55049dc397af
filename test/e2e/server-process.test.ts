/**
 * The control plane as a real process, exactly as `npm start` runs it (the compiled
 * dist/control-plane/main.js, brought up to date first): config checked at start, ready on a real
 * port, graceful shutdown on SIGTERM, state kept across a restart.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { api, demoImage, tempDir, CACHE } from '../helpers/server.js';
import { Catalogue } from '../../control-plane/catalogue/index.js';
import { demoImageFile } from '../../control-plane/demo/engine.js';
import { unpackImage } from '../../control-plane/embedded/image-fs.js';
import { CONTROL_PLANE_JS, exitOf, startControlPlane as start } from '../helpers/control-plane-process.js';
import { ensureDist } from '../cli/dist.js';

ensureDist(); // the build `npm ci` runs (incremental: quick when nothing changed)

async function demoReady(url: string): Promise<void> {
  for (;;) {
    const r = await api<{ demo_ready: boolean }>(url, 'GET', '/healthz');
    if (r.body.demo_ready) return;
    await new Promise((res) => setTimeout(res, 100));
  }
}

t.test('invalid configuration stops the start, naming every bad variable', async (t) => {
  const child = spawn(process.execPath, [CONTROL_PLANE_JS], {
    env: { ...process.env, PORT: 'eighty', SVC_WEBHOOK_RETRY_DELAYS: 'soon', LOG_LEVEL: 'loud' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  t.equal(await exitOf(child), 2);
  t.match(err, /PORT/);
  t.match(err, /SVC_WEBHOOK_RETRY_DELAYS/);
  t.match(err, /LOG_LEVEL/);
});

t.test('start, serve, shut down gracefully, and keep state across a restart', async (t) => {
  const dataDir = await tempDir();
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  // a misspelt setting is named in the log with the one it is closest to (never its value)
  const env = { SVC_DATA_DIR: dataDir, PORT: '0', SVC_TUNNEL_PORT: '0', LOG_LEVEL: 'info', SVC_RATE_LIMT: 'typo-value-7' };
  // a damaged saved demo image (a disk error) is built again rather than stopping the demo
  const imageFile = demoImageFile(path.join(dataDir, 'demo'), new Catalogue().datasets);
  await fs.mkdir(path.dirname(imageFile), { recursive: true });
  await fs.writeFile(imageFile, Buffer.from('this is not an image'));
  // and a save a crash cut short long ago left its temporary file, which is cleaned up
  const staleTmp = `${imageFile}.4242.1700000000000.tmp`;
  await fs.writeFile(staleTmp, Buffer.alloc(1024));
  await fs.utimes(staleTmp, new Date(Date.now() - 3_600_000), new Date(Date.now() - 3_600_000));

  const first = await start(env);
  const signup = await api<{ apiKey: string }>(first.url, 'POST', '/v1/agent/account', { body: { orgName: 'Restart Co', agentName: 'bot', headless: true } });
  t.equal(signup.status, 201);
  const key = signup.body.apiKey;
  await demoReady(first.url);
  const conn = await api<{ connectionId: string }>(first.url, 'POST', '/v1/connections', { key, body: { target_id: 'demo-healthcare', scopes: ['read:patients'] } });
  const q = await api(first.url, 'POST', `/v1/connections/${conn.body.connectionId}/query`, { key, body: { sql: 'SELECT count(*) AS n FROM patients' } });
  t.equal(q.status, 200);
  first.child.kill('SIGTERM');
  t.equal(await exitOf(first.child), 0, 'SIGTERM drains and exits 0');
  t.notMatch(first.output(), new RegExp(key.slice(9)), 'the key never appears in the logs');
  t.match(first.output(), /"variable":"SVC_RATE_LIMT","did_you_mean":"SVC_RATE_LIMIT".*does not read/, 'an unknown SVC_ variable is logged with its nearest setting');
  t.notMatch(first.output(), /typo-value-7/, 'without its value');
  t.ok((await fs.readdir(path.join(dataDir, 'demo'))).some((f) => f.endsWith('.tar.gz')), 'the demo image is kept for the next start');
  const rebuilt = await unpackImage(await fs.readFile(imageFile));
  t.ok(rebuilt.entries.some((e) => e.path === 'PG_VERSION'), 'the damaged image was replaced by a sound one');
  t.match(first.output(), /saved demo image .* cannot be used .*building it again/, 'the operator is told why the start takes long');
  // generating shows its progress: started, each pack, ready (a few info lines, no spinner)
  const logged = first
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; url?: string; req?: { url?: string } });
  const progressLines = logged.filter((l) => /^(demo (datasets|pack) |generating the demo)/.test(l.msg));
  const progress = progressLines.map((l) => l.msg);
  t.match(progress[0], /^generating the demo datasets \(first start/, 'said when generating starts');
  const packs = progress.filter((m) => /^demo pack \S+ generated \(\d of 6\)$/.test(m));
  t.same(packs.map((m) => /\((\d) of 6\)/.exec(m)?.[1]), ['1', '2', '3', '4', '5', '6'], 'one line per pack, in order');
  t.ok(progress.indexOf(packs[5] as string) < progress.indexOf('demo datasets ready'), 'then ready');
  t.ok(progressLines.every((l) => l.level === 30), 'at info');
  // /healthz was polled many times above (demoReady): not one probe was logged at info
  t.same(logged.filter((l) => l.req?.url === '/healthz' || l.url === '/healthz'), [], 'health probes are not logged at info');
  t.ok(logged.some((l) => l.req?.url === '/v1/agent/account'), 'other requests still are');
  t.same((await fs.readdir(path.dirname(imageFile))).filter((f) => f.endsWith('.tmp')), [], 'no temporary file is left behind');

  const second = await start(env);
  t.teardown(async () => {
    if (second.child.exitCode === null) {
      second.child.kill('SIGTERM');
      await exitOf(second.child);
    }
  });
  const usage = await api<{ queries: number }>(second.url, 'GET', '/v1/agent/account/usage', { key });
  t.equal(usage.status, 200, 'the key still works');
  t.notMatch(second.output(), /generating the demo datasets/, 'a later start reuses the image and says nothing of generating');
  t.equal(usage.body.queries, 1);
  const v = await api<{ verified: boolean; events_checked: number }>(second.url, 'GET', `/v1/audit/verify?connection_id=${conn.body.connectionId}`, { key });
  t.match(v.body, { verified: true, events_checked: 1 });
  await demoReady(second.url);
  const again = await api(second.url, 'POST', `/v1/connections/${conn.body.connectionId}/query`, { key, body: { sql: 'SELECT count(*) AS n FROM patients' } });
  t.equal(again.status, 200);
});

t.test('SIGTERM with a statement in flight: it finishes, is settled and audited, then the process exits 0', async (t) => {
  const dataDir = await tempDir();
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const env = { SVC_DATA_DIR: dataDir, PORT: '0', SVC_TUNNEL_PORT: '0', LOG_LEVEL: 'info', SVC_QUERY_TIMEOUT_MS: '2000' };
  // not a first start: the demo image is there already (as the shared test image)
  await demoImage();
  await fs.cp(path.join(CACHE, 'demo'), path.join(dataDir, 'demo'), { recursive: true });
  const first = await start(env);
  const key = (await api<{ apiKey: string }>(first.url, 'POST', '/v1/agent/account', { body: { orgName: 'Drain Co', agentName: 'bot' } })).body.apiKey;
  await demoReady(first.url);
  const conn = (await api<{ connectionId: string }>(first.url, 'POST', '/v1/connections', { key, body: { target_id: 'demo-healthcare', scopes: ['read:encounters'] } })).body.connectionId;
  const running = api<{ error?: { code: string } }>(first.url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql: 'SELECT count(*) FROM encounters a, encounters b, encounters c' } });
  await new Promise((r) => setTimeout(r, 300));
  first.child.kill('SIGTERM');
  const r = await running;
  t.equal(r.status, 504, 'the in-flight statement got its answer, not a reset');
  t.equal(await exitOf(first.child), 0);

  const second = await start(env);
  t.teardown(async () => {
    second.child.kill('SIGTERM');
    await exitOf(second.child);
  });
  const usage = await api<{ wallet_held_cents: number; trial: { queries_left: number } }>(second.url, 'GET', '/v1/agent/account/usage', { key });
  t.equal(usage.body.wallet_held_cents, 0, 'nothing left held');
  t.equal(usage.body.trial.queries_left, 99, 'charged once, as a statement that ran to its deadline');
  const v = await api<{ verified: boolean; events_checked: number }>(second.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key });
  t.match(v.body, { verified: true, events_checked: 1 });
});
