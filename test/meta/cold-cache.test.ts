/**
 * The test cache on a machine that never had one (a fresh CI machine): `npm test` builds it
 * before any test file (test/helpers/warm-cache.ts), and the first build must make the cache
 * folder itself. The migrated store directory failed there (its work folder was made inside a
 * cache folder that did not exist yet), so every CI run on a new machine stopped before its first
 * test. Here in a child process, on a cache folder of its own (TEST_CACHE_DIR).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { besideModule } from '../helpers/root.js';

const run = promisify(execFile);

t.test('the migrated store directory is built into a cache folder that does not exist yet', async (t) => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-cold-cache-'));
  t.teardown(() => fs.rmSync(base, { recursive: true, force: true }));
  const cache = path.join(base, 'not', 'there', 'yet');
  const helper = besideModule('../helpers/server', import.meta.url).href;
  // a script file, not --eval: the engine's worker threads inherit the process's options
  const script = path.join(base, 'build.mjs');
  fs.writeFileSync(script, `const m = await import(${JSON.stringify(helper)});\nprocess.stdout.write(await m.storeTemplateDir());\n`);
  const { stdout } = await run(process.execPath, [script], {
    env: { ...process.env, TEST_CACHE_DIR: cache },
  });
  t.equal(path.dirname(stdout), cache, 'the directory is in the cache folder');
  t.ok(fs.existsSync(path.join(stdout, 'PG_VERSION')), 'it holds a database');
  t.same(fs.readdirSync(cache).filter((f) => f.startsWith('store-building-')), [], 'no work folder left behind');
});
