/**
 * `npm start` as an operator runs it (a process manager sending SIGTERM to npm): the control plane
 * gets the signal and shuts down gracefully, and is not left running without its parent (npm's
 * `sh -c` does not pass signals on; the start script execs node).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { demoImage, tempDir, CACHE } from '../helpers/server.js';
import { exitOf } from '../helpers/control-plane-process.js';
import { ensureDist, ROOT } from '../cli/dist.js';

ensureDist();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

t.test('SIGTERM to npm start reaches the control plane, which shuts down and exits', async (t) => {
  const dataDir = await tempDir();
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  // not a first start: the demo image is there already (as the shared test image)
  await demoImage();
  await fs.cp(path.join(CACHE, 'demo'), path.join(dataDir, 'demo'), { recursive: true });
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_DATA_DIR: dataDir, PORT: '0', SVC_TUNNEL_PORT: '0', LOG_LEVEL: 'info' };
  delete env['MALLOC_ARENA_MAX']; // npm start's own default is what is checked
  const npm = spawn('npm', ['start'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  npm.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  npm.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  // the control plane's pid, from its ready line
  const pid = await new Promise<number>((resolve, reject) => {
    const onData = (): void => {
      const line = out.split('\n').find((l) => l.includes('"svc control plane ready"'));
      const m = line ? /"pid":(\d+)/.exec(line) : null;
      if (m?.[1]) {
        npm.stdout?.off('data', onData);
        resolve(Number(m[1]));
      }
    };
    npm.stdout?.on('data', onData);
    npm.once('exit', (code) => reject(new Error(`npm start exited ${code} before ready:\n${out}`)));
  });
  t.teardown(() => {
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  t.not(pid, npm.pid, 'the control plane runs in its own process');
  // the default start's memory settings (docs/benchmarks.md, "Memory of the default start")
  const environ = (await fs.readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');
  t.ok(environ.includes('MALLOC_ARENA_MAX=2'), 'npm start runs the control plane with two malloc arenas');
  const argv = (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
  t.ok(argv.includes('--max-semi-space-size=4'), `npm start caps V8's young generation (${argv.join(' ')})`);
  npm.kill('SIGTERM');
  await exitOf(npm);
  const until = Date.now() + 20_000;
  while (alive(pid) && Date.now() < until) await new Promise((res) => setTimeout(res, 100));
  t.notOk(alive(pid), `the control plane (pid ${pid}) exited after npm start got SIGTERM`);
  t.match(out, /"signal":"SIGTERM","msg":"shutting down"/, 'it shut down gracefully on the signal');
  // the operator sees the store being opened before anything else is done (README.md)
  const messages = out.split('\n').flatMap((l) => /"msg":"([^"]*)"/.exec(l)?.[1] ?? []);
  t.match(messages[0], /^opening the store \(embedded/, 'the first line says the store is being opened');
  t.ok(messages.indexOf('store open') > 0 && messages.indexOf('store open') < messages.indexOf('svc control plane ready'), 'then that it is open, before ready');
});
