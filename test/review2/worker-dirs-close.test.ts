/**
 * Review: WorkerDirs.close() is said to stop an extraction in progress and remove it. The engine
 * doing the extraction is only recorded (`extracting`) once EmbeddedPostgres.start() has
 * returned, i.e. after the image was untarred and the database started: close() during that (most
 * of the extraction's time) stops nothing, and returns while the thread goes on writing.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { WorkerDirs } from '../../control-plane/demo/engine.js';
import { demoImage, tempDir } from '../helpers/server.js';
import { entries } from './helpers.js';

t.test('when close() resolves, the extraction has stopped and left nothing', async (t) => {
  const root = path.join(await tempDir(), 'workers');
  t.teardown(() => fs.rm(path.dirname(root), { recursive: true, force: true }));
  const dirs = new WorkerDirs(root);
  const starting = dirs.start(await demoImage());
  starting.catch(() => undefined);
  for (let i = 0; i < 400 && !(await entries(root)).some((n) => n.startsWith('tmp-')); i++) await new Promise((r) => setTimeout(r, 10));
  const closing = Date.now();
  await dirs.close();
  const leftAtClose = (await entries(root)).filter((n) => n.startsWith('tmp-'));
  await t.rejects(starting, /shutting down|terminated/);
  const endedAfter = Date.now() - closing;
  t.same(leftAtClose, [], 'no extraction directory left when close() resolves');
  t.ok(endedAfter < 500, `the extraction ended at close (it ended ${endedAfter} ms after close() was called)`);
});
