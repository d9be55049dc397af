/**
 * Demo workers keep their data on disk (WorkerDirs): the image is extracted once into a base, each
 * worker runs on its own copy (PostgreSQL's cache small), and a copy goes when its worker ends,
 * whether closed, terminated (a statement past its deadline) or left by a killed process.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { EmbeddedDemoEngine, WorkerDirs, type DemoQuery } from '../../control-plane/demo/engine.js';
import { demoImage, tempDir } from '../helpers/server.js';

function query(sql: string): DemoQuery {
  return { sql, direct: false, settings: [], tenant: 'org_t', timeoutMs: 10_000, maxRows: 1000, maxBytes: 1_000_000 };
}

async function entries(dir: string): Promise<string[]> {
  return (await fs.readdir(dir)).sort();
}

t.test('one base per image, a copy per worker, each copy removed when its worker ends', async (t) => {
  const root = path.join(await tempDir(), 'workers');
  t.teardown(() => fs.rm(path.dirname(root), { recursive: true, force: true }));
  // what a killed process left: its copy and a half-made extraction (a pid that is not running)
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
  await fs.mkdir(path.join(root, `w-${dead}-1`), { recursive: true });
  await fs.mkdir(path.join(root, `tmp-${dead}-0123456789abcdef`), { recursive: true });
  await fs.mkdir(path.join(root, 'base-0000000000000000'), { recursive: true });

  const image = await demoImage();
  const dirs = new WorkerDirs(root);
  const [a, b] = await Promise.all([dirs.start(image), dirs.start(image)]);
  const names = await entries(root);
  t.equal(names.filter((n) => n.startsWith('base-')).length, 1, `one base, the stale ones swept: ${names.join(' ')}`);
  t.same(
    names.filter((n) => n.startsWith('w-')),
    [`w-${process.pid}-1`, `w-${process.pid}-2`],
    'a copy per worker, nothing left of the killed process',
  );
  t.notOk(names.some((n) => n.startsWith('tmp-')));
  t.same(await a.query('SELECT count(*)::int AS n FROM demo_healthcare.patients'), await b.query('SELECT count(*)::int AS n FROM demo_healthcare.patients'));
  const settings = await a.query("SELECT setting FROM pg_settings WHERE name = 'shared_buffers'");
  t.equal(settings[0]?.['setting'], '2048', 'shared_buffers 16MB (2048 pages of 8 kB)');

  await a.close();
  t.same((await entries(root)).filter((n) => n.startsWith('w-')), [`w-${process.pid}-2`], 'a closed worker’s copy is gone');
  await b.terminate();
  t.same((await entries(root)).filter((n) => n.startsWith('w-')), [], 'a terminated worker’s copy is gone');
});

t.test('a pool on disk answers, and replaces a worker stopped at its deadline with a fresh copy', async (t) => {
  const root = path.join(await tempDir(), 'workers');
  t.teardown(() => fs.rm(path.dirname(root), { recursive: true, force: true }));
  const engine = await EmbeddedDemoEngine.start(await demoImage(), { min: 1, max: 1, workersDir: root, cooldownMs: 10 });
  t.teardown(() => engine.close());
  const r = await engine.run(query('SELECT 41 + 1 AS n'));
  t.same(r.rows, [{ n: 42 }]);
  await t.rejects(engine.run({ ...query('SELECT count(*) FROM generate_series(1, 1e9)'), timeoutMs: 300 }), { code: 'DEMO_ERR_TIMEOUT' });
  // the replacement starts on a new copy; the stopped worker's copy is gone
  let names: string[] = [];
  for (let i = 0; i < 100; i++) {
    names = (await entries(root)).filter((n) => n.startsWith('w-'));
    if (names.length === 1 && names[0] !== `w-${process.pid}-1`) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  t.same(names, [`w-${process.pid}-2`]);
  const again = await engine.run({ ...query('SELECT 1 AS one'), tenant: 'org_other' });
  t.same(again.rows, [{ one: 1 }]);
});

t.test('closing while the image is being extracted stops it and leaves nothing behind', async (t) => {
  const root = path.join(await tempDir(), 'workers');
  t.teardown(() => fs.rm(path.dirname(root), { recursive: true, force: true }));
  const dirs = new WorkerDirs(root);
  const starting = dirs.start(await demoImage());
  // the extraction runs for seconds; close as soon as it has begun
  for (let i = 0; i < 200 && !(await fs.readdir(root).catch(() => [])).some((n) => n.startsWith('tmp-')); i++) await new Promise((r) => setTimeout(r, 25));
  await dirs.close();
  await t.rejects(starting, /shutting down|terminated/);
  t.same(await entries(root), [], 'no extraction, base or copy left');
  await t.rejects(dirs.start(await demoImage()), /shutting down/, 'no start after close');
});

t.test('closing while a worker is being started waits for it, and its copy goes with it', async (t) => {
  const root = path.join(await tempDir(), 'workers');
  t.teardown(() => fs.rm(path.dirname(root), { recursive: true, force: true }));
  const engine = await EmbeddedDemoEngine.start(await demoImage(), { min: 1, max: 2, workersDir: root });
  // two statements at once: the one warm worker takes the first, the pool starts a second for the other
  const busy = [engine.run({ ...query('SELECT pg_sleep(2)'), tenant: 'org_a' }), engine.run({ ...query('SELECT pg_sleep(2)'), tenant: 'org_b' })].map((p) =>
    p.then(
      () => 'answered',
      (e: { code?: string }) => e.code,
    ),
  );
  for (let i = 0; i < 200 && (await entries(root)).filter((n) => n.startsWith('w-')).length < 2; i++) await new Promise((r) => setTimeout(r, 10));
  await engine.close();
  t.ok((await Promise.all(busy)).every((r) => r === 'answered' || r === 'DEMO_ERR_UNAVAILABLE'), 'each statement answered or ended by the shutdown');
  t.same((await entries(root)).filter((n) => !n.startsWith('base-')), [], 'no copy left once close() has answered');
  // and the data dir can be removed at once (it could not while a copy was still being written)
  await t.resolves(fs.rm(root, { recursive: true }));
});
