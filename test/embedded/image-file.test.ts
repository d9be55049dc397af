/**
 * Images kept in files (control-plane/embedded/image-file.ts): the atomic save, what it cleans up
 * (older fingerprints of its own stem, stale temporary files) and what it leaves alone.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { imageFilePath, readImageFile, saveImageFile } from '../../control-plane/embedded/image-file.js';
import { tempDir } from '../helpers/server.js';
import type { TapTest } from '../helpers/tap.js';

const image = new Uint8Array([0x1f, 0x8b, 1, 2, 3]);

async function dir(t: TapTest): Promise<string> {
  const d = await tempDir('svc-image-file-');
  t.teardown(() => fs.rm(d, { recursive: true, force: true }));
  return d;
}

t.test('a save removes the older fingerprints and stale temporary files of its stem only', async (t) => {
  const d = await dir(t);
  const stale = new Date(Date.now() - 60 * 60_000);
  const keep = ['demo-00aa.tar.gz', 'rest-x-00aa.tar.gz', 'a.b+c-00aa.tar.gz', 'restx-00aa.tar.gz', 'rest-00aa.tar.gz.bak', 'rest-00aa.tar.gz.1.2.tmp'];
  const gone = ['rest-00aa.tar.gz', 'rest-0123456789abcdef.tar.gz', 'rest-00bb.tar.gz.12.1700000000000.tmp'];
  for (const f of [...keep, ...gone]) await fs.writeFile(path.join(d, f), 'x');
  await fs.utimes(path.join(d, 'rest-00bb.tar.gz.12.1700000000000.tmp'), stale, stale);
  await fs.utimes(path.join(d, 'demo-00aa.tar.gz'), stale, stale);
  // a fresh temporary file may be another process's save under way
  await fs.writeFile(path.join(d, 'rest-00bb.tar.gz.13.1700000000000.tmp'), 'x');
  keep.push('rest-00bb.tar.gz.13.1700000000000.tmp');

  const file = imageFilePath(d, 'rest', 'ff00');
  await saveImageFile(file, image);
  t.same(await readImageFile(file), image);
  t.same((await fs.readdir(d)).sort(), [...keep, 'rest-ff00.tar.gz'].sort());

  // the stem is taken literally (no pattern): regular-expression characters in it match only themselves
  await saveImageFile(imageFilePath(d, 'a.b+c', '11'), image);
  t.same((await fs.readdir(d)).filter((f) => f.startsWith('a')).sort(), ['a.b+c-11.tar.gz']);
  t.ok(await readImageFile(path.join(d, 'restx-00aa.tar.gz')), 'a stem that only starts like another is not its');
});

t.test('a save given a path written another way keeps the file it saved', async (t) => {
  const d = await dir(t);
  const file = [d, 'sub', '.', 'rest-ab.tar.gz'].join(path.sep);
  await fs.mkdir(path.join(d, 'sub'));
  t.not(path.normalize(file), file, 'the path is not in normal form');
  await saveImageFile(file, image);
  t.same(await readImageFile(file), image);
});

t.test('a save that fails leaves no temporary file behind', async (t) => {
  const d = await dir(t);
  const file = imageFilePath(d, 'rest', 'ab');
  // what stands at the image's name cannot be replaced (a disk full, a quota, fail the write the same way)
  await fs.mkdir(file);
  await fs.writeFile(path.join(file, 'x'), 'x');
  await t.rejects(saveImageFile(file, image));
  t.same((await fs.readdir(d)).filter((f) => f.endsWith('.tmp')), [], 'no temporary file is left');
  await t.rejects(saveImageFile(path.join(d, 'not-an-image.bin'), image), TypeError);
});

t.test('reading a saved image removes the stale temporary files a crash left beside it (a start that reads never saves)', async (t) => {
  const d = await dir(t);
  const file = imageFilePath(d, 'rest', 'ff00');
  await saveImageFile(file, image);
  // kill -9 during an earlier save: its temporary file, an hour old; another process's save under way; another stem's
  const crashed = 'rest-ff00.tar.gz.12.1700000000000.tmp';
  const underWay = 'rest-ff00.tar.gz.13.1700000000001.tmp';
  const others = 'demo-00aa.tar.gz.14.1700000000002.tmp';
  for (const f of [crashed, underWay, others]) await fs.writeFile(path.join(d, f), 'x');
  const stale = new Date(Date.now() - 60 * 60_000);
  for (const f of [crashed, others]) await fs.utimes(path.join(d, f), stale, stale);
  t.same(await readImageFile(file), image);
  t.same((await fs.readdir(d)).sort(), [others, 'rest-ff00.tar.gz', underWay].sort(), 'only the stale one of its own stem is removed');
  t.equal(await readImageFile(path.join(d, 'rest-0000.tar.gz')), undefined, 'no image: nothing read');
});
