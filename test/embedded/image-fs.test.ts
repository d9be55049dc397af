import { createHash } from 'node:crypto';
import zlib from 'node:zlib';
import t from 'tap';
import { EmbeddedPostgres } from '../../control-plane/embedded/index.js';
import { ImageError, ImageFs, unpackImage, type DataImage } from '../../control-plane/embedded/image-fs.js';

function digest(image: DataImage): string {
  return createHash('sha256').update(new Uint8Array(image.buffer)).digest('hex');
}

/** A ustar archive of the given entries, as `dump()` writes them (tests forge hostile ones). */
function tarOf(entries: readonly { name: string; data?: string; type?: string; prefix?: string }[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const data = Buffer.from(e.data ?? '');
    const h = Buffer.alloc(512);
    h.write(e.name, 0, 100, 'utf8');
    h.write('0000644\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    h.write(data.length.toString(8).padStart(11, '0') + '\0', 124);
    h.write('00000000000\0', 136);
    h.write(e.type ?? '0', 156);
    h.write('ustar\u000000', 257);
    if (e.prefix) h.write(e.prefix, 345, 131, 'utf8');
    h.write('        ', 148);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

const gz = (b: Buffer): Uint8Array => zlib.gzipSync(b);
const valid = [{ name: 'PG_VERSION', data: '18\n' }, { name: 'base', type: '5' }, { name: 'base/1', data: 'x'.repeat(700) }];

t.test('two engines on one image: each sees only its own writes, the image never changes, and a reopened engine starts from the image again', async (t) => {
  const a0 = await EmbeddedPostgres.start();
  await a0.exec(`CREATE TABLE k (v text); INSERT INTO k SELECT 'row ' || g FROM generate_series(1, 5000) g; CHECKPOINT;`);
  const image = await unpackImage(await a0.dump());
  await a0.close();
  const before = digest(image);

  const [a, b] = await Promise.all([EmbeddedPostgres.start({ image, settings: { shared_buffers: '16MB' } }), EmbeddedPostgres.start({ image })]);
  t.teardown(() => Promise.all([a.close(), b.close()]));
  t.same(await a.query('SELECT count(*)::int AS n FROM k'), [{ n: 5000 }], 'the image data is there');
  t.same(await a.query('SHOW shared_buffers'), [{ shared_buffers: '16MB' }], 'settings given at start apply');
  await a.exec(`DELETE FROM k WHERE v <> 'row 1'; INSERT INTO k VALUES ('only in a'); CREATE TABLE mine (x int); INSERT INTO mine SELECT generate_series(1, 20000)`);
  await a.exec('VACUUM FULL k');
  await a.exec('CHECKPOINT');
  t.same(await a.query('SELECT count(*)::int AS n FROM k'), [{ n: 2 }]);
  t.same(await b.query('SELECT count(*)::int AS n FROM k'), [{ n: 5000 }], "the other engine does not see a's writes");
  await t.rejects(b.query('SELECT * FROM mine'), { code: 'EMBEDDED_ERR_SQL', sqlState: '42P01' }, "nor a's new table");
  await b.exec(`INSERT INTO k VALUES ('only in b'); CHECKPOINT;`);
  t.same(await a.query(`SELECT count(*)::int AS n FROM k WHERE v = 'only in b'`), [{ n: 0 }]);
  t.equal(digest(image), before, 'the shared bytes are unchanged after writes, VACUUM FULL and checkpoints');
  const [ownA, ownB] = [await a.ownedBytes(), await b.ownedBytes()];
  t.ok(ownA > ownB && ownB > 0, `each engine holds copies of what it wrote only (a ${ownA} bytes, b ${ownB})`);
  t.equal(await a0.ownedBytes().catch(() => -1), -1, 'a closed engine answers nothing');

  // an engine killed mid-write leaves the image as it was; a new one starts clean from it
  const c = await EmbeddedPostgres.start({ image });
  const running = c.query(`INSERT INTO k SELECT 'x' FROM generate_series(1, 50000000)`);
  await new Promise((r) => setTimeout(r, 300));
  await c.terminate();
  await running.catch(() => undefined);
  t.equal(digest(image), before, 'a terminated engine changed nothing shared');
  const d = await EmbeddedPostgres.start({ image });
  t.teardown(() => d.close());
  t.same(await d.query('SELECT count(*)::int AS n FROM k'), [{ n: 5000 }], 'a fresh engine starts from the image');
});

t.test('start options are checked before a thread starts', async (t) => {
  const image = await unpackImage(gz(tarOf(valid)));
  await t.rejects(EmbeddedPostgres.start({ image, dataDir: '/tmp/x' }), TypeError);
  await t.rejects(EmbeddedPostgres.start({ settings: { shared_buffers: "16MB' -c x='1" } }), TypeError, 'a value that would inject another setting');
  await t.rejects(EmbeddedPostgres.start({ settings: { 'shared buffers': '16MB' } }), TypeError);
});

t.test('damaged and hostile images are refused whole, with a coded error', async (t) => {
  const good = await unpackImage(gz(tarOf(valid)));
  t.same(good.entries.map((e) => e.path), ['PG_VERSION', 'base', 'base/1']);
  t.equal(Buffer.from(new Uint8Array(good.buffer, good.entries[2]!.offset, 700)).toString(), 'x'.repeat(700));

  const whole = tarOf(valid);
  const cases: [string, Uint8Array, RegExp][] = [
    ['not gzip', Buffer.from('hello, not an image at all'), /not a gzip stream/],
    ['empty', new Uint8Array(0), /not a gzip stream/],
    // where it is cut decides which check sees it first (the stream, the size trailer, an entry)
    ['gzip cut short', gz(whole).subarray(0, gz(whole).length >> 1), /gzip|size|longer than/],
    ['gzip without its last byte', gz(whole).subarray(0, gz(whole).length - 1), /gzip|size|longer than/],
    ['tar cut before its end blocks', gz(whole.subarray(0, 1536)), /truncated/],
    ['a header byte flipped', gz(Buffer.concat([whole.subarray(0, 10), Buffer.from('Z'), whole.subarray(11)])), /checksum/],
    ['an entry leaving the data directory', gz(tarOf([...valid, { name: '../../etc/passwd', data: 'x' }])), /leaves the data directory/],
    ['a prefix leaving it', gz(tarOf([...valid, { name: 'passwd', prefix: '../..', data: 'x' }])), /leaves the data directory/],
    ['a symlink', gz(tarOf([...valid, { name: 'link', type: '2' }])), /unsupported type/],
    ['a directory with a size', gz(tarOf([...valid, { name: 'd', type: '5', data: 'abc' }])), /has a size/],
    ['no PG_VERSION', gz(tarOf([{ name: 'base', type: '5' }])), /no PG_VERSION/],
    ['a file inside a file', gz(tarOf([...valid, { name: 'PG_VERSION/x', data: 'x' }])), /inside the file/],
    ['a file there twice', gz(tarOf([...valid, { name: 'base/1', data: 'y' }])), /there twice/],
    ['a file where a directory is', gz(tarOf([...valid, { name: 'base', data: 'y' }])), /there twice/],
    ['a directory where a file is', gz(tarOf([...valid, { name: 'PG_VERSION', type: '5' }])), /there twice/],
    ['junk after the gzip stream', Buffer.concat([gz(whole), Buffer.from([0, 0, 0, 0x80])]), /trailer|declares/],
  ];
  for (const [what, bytes, message] of cases) {
    await t.rejects(unpackImage(bytes), { name: 'ImageError', code: 'EMBEDDED_ERR_IMAGE', message }, what);
  }
  // a gzip trailer declaring fewer bytes than the stream holds (a forged or >4 GB image)
  const lying = Buffer.from(gz(whole));
  lying.writeUInt32LE(1024, lying.length - 4);
  const err = await unpackImage(lying).then(() => undefined, (e: unknown) => e);
  t.ok(err instanceof ImageError, `a lying size trailer is refused (${String(err)})`);
  // and one declaring gigabytes is refused before anything is reserved
  lying.writeUInt32LE(0xffffffff, lying.length - 4);
  await t.rejects(unpackImage(lying), { code: 'EMBEDDED_ERR_IMAGE', message: /impossible size/ });
});

t.test('the filesystem: reads in place, copies on write, POSIX edges', async (t) => {
  const image = await unpackImage(gz(tarOf([...valid, { name: 'f', data: 'abcdef' }])));
  const fs = new ImageFs(image);
  const heap = new Uint8Array(64);
  const fd = fs.open('/f');
  t.equal(fs.read(fd, heap, 10, 4, 1), 4);
  t.equal(Buffer.from(heap.subarray(10, 14)).toString(), 'bcde', 'read at an offset into the caller buffer');
  t.equal(fs.read(fd, heap, 0, 10, 6), 0, 'reading at the end gives nothing');
  t.equal(fs.ownBytes(), 0, 'reading copies nothing');

  // a write past the end leaves a hole of zeros; the shared bytes stay. PGlite passes the heap's
  // ArrayBuffer itself and an offset into it
  const wasmHeap = new ArrayBuffer(64);
  new Uint8Array(wasmHeap).set(Buffer.from('XY'), 40);
  t.equal(fs.write(fd, wasmHeap as unknown as Uint8Array, 40, 2, 10), 2, 'written from the offset into the heap');
  t.equal(fs.fstat(fd).size, 12);
  t.equal(fs.read(fd, heap, 0, 12, 0), 12);
  t.same([...heap.subarray(0, 12)], [...Buffer.from('abcdef'), 0, 0, 0, 0, ...Buffer.from('XY')]);
  t.ok(fs.ownBytes() >= 12, 'the written file is now its own');
  t.equal(Buffer.from(new Uint8Array(image.buffer, image.entries.find((e) => e.path === 'f')!.offset, 6)).toString(), 'abcdef', 'the image is untouched');

  // shrink then grow: the grown part reads as zeros, not the old bytes
  fs.truncate('/f', 2);
  fs.truncate('/f', 8);
  t.equal(fs.read(fd, heap, 0, 8, 0), 8);
  t.same([...heap.subarray(0, 8)], [...Buffer.from('ab'), 0, 0, 0, 0, 0, 0]);

  // a shared file truncated shorter is not copied
  const fs2 = new ImageFs(image);
  fs2.truncate('/base/1', 100);
  t.equal(fs2.lstat('/base/1').size, 100);
  t.equal(fs2.ownBytes(), 0);

  // unlink keeps open descriptors readable; the name is gone
  fs.unlink('/f');
  t.throws(() => fs.lstat('/f'), { code: 44 }, 'ENOENT');
  t.equal(fs.read(fd, heap, 0, 2, 0), 2, 'an open descriptor still reads');
  fs.close(fd);
  t.throws(() => fs.close(fd), { code: 8 }, 'EBADF on a closed descriptor');

  fs.mkdir('/a/b/c', { recursive: true });
  fs.writeFile('/a/b/c/g', 'hello');
  t.throws(() => fs.rmdir('/a/b'), { code: 55 }, 'ENOTEMPTY');
  t.throws(() => fs.mkdir('/a'), { code: 20 }, 'EEXIST');
  fs.rename('/a/b/c/g', '/base/1');
  t.equal(fs.lstat('/base/1').size, 5, 'rename replaces the target');
  t.same(fs.readdir('/a/b/c'), []);
  t.throws(() => fs.rename('/a', '/base/1'), { code: 54 }, 'a directory cannot replace a file');
  t.throws(() => fs.open('/a'), { code: 31 }, 'EISDIR');
  t.throws(() => fs.readdir('/PG_VERSION'), { code: 54 }, 'ENOTDIR');
  t.equal(fs.lstat('/').mode & 0o170000, 0o040000, 'the root is a directory');
});
