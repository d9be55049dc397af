/**
 * Review: two replicas (two processes, two pids) sharing SVC_DATA_DIR start cold at once. Both
 * find no base and both extract; each then runs `fs.rm(base)` + `fs.rename(tmp, base)`, so the
 * second removes the base the first is copying from (ENOENT) or renames onto it (ENOTEMPTY).
 * A failed first start rejects startDemoEngine, and app.ts memoizes that rejection: the demo stays
 * down on that replica until it restarts.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { tempDir } from '../helpers/server.js';
import { smallImage } from './helpers.js';

const child = fileURLToPath(new URL('./replica-child.ts', import.meta.url));

function replica(root: string, imageFile: string): Promise<{ ok: boolean; error?: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...process.execArgv, child, root, imageFile], { timeout: 120_000 }, (err, stdout, stderr) => {
      try {
        resolve(JSON.parse(stdout) as { ok: boolean; error?: string });
      } catch {
        resolve({ ok: false, error: `child failed: ${err?.message ?? ''} ${stderr.slice(0, 500)}` });
      }
    });
  });
}

t.test('two replicas starting at once on one data dir both get a worker', async (t) => {
  const dir = await tempDir();
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const imageFile = path.join(dir, 'image.tar.gz');
  await fs.writeFile(imageFile, await smallImage('a'));
  for (let round = 0; round < 3; round++) {
    const root = path.join(dir, `workers-${round}`);
    const results = await Promise.all([replica(root, imageFile), replica(root, imageFile)]);
    t.same(
      results.map((r) => r.ok),
      [true, true],
      `round ${round}: ${JSON.stringify(results)}`,
    );
  }
});
