/**
 * A first start killed while it writes the generated master key does not wedge the data dir.
 * The key was written in place (the file created, then written): a SIGKILL between the two left
 * an empty `master.key` (a kill at the file's appearance did so in 5 of 6 tries with the data dir
 * on a disk; on the tmpfs the tests run on, the window is too short to hit reliably), and every
 * later start failed with `the master key must be 32 bytes` (naming no file) until it was
 * removed by hand. The key now reaches its name whole; an empty one left by an earlier version
 * (nothing can have been sealed with it) is replaced.
 */
import { watch } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { loadMasterKey, masterKeyFrom } from '../../control-plane/secrets/index.js';
import { CACHE, demoImage, storeTemplateDir, tempDir } from '../helpers/server.js';
import { exitOf, startControlPlane } from '../helpers/control-plane-process.js';
import { ensureDist, ROOT } from '../cli/dist.js';
import { spawn } from 'node:child_process';

t.test('an empty master.key (a start killed between creating and writing it) is replaced by a generated key', async (t) => {
  const dir = await tempDir();
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  await fs.writeFile(path.join(dir, 'master.key'), '', { mode: 0o600 });
  const [a, b] = await Promise.all([loadMasterKey(undefined, dir), loadMasterKey(undefined, dir)]);
  t.equal(a.id, b.id, 'concurrent first uses agree on one key');
  const text = await fs.readFile(path.join(dir, 'master.key'), 'utf8');
  t.equal(masterKeyFrom(text).id, a.id, 'the key is in the file');
  t.equal((await fs.stat(path.join(dir, 'master.key'))).mode & 0o777, 0o600);
  t.same((await fs.readdir(dir)).sort(), ['master.key'], 'nothing else is left beside it');
});

t.test('SIGKILL the first start as master.key appears: the next start comes up', async (t) => {
  ensureDist();
  await demoImage();
  // one round: each is two control-plane starts, and on the tests' tmpfs a kill rarely lands in
  // the old window anyway (the first test holds the file the window left)
  for (let round = 1; round <= 1; round++) {
    const dataDir = await tempDir('svc-mkey-');
    t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
    await fs.cp(path.join(CACHE, 'demo'), path.join(dataDir, 'demo'), { recursive: true });
    await fs.cp(await storeTemplateDir(), path.join(dataDir, 'state'), { recursive: true });
    const env = { PATH: process.env['PATH'], SVC_DATA_DIR: dataDir, PORT: '0', SVC_TUNNEL_PORT: '0', LOG_LEVEL: 'silent' };
    const child = spawn(process.execPath, [path.join(ROOT, 'dist/control-plane/main.js')], { env, stdio: 'ignore' });
    const exited = exitOf(child);
    const watcher = watch(dataDir, (_event, name) => {
      if (name === 'master.key') child.kill('SIGKILL');
    });
    await exited;
    watcher.close();
    t.equal(child.signalCode, 'SIGKILL', `round ${round}: killed as the key appeared`);
    const left = await fs.readFile(path.join(dataDir, 'master.key'), 'utf8').catch(() => undefined);
    t.ok(left === undefined || /^[0-9a-f]{64}\n$/.test(left), `round ${round}: master.key is absent or a whole key (${left?.length ?? 'absent'})`);

    const next = await startControlPlane({ SVC_DATA_DIR: dataDir, PORT: '0', SVC_TUNNEL_PORT: '0', LOG_LEVEL: 'info' }).catch((err: Error) => err);
    if (next instanceof Error) {
      t.fail(`round ${round}: the next start failed (master.key: ${(await fs.stat(path.join(dataDir, 'master.key'))).size} bytes)\n${next.message.slice(-400)}`);
      continue;
    }
    t.pass(`round ${round}: the next start comes up`);
    next.child.kill('SIGKILL');
    await exitOf(next.child);
  }
});
