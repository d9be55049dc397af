/**
 * The empty engine of the API and file targets is kept in the data directory
 * (`engines/rest-<fingerprint>.tar.gz`) and read back at the next start instead of running initdb
 * again (which left about 200 MB with the process); a damaged saved image is made again. Each
 * start is a process of its own: the image is made once per process.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { tempDir } from '../../helpers/server.js';

const ENGINE = new URL('../../../control-plane/live/rest/engine.js', import.meta.url).href;

/** a process that starts a pool on `dataDir`, runs one statement on an engine and closes it */
async function start(dataDir: string): Promise<{ code: number | null; out: string }> {
  const script = [
    `import { EnginePool } from ${JSON.stringify(ENGINE)};`,
    `const pool = new EnginePool(1, ${JSON.stringify(dataDir)});`,
    'const e = await pool.take(new AbortController().signal);',
    "const rows = await e.db.query('SELECT 40 + 2 AS n, current_setting(\\'server_version\\') AS v');",
    'pool.give(e, true);',
    'await pool.close();',
    'console.log(JSON.stringify(rows[0]));',
  ].join('\n');
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, out };
}

async function saved(dataDir: string): Promise<{ file: string; ino: number; mtimeMs: number; size: number }[]> {
  const dir = path.join(dataDir, 'engines');
  const files = (await fs.readdir(dir).catch(() => [] as string[])).filter((f) => /^rest-[0-9a-f]+\.tar\.gz$/.test(f));
  return Promise.all(files.map(async (f) => ({ file: f, ...(await fs.stat(path.join(dir, f))) })));
}

t.test('made once, kept in the data directory, read back at the next start; a damaged one is made again', async (t) => {
  const dataDir = await tempDir('svc-rest-image-');
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));

  const first = await start(dataDir);
  t.equal(first.code, 0, first.out);
  t.match(first.out, /"n":42/, 'the first start runs a statement');
  const afterFirst = await saved(dataDir);
  t.equal(afterFirst.length, 1, 'the empty engine is saved');
  t.ok((afterFirst[0]?.size ?? 0) > 100_000, 'a whole image');

  const second = await start(dataDir);
  t.equal(second.code, 0, second.out);
  t.match(second.out, /"n":42/, 'the next start runs on the saved image');
  const afterSecond = await saved(dataDir);
  t.same(
    afterSecond.map((f) => [f.file, f.ino, f.mtimeMs]),
    afterFirst.map((f) => [f.file, f.ino, f.mtimeMs]),
    'read, not made and written again',
  );

  const file = path.join(dataDir, 'engines', afterFirst[0]?.file ?? 'missing');
  await fs.writeFile(file, 'not a tarball');
  const third = await start(dataDir);
  t.equal(third.code, 0, third.out);
  t.match(third.out, /"n":42/, 'a damaged saved image does not stop the engines');
  const afterThird = await saved(dataDir);
  t.equal(afterThird.length, 1);
  t.ok((afterThird[0]?.size ?? 0) > 100_000, 'it is made and saved again');
});

t.test('a data directory the process cannot write to only costs each start its initdb', async (t) => {
  const dataDir = await tempDir('svc-rest-image-ro-');
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  await fs.writeFile(path.join(dataDir, 'engines'), 'a file where the folder would go');
  const r = await start(dataDir);
  t.equal(r.code, 0, r.out);
  t.match(r.out, /"n":42/);
});
