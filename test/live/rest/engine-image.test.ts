/**
 * The empty engine of the API and file targets is kept in the data directory
 * (`engines/rest-<fingerprint>.tar.gz`) and read back at the next start instead of running initdb
 * again (which left about 200 MB with the process); a damaged saved image is made again. Each
 * start is a process of its own: the image is made once per process.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import zlib from 'node:zlib';
import t from 'tap';
import { EmbeddedPostgres, IMAGE_INITDB } from '../../../control-plane/embedded/index.js';
import { runModuleScript } from '../../helpers/node-script.js';
import { tempDir } from '../../helpers/server.js';

const ENGINE = new URL('../../../control-plane/live/rest/engine.js', import.meta.url).href;
const EMBEDDED = new URL('../../../control-plane/embedded/index.js', import.meta.url).href;

interface StartOptions {
  /** the data dir as a read-only mount: nothing under it is written or removed (EROFS) */
  readonly readOnly?: boolean;
  /** the n-th engine started on an image fails to start (as when memory runs out) */
  readonly failImageStart?: number;
  /** what runs with `pool`, `signal` and `query(e)` (default: one statement on one engine) */
  readonly body?: string;
}

/**
 * A process that starts a pool on `dataDir`, runs `body` and closes it; it prints the statement's
 * row with the engines it started (`starts`: on an image, `initdb`: making one). More than 6
 * engine starts for this little work is a loop: the process says so and exits 3.
 */
async function start(dataDir: string, o: StartOptions = {}): Promise<{ code: number | null; out: string }> {
  const script = [
    ...(o.readOnly
      ? [
          "import fsp from 'node:fs/promises';",
          `const under = ${JSON.stringify(dataDir)};`,
          "for (const m of ['rm', 'writeFile', 'rename', 'mkdir', 'unlink']) {",
          '  const orig = fsp[m];',
          "  fsp[m] = async (p, ...rest) => { if (String(p).startsWith(under)) throw Object.assign(new Error(`EROFS: ${p}`), { code: 'EROFS' }); return orig(p, ...rest); };",
          '}',
        ]
      : []),
    `const { EmbeddedPostgres } = await import(${JSON.stringify(EMBEDDED)});`,
    `const { EnginePool } = await import(${JSON.stringify(ENGINE)});`,
    'let starts = 0, initdb = 0;',
    'const startOrig = EmbeddedPostgres.start;',
    'EmbeddedPostgres.start = async (opts) => {',
    '  if (opts?.initdb) initdb++;',
    '  if (opts?.image) {',
    "    if (++starts > 6) { console.log('loop: more than 6 engine starts'); process.exit(3); }",
    `    if (starts === ${o.failImageStart ?? 0}) throw new Error('injected: the engine could not start');`,
    '  }',
    '  return startOrig.call(EmbeddedPostgres, opts);',
    '};',
    `const pool = new EnginePool(1, ${JSON.stringify(dataDir)}, (m) => console.log('WARN ' + m));`,
    'const signal = AbortSignal.timeout(120_000);',
    "const query = async (e) => (await e.db.query(`SELECT 40 + 2 AS n, current_setting('server_version') AS v, (SELECT count(*)::int FROM pg_roles WHERE rolname = 'svc_live_reader') AS role, (SELECT string_agg(datname, ',') FROM pg_database) AS dbs`))[0];",
    'let row;',
    o.body ?? 'const e = await pool.take(signal); row = await query(e); pool.give(e, true);',
    'await pool.close();',
    'console.log(JSON.stringify({ ...row, starts, initdb }));',
  ].join('\n');
  return runModuleScript(script);
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
  t.match(first.out, /"dbs":"postgres"/, 'the image holds the one database engines open (no template0, template1)');
  const afterFirst = await saved(dataDir);
  t.equal(afterFirst.length, 1, 'the empty engine is saved');
  t.ok((afterFirst[0]?.size ?? 0) > 100_000, 'a whole image');

  const second = await start(dataDir);
  t.equal(second.code, 0, second.out);
  t.match(second.out, /"n":42/, 'the next start runs on the saved image');
  t.match(second.out, /"dbs":"postgres"/, 'the saved image holds only the postgres database');
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
  t.match(third.out, /WARN the saved empty engine of the API and file targets .*rest-[0-9a-f]+\.tar\.gz cannot be read \(.+\); making it again/, 'the operator is told');
  t.notMatch(second.out, /WARN/, 'a sound image is read back without a warning');
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

/** a gzip ustar archive of plain files (what unpackImage accepts: a damaged image that unpacks) */
function tarball(files: Record<string, string>): Uint8Array {
  const blocks: Buffer[] = [];
  for (const [name, text] of Object.entries(files)) {
    const data = Buffer.from(text);
    const h = Buffer.alloc(512);
    h.write(name, 0, 100);
    h.write('0000600\0', 100);
    h.write(data.length.toString(8).padStart(11, '0') + '\0', 124);
    h.write('00000000000\0', 136);
    h.write('0', 156);
    h.write('ustar\u000000', 257);
    h.write('        ', 148);
    h.write(h.reduce((a, b) => a + b, 0).toString(8).padStart(6, '0') + '\0 ', 148);
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  return zlib.gzipSync(Buffer.concat([...blocks, Buffer.alloc(1024)]));
}

t.test('a saved image no engine can use is made again, once: even where the data dir cannot be written; a failure later is not the image\'s', async (t) => {
  const dataDir = await tempDir('svc-rest-image-bad-');
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const first = await start(dataDir);
  t.equal(first.code, 0, first.out);
  const [made] = await saved(dataDir);
  const file = path.join(dataDir, 'engines', made?.file ?? 'missing');

  // a tarball that unpacks (it has a PG_VERSION) but that PGlite cannot start on, in a data dir
  // that cannot be written: the file stays, and must not be read again and again
  const unstartable = tarball({ PG_VERSION: '18\n', 'global/pg_control': 'x'.repeat(8192) });
  await fs.writeFile(file, unstartable);
  const ro = await start(dataDir, { readOnly: true });
  t.equal(ro.code, 0, ro.out);
  t.match(ro.out, /"n":42.*"starts":2,"initdb":1/, 'one start refused, one initdb, one engine');
  t.match(ro.out, /WARN no engine of the API and file targets starts on the saved image .*; making it again/, 'the operator is told');

  // a database PGlite starts on but that is not the empty engine (no reader role): every query
  // would fail, at every start, as long as the file is there
  const other = await EmbeddedPostgres.start({ initdb: IMAGE_INITDB });
  await other.exec('CHECKPOINT');
  const foreign = await other.dump();
  await other.terminate();
  await fs.writeFile(file, foreign);
  const wrong = await start(dataDir);
  t.equal(wrong.code, 0, wrong.out);
  t.match(wrong.out, /"n":42.*"role":1.*"initdb":1/, 'the engine runs on an image made again, with its reader role');
  const [again] = await saved(dataDir);
  t.ok(again && again.size !== foreign.length, 'and that image is saved in its place');

  // an engine that cannot start once the saved image has served one (memory ran out, say) is
  // not the image's fault: the file is kept and no initdb runs
  const before = await saved(dataDir);
  const transient = await start(dataDir, {
    failImageStart: 2,
    body: [
      'const e1 = await pool.take(signal); pool.give(e1, false);',
      "console.log('second:', await pool.take(signal).then((e) => { pool.give(e, true); return 'an engine'; }, (err) => err.message));",
      'const e = await pool.take(signal); row = await query(e); pool.give(e, true);',
    ].join('\n'),
  });
  t.equal(transient.code, 0, transient.out);
  t.match(transient.out, /second: the embedded engine for live queries could not start/, 'the start that failed answers so');
  t.match(transient.out, /"n":42.*"starts":3,"initdb":0/, 'the next engine starts on the saved image');
  t.same(
    (await saved(dataDir)).map((f) => [f.file, f.ino, f.mtimeMs]),
    before.map((f) => [f.file, f.ino, f.mtimeMs]),
    'the saved image is kept',
  );
});
