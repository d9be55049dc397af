/**
 * Review: demo workers now run on disk, so a sort or hash that spills writes its temporary files
 * into the worker's copy under SVC_DATA_DIR (the same disk as the embedded store, the master key
 * and the image) instead of the engine's WASM memory, where it used to end in an out-of-memory
 * answer. Nothing bounds it: temp_file_limit is -1, and the statement writes until its deadline
 * (SVC_QUERY_TIMEOUT_MS, up to 600 s), on every worker at once (up to 2x SVC_DEMO_WORKERS).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { EmbeddedDemoEngine } from '../../control-plane/demo/engine.js';
import { demoImage, tempDir } from '../helpers/server.js';
import { entries } from './helpers.js';

function duMb(dir: string): number {
  try {
    return Number(execFileSync('du', ['-sm', dir]).toString().split('\t')[0]);
  } catch {
    return 0;
  }
}

t.test('a spilling demo statement cannot fill the data disk', async (t) => {
  const root = path.join(await tempDir(), 'workers');
  t.teardown(() => fs.rm(path.dirname(root), { recursive: true, force: true }));
  const engine = await EmbeddedDemoEngine.start(await demoImage(), { min: 1, max: 1, workersDir: root, cooldownMs: 10 });
  t.teardown(() => engine.close());
  const copy = path.join(root, (await entries(root)).find((n) => n.startsWith('w-')) as string);
  const start = duMb(copy);
  let peak = start;
  const poll = setInterval(() => (peak = Math.max(peak, duMb(copy))), 250);
  const sql = 'SELECT count(*) AS n FROM (SELECT g, md5(g::text) AS h FROM generate_series(1, 200000000) g ORDER BY h) s';
  const outcome = await engine
    .run({ sql, direct: false, settings: [], tenant: 'org_t', timeoutMs: 8000, maxRows: 10, maxBytes: 100_000 })
    .then(() => 'answered', (err: { code?: string; sqlState?: string; message?: string }) => `${err.code ?? ''} ${err.sqlState ?? ''} ${err.message ?? ''}`);
  clearInterval(poll);
  const grew = peak - start;
  t.comment(`copy ${start} MB at start, peak ${peak} MB; statement: ${outcome}`);
  t.ok(grew < 256, `temporary files of one statement stay bounded (grew ${grew} MB in 8 s)`);
});
