/**
 * Review: `exists(base/PG_VERSION)` is taken as "the base is complete". A base is made whole by a
 * rename, but it is unmade by a recursive rm (WorkerDirs.extract's `fs.rm(base)` when two
 * processes extract at once, or another replica's sweep) that a kill -9 can interrupt, and
 * PGlite runs with fsync off, so after a power loss the renamed base may hold PG_VERSION and
 * little else. Such a base is used forever: every worker copy fails, in this process and after
 * every restart.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { WorkerDirs } from '../../control-plane/demo/engine.js';
import { tempDir } from '../helpers/server.js';
import { smallImage } from './helpers.js';

t.test('a base left incomplete (PG_VERSION without the rest) is extracted again, not used', async (t) => {
  const root = path.join(await tempDir(), 'workers');
  t.teardown(() => fs.rm(path.dirname(root), { recursive: true, force: true }));
  const image = await smallImage('a');
  const key = createHash('sha256').update(image).digest('hex').slice(0, 16);
  const base = path.join(root, `base-${key}`);
  await fs.mkdir(path.join(base, 'base'), { recursive: true });
  await fs.writeFile(path.join(base, 'PG_VERSION'), '18\n'); // what an interrupted `rm -r` of the base left
  const dirs = new WorkerDirs(root);
  let w;
  try {
    w = await dirs.start(image);
  } catch (err) {
    t.fail(`no worker can start: ${(err as Error).message}`);
    return;
  }
  t.same(await w.query('SELECT tag FROM marker'), [{ tag: 'a' }]);
  await w.terminate();
});
