/**
 * Review: the sweep keeps every `w-<pid>-*` / `tmp-<pid>-*` whose pid is this process's own. In a
 * container the control plane is the same pid (1, or another small number) at every restart, so
 * what a killed previous run left (its worker copies, ~150 MB each, and a half-made extraction)
 * is never removed: it piles up with each kill -9 / OOM kill / node crash.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { WorkerDirs } from '../../control-plane/demo/engine.js';
import { tempDir } from '../helpers/server.js';
import { entries, smallImage } from './helpers.js';

t.test('what a killed previous run with the same pid left is swept at the next start', async (t) => {
  const root = path.join(await tempDir(), 'workers');
  t.teardown(() => fs.rm(path.dirname(root), { recursive: true, force: true }));
  const image = await smallImage('a');
  const key = createHash('sha256').update(image).digest('hex').slice(0, 16);
  // the previous run (same pid in its container) was killed: worker copies 5..7 and an extraction
  for (const name of [`w-${process.pid}-5`, `w-${process.pid}-6`, `w-${process.pid}-7`, `tmp-${process.pid}-${key}-1700000000000`]) {
    await fs.mkdir(path.join(root, name, 'base'), { recursive: true });
    await fs.writeFile(path.join(root, name, 'base', 'big'), Buffer.alloc(1024));
  }
  const dirs = new WorkerDirs(root);
  const w = await dirs.start(image);
  t.teardown(() => w.terminate());
  const left = (await entries(root)).filter((n) => n !== `w-${process.pid}-1` && !n.startsWith('base-'));
  t.same(left, [], 'nothing of the killed run is left');
});
