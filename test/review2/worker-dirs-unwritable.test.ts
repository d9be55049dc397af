/**
 * Review: before 32e0e8a demo workers ran in memory from the image, so a data directory that
 * could not be written (read-only volume with a baked image, full disk, wrong owner) cost at most
 * the image save (EmbeddedDemoEngine.fromSeeded says so). Now every worker needs
 * <data dir>/demo/workers, with no fallback. This machine runs as root, so `chmod` cannot make a
 * directory unwritable: a regular file where the directory should be fails mkdir the same way
 * (ENOTDIR here; EROFS / ENOSPC / EACCES take the same path).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { EmbeddedDemoEngine } from '../../control-plane/demo/engine.js';
import { demoImage, tempDir } from '../helpers/server.js';

t.test('the demo pool still answers when its workers directory cannot be written', async (t) => {
  const dataDir = await tempDir();
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  await fs.writeFile(path.join(dataDir, 'demo'), 'not a directory');
  let engine: EmbeddedDemoEngine;
  try {
    engine = await EmbeddedDemoEngine.start(await demoImage(), { min: 1, max: 1, workersDir: path.join(dataDir, 'demo', 'workers') });
  } catch (err) {
    t.fail(`the demo engines could not start at all: ${(err as Error).message}`);
    return;
  }
  t.teardown(() => engine.close());
  const r = await engine.run({ sql: 'SELECT 1 AS one', direct: false, settings: [], tenant: 'org_t', timeoutMs: 10_000, maxRows: 10, maxBytes: 100_000 });
  t.same(r.rows, [{ one: 1 }]);
});
