/**
 * Review: two owners of one SVC_DATA_DIR/demo/workers. A WorkerDirs in this process stands in for
 * another replica: (a) replicas in containers are usually the same pid (1, 7...) so their copies
 * get the same `w-<pid>-<n>` names; (b) the sweep of `base-*` has no owner check at all.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { WorkerDirs } from '../../control-plane/demo/engine.js';
import { tempDir } from '../helpers/server.js';
import { exists, smallImage } from './helpers.js';

t.test('another owner with the same pid never removes or overwrites a live worker copy', async (t) => {
  const root = path.join(await tempDir(), 'workers');
  t.teardown(() => fs.rm(path.dirname(root), { recursive: true, force: true }));
  const image = await smallImage('a');
  const mine = new WorkerDirs(root);
  const other = new WorkerDirs(root); // the other replica (also pid N in its own pid namespace)
  const a = await mine.start(image);
  const b = await other.start(image); // its first copy is also w-<pid>-1: rm -r of a's live data dir, then cp over it
  t.teardown(() => b.terminate());
  await a.close(); // a's copy "goes when its worker ends": it is b's data dir
  t.ok(await exists(path.join(root, `w-${process.pid}-1`, 'PG_VERSION')), 'worker b, still running, keeps its data directory');
});

t.test('a replica with another image does not sweep the base this replica still starts workers from', async (t) => {
  const root = path.join(await tempDir(), 'workers');
  t.teardown(() => fs.rm(path.dirname(root), { recursive: true, force: true }));
  const [imgA, imgB] = [await smallImage('a'), await smallImage('b')];
  const mine = new WorkerDirs(root);
  const first = await mine.start(imgA);
  await first.close(); // (closed only so the two owners' copy names do not collide, see above)
  const other = new WorkerDirs(root); // rolling deploy: the next version's replica, another demo image
  const theirs = await other.start(imgB); // its sweep removes base-<hash of imgA>
  t.teardown(() => theirs.terminate());
  // this replica replaces a worker stopped at its deadline, or grows under load
  let replacement;
  try {
    replacement = await mine.start(imgA);
  } catch (err) {
    t.fail(`the replacement worker could not start: ${(err as Error).message}`);
    return;
  }
  t.same(await replacement.query('SELECT tag FROM marker'), [{ tag: 'a' }]);
  await replacement.terminate();
});
