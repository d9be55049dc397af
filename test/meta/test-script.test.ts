/**
 * `npm test` itself (scripts/test.mjs, docs/testing.md): which arguments are test files and what
 * runs for them, which compiled files are stale or missing, and where the tests find the
 * repository (test/helpers/root.ts), and where the test processes keep their temporary files. Small trees in a temporary folder; nothing is compiled.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t, { type Test } from 'tap';
import { findRoot, ROOT } from '../helpers/root.js';
import { fileTree } from '../helpers/file-tree.js';

interface TestScript {
  tapArgs(args: readonly string[], where?: { root?: string; cwd?: string }): { files: boolean; argv: string[] };
  staleOutputs(root?: string): string[];
  missingOutputs(root?: string): string[];
  testTmpDir(env: Record<string, string | undefined>, shm: string): { dir: string; own: boolean } | undefined;
}

// loaded from the repository (it finds the repository beside itself), not compiled with the tests
const script = (await import(pathToFileURL(path.join(ROOT, 'scripts/test.mjs')).href)) as TestScript;

const tree = (t: Test, files: Record<string, string>): string => fileTree(t, files, 'svc-test-script-');

t.test('arguments: test files and folders become their compiled tests, the rest passes through to tap', async (t) => {
  const root = tree(t, {
    'package.json': '{}',
    'test/api/audit.test.ts': '',
    'test/api/keys.test.ts': '',
    'test/api/deep/x.test.ts': '',
    'test/helpers/tap.ts': '',
  });
  const at = { root, cwd: root };
  t.same(script.tapArgs(['test/api/audit.test.ts'], at), { files: true, argv: ['.test-build/test/api/audit.test.js'] });
  t.same(script.tapArgs(['test/api/'], at).argv, ['.test-build/test/api/audit.test.js', '.test-build/test/api/deep/x.test.js', '.test-build/test/api/keys.test.js'], 'a folder: the tests under it');
  // an option's value given as the next argument is not a test file: the whole suite runs
  // (test/latency/ included), not tap's own selection of it
  t.same(script.tapArgs(['--grep', 'tampering'], at), { files: false, argv: ['--grep', 'tampering'] });
  t.same(script.tapArgs(['--timeout', '600', '--grep=x', 'test/api/keys.test.ts'], at), {
    files: true,
    argv: ['--timeout', '600', '--grep=x', '.test-build/test/api/keys.test.js'],
  });
  // typed in a subfolder: npm runs the script at the root and names that folder in INIT_CWD
  t.same(script.tapArgs(['audit.test.ts'], { root, cwd: path.join(root, 'test/api') }).argv, ['.test-build/test/api/audit.test.js']);
  t.throws(() => script.tapArgs(['test/api/audti.test.ts'], at), /audti\.test\.ts: no such test file or folder/, 'a misspelt test file fails before anything is compiled');
  t.throws(() => script.tapArgs(['test/ap'], at), /test\/ap: no such test file or folder/);
  t.throws(() => script.tapArgs(['test/helpers'], at), /no test file/, 'a folder without tests');
});

t.test('stale compiled files: those whose source is gone, whatever its extension', async (t) => {
  const root = tree(t, {
    'test/a.test.ts': '',
    'scripts/tool.js': '',
    'relay-agent/pack.mjs': '',
    'lib/m.mts': '',
    '.test-build/.tsbuildinfo': '{}',
    '.test-build/test/a.test.js': '',
    '.test-build/test/a.test.js.map': '',
    '.test-build/test/renamed.test.js': '',
    '.test-build/test/renamed.test.js.map': '',
    '.test-build/scripts/tool.js': '',
    '.test-build/relay-agent/pack.mjs': '',
    '.test-build/relay-agent/pack.mjs.map': '',
    '.test-build/lib/m.mjs': '',
  });
  t.same(script.staleOutputs(root).sort(), ['.test-build/test/renamed.test.js', '.test-build/test/renamed.test.js.map']);
});

t.test('missing compiled files: every source the last build compiled, not only the tests', async (t) => {
  const root = tree(t, {
    'tsconfig.test-build.json': JSON.stringify({
      compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', outDir: '.test-build', rootDir: '.', sourceMap: true, allowJs: true },
      include: ['src/**/*.ts', 'test/**/*.ts'],
    }),
    'src/config.ts': '',
    'scripts/tool.mjs': '',
    'test/a.test.ts': '',
    '.test-build/.tsbuildinfo': JSON.stringify({ fileNames: ['../node_modules/typescript/lib/lib.es5.d.ts', '../src/config.ts', '../scripts/tool.mjs', '../test/a.test.ts', '../src/gone.ts'] }),
    '.test-build/test/a.test.js': '',
    '.test-build/test/a.test.js.map': '',
    '.test-build/scripts/tool.mjs': '',
    '.test-build/src/config.js.map': '',
  });
  t.same(script.missingOutputs(root).sort(), ['.test-build/scripts/tool.mjs.map', '.test-build/src/config.js']);
  fs.rmSync(path.join(root, '.test-build'), { recursive: true });
  t.same(script.missingOutputs(root), [], 'no record of a build: tsc builds it all anyway');
});

t.test('the repository root, from the sources and from the compiled tests', async (t) => {
  t.ok(fs.existsSync(path.join(ROOT, 'scripts/test.mjs')), `ROOT is the repository (${ROOT})`);
  // tsc copies a JSON module a test imports into .test-build/, package.json included
  const root = tree(t, { 'package.json': '{}', '.test-build/package.json': '{}', '.test-build/test/helpers/x': '', 'test/helpers/x': '' });
  t.equal(findRoot(path.join(root, '.test-build/test/helpers')), root);
  t.equal(findRoot(path.join(root, 'test/helpers')), root);
});

t.test("the tests' temporary files: a directory of the run in memory, earlier killed runs' removed", async (t) => {
  const shm = tree(t, { 'keep/x': '' });
  // a run killed before removing its directory: a pid that cannot be alive (above pid_max)
  fs.mkdirSync(path.join(shm, 'svc-test-run-99999999-abcdef'));
  fs.writeFileSync(path.join(shm, 'svc-test-run-99999999-abcdef', 'store'), 'x');
  // a run still going: this process
  fs.mkdirSync(path.join(shm, `svc-test-run-${process.ppid}-def123`));
  const got = script.testTmpDir({}, shm);
  t.ok(got?.own, 'a directory of its own');
  t.equal(path.dirname(got?.dir ?? ''), shm);
  t.match(path.basename(got?.dir ?? ''), new RegExp(`^svc-test-run-${process.pid}-`), 'named by the pid of the run');
  t.ok(fs.statSync(got?.dir ?? '').isDirectory());
  t.notOk(fs.existsSync(path.join(shm, 'svc-test-run-99999999-abcdef')), "a dead run's directory is removed");
  t.ok(fs.existsSync(path.join(shm, `svc-test-run-${process.ppid}-def123`)), "a live run's is not");
  t.ok(fs.existsSync(path.join(shm, 'keep/x')), 'nor anything else');

  t.same(script.testTmpDir({ TEST_TMPDIR: '/somewhere' }, shm), { dir: '/somewhere', own: false }, 'TEST_TMPDIR decides');
  t.equal(script.testTmpDir({}, path.join(shm, 'nope')), undefined, 'no such directory: the OS temp dir');
  t.equal(script.testTmpDir({}, path.join(shm, 'keep/x')), undefined, 'not a directory: the OS temp dir');
});

t.test("a dead run's directory is removed only when a run of this user made it", async (t) => {
  const shm = tree(t, { 'elsewhere/keep': '' });
  const dead = 'svc-test-run-99999999-';
  const there = (name: string): boolean => fs.existsSync(path.join(shm, name));
  // this user's, named as mkdtemp names a run's: removed
  fs.mkdirSync(path.join(shm, `${dead}AbC123`));
  // a folder whose name merely starts like a run's
  fs.mkdirSync(path.join(shm, `${dead}my-notes`));
  fs.writeFileSync(path.join(shm, `${dead}my-notes`, 'notes.txt'), 'mine');
  // a symlink named like a run's directory
  fs.symlinkSync(path.join(shm, 'elsewhere'), path.join(shm, `${dead}Lnk123`));
  // another user's (its run may be alive in another PID namespace sharing the folder: a pid that is
  // not alive here says nothing of it); making one needs root
  const root = process.getuid?.() === 0;
  if (root) {
    fs.mkdirSync(path.join(shm, `${dead}Oth123`));
    fs.chownSync(path.join(shm, `${dead}Oth123`), 65534, 65534);
  }
  const got = script.testTmpDir({}, shm);
  t.ok(got?.own);
  t.notOk(there(`${dead}AbC123`), "this user's dead run's directory is removed");
  t.ok(there(`${dead}my-notes/notes.txt`), 'a folder that only starts like a run’s is not');
  t.ok(fs.readdirSync(shm).includes(`${dead}Lnk123`), 'nor a symlink');
  t.ok(there('elsewhere/keep'), 'nor what it points to');
  if (root) t.ok(there(`${dead}Oth123`), "nor another user's directory");
});

t.test('a memory folder mounted noexec (as Docker mounts /dev/shm) is not used: tests run programs they write there', async (t) => {
  const shm = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-test-script-noexec-'));
  // a noexec tmpfs of its own; mounting needs root (and a machine that lets it); unmounted before the folder is removed
  const mounted = process.getuid?.() === 0 && spawnSync('mount', ['-t', 'tmpfs', '-o', 'noexec,size=3g', 'tmpfs', shm]).status === 0;
  t.teardown(() => {
    if (mounted) spawnSync('umount', [shm]);
    fs.rmSync(shm, { recursive: true, force: true });
  });
  if (!mounted) return t.skip('cannot mount a noexec tmpfs here (needs root)', () => undefined);
  const got = script.testTmpDir({}, shm);
  t.equal(got, undefined, 'the OS temp dir instead');
  t.same(fs.readdirSync(shm), [], 'nothing left in it');
});
