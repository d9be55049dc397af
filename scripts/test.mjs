#!/usr/bin/env node
/**
 * `npm test`: compiles the sources and the tests once (tsconfig.test-build.json, into .test-build/),
 * then runs the compiled tests with tap. Test processes and each of their worker threads then load
 * plain JavaScript, with no TypeScript loader of their own (that loader, in every process and
 * thread, was most of the suite's time). Type errors fail the run before any test starts.
 *
 *   npm test                                  the suite (three files at a time), then test/latency/ one file at a time
 *   npm test -- test/api/audit.test.ts …      those files or folders only (sources; their compiled
 *                                             counterparts run); tap options pass through
 *
 * Plain Node.js: `node scripts/test.mjs [files…]`. docs/testing.md tells the rest.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** where tsconfig.test-build.json writes (its outDir) */
const OUT = '.test-build';
const require = createRequire(import.meta.url);

function run(file, args) {
  const r = spawnSync(process.execPath, [file, ...args], { cwd: ROOT, stdio: 'inherit' });
  if (r.error) throw r.error;
  return r.status ?? 1;
}

/** every file under dir (relative to dir, `/`-separated) */
function walk(dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath ?? e.path, e.name)).split(path.sep).join('/'));
}

/** the files tsc writes for a source file: TypeScript's extension mapping (x.ts → x.js, x.mts → x.mjs) */
const OUTPUT_OF = [['.ts', '.js'], ['.mts', '.mjs'], ['.cts', '.cjs'], ['.js', '.js'], ['.mjs', '.mjs'], ['.cjs', '.cjs']];

/**
 * Compiled files (repository-relative, under .test-build/) whose source is gone: a test deleted or
 * renamed. They are removed, or tap would still run them: the incremental build only writes.
 */
export function staleOutputs(root = ROOT) {
  return walk(path.join(root, OUT)).filter((rel) => {
    if (rel === '.tsbuildinfo') return false;
    const base = rel.replace(/\.map$/, '');
    const sources = OUTPUT_OF.filter(([, js]) => base.endsWith(js)).map(([src, js]) => base.slice(0, -js.length) + src);
    return !(sources.length > 0 ? sources : [base]).some((s) => fs.existsSync(path.join(root, s)));
  }).map((rel) => `${OUT}/${rel}`);
}

/**
 * The compiled files (repository-relative) the last build should have written and that are not
 * there, e.g. removed by hand: the incremental build trusts its record (.test-build/.tsbuildinfo)
 * of what it wrote and would not write them again. Every source of the program counts, not only
 * the tests: a test importing a compiled source that is gone fails to load.
 */
export function missingOutputs(root = ROOT) {
  let info;
  try {
    info = JSON.parse(fs.readFileSync(path.join(root, OUT, '.tsbuildinfo'), 'utf8'));
  } catch {
    return [];
  }
  const ts = require('typescript');
  const config = ts.getParsedCommandLineOfConfigFile(path.join(root, 'tsconfig.test-build.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  if (!config || !Array.isArray(info.fileNames)) return [];
  const sources = info.fileNames
    .map((f) => path.resolve(root, OUT, f))
    .filter((f) => !f.split(path.sep).includes('node_modules') && !/\.d\.[mc]?ts$/.test(f) && fs.existsSync(f));
  // every file of the program, imported ones (scripts/check-imports.mjs) as those tsconfig includes
  const program = { ...config, fileNames: sources };
  return sources
    .flatMap((f) => ts.getOutputFileNames(program, f, !ts.sys.useCaseSensitiveFileNames))
    .filter((f) => !fs.existsSync(f))
    .map((f) => path.relative(root, f).split(path.sep).join('/'));
}

function compile() {
  for (const rel of staleOutputs()) fs.rmSync(path.join(ROOT, rel));
  const tsc = require.resolve('typescript/bin/tsc');
  // dist/ (what `npm start` and the tests driving the compiled svc, svc-relay and control plane
  // run), brought up to date once here rather than by each such test file (test/cli/dist.ts)
  let status = run(tsc, ['-p', 'tsconfig.json']);
  if (status !== 0) return status;
  process.env['TEST_DIST_BUILT'] = '1';
  status = run(tsc, ['-p', 'tsconfig.test-build.json']);
  if (status !== 0) return status;
  // a compiled file removed by hand is written again by a full build
  if (missingOutputs().length > 0) {
    fs.rmSync(path.join(ROOT, OUT, '.tsbuildinfo'), { force: true });
    status = run(tsc, ['-p', 'tsconfig.test-build.json']);
  }
  return status;
}

/**
 * tap builds the plugins package.json names into itself on its first run after they change, but
 * that first run still gives its test processes the loaders of the previous build (TypeScript,
 * mock): build it first when the built plugins still have either.
 */
function tapBuilt(tapBin) {
  let signature = '';
  try {
    const built = fs.readFileSync(path.join(ROOT, 'node_modules/@tapjs/test/test-built/dist/esm/index.js'), 'utf8');
    signature = /export const signature = `([^`]*)`/.exec(built)?.[1] ?? '';
  } catch {
    signature = '';
  }
  if (signature && !signature.includes('@tapjs/typescript') && !signature.includes('@tapjs/mock')) return 0;
  return run(tapBin, ['build']);
}

/** the source test files (`*.test.ts`, repository-relative) under a folder of the repository */
function testsUnder(root, rel) {
  const found = [];
  const visit = (dir) => {
    for (const e of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const child = dir ? `${dir}/${e.name}` : e.name;
      if (e.isDirectory() && e.name !== 'node_modules' && e.name !== 'dist' && !e.name.startsWith('.')) visit(child);
      else if (e.isFile() && e.name.endsWith('.test.ts')) found.push(child);
    }
  };
  visit(rel);
  return found.sort();
}

/**
 * npm test's arguments → tap's. A test file or a folder, named from the repository's root or from
 * the folder `npm test` was typed in (npm runs the script at the root and tells that folder in
 * INIT_CWD), becomes the compiled tests (.test-build/…/x.test.js) of its sources; anything else
 * (tap's options, and an option's value given as the next argument: `--grep tampering`) passes
 * through as given; an option's value that names a file or folder is to be given with `=`.
 * `files`: whether a test file or folder was named (else the whole suite runs). Throws for a
 * file or folder that is not there (a misspelt name) or a folder that holds no test.
 */
export function tapArgs(args, { root = ROOT, cwd = process.env['INIT_CWD'] || process.cwd() } = {}) {
  let files = false;
  const argv = args.flatMap((arg, i) => {
    if (arg.startsWith('-')) return [arg];
    const abs = [path.resolve(cwd, arg), path.resolve(root, arg)].find((p) => fs.existsSync(p));
    if (abs === undefined) {
      const before = args[i - 1];
      if (before?.startsWith('-') && !before.includes('=')) return [arg];
      throw new Error(`${arg}: no such test file or folder (from ${cwd} or ${root})`);
    }
    files = true;
    const rel = path.relative(root, abs).split(path.sep).join('/');
    if (rel.startsWith('..') || path.isAbsolute(rel) || rel === OUT || rel.startsWith(`${OUT}/`)) return [abs];
    if (fs.statSync(abs).isDirectory()) {
      const tests = testsUnder(root, rel);
      if (tests.length === 0) throw new Error(`${arg}: no test file (*.test.ts) in that folder`);
      return tests.map((f) => `${OUT}/${f.replace(/\.ts$/, '.js')}`);
    }
    return rel.endsWith('.ts') ? [`${OUT}/${rel.replace(/\.ts$/, '.js')}`] : [rel];
  });
  return { files, argv };
}

/** the prefix of a run's temporary directory in memory: `svc-test-run-<pid of npm test>-…` */
const RUN_PREFIX = 'svc-test-run-';
/** room a run's temporary files may need at once: three test files, each with stores, engines and downloads */
const MIN_FREE_BYTES = 2 * 1024 ** 3;

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
};

/**
 * Where the test processes (and all they start) keep their temporary files, given as their TMPDIR:
 * TEST_TMPDIR if set, else a directory of this run in memory (/dev/shm) when the machine has
 * one with room where programs may run (not mounted noexec), else the OS temp dir (undefined:
 * TMPDIR is left as it is). On a virtual disk the suite's file churn (a store of ~1,000 files
 * copied for every test server, data directories made and removed) cost minutes of CPU in the
 * kernel, and more the busier the disk was. Directories of earlier runs of this user that were
 * killed before removing theirs are removed.
 */
export function testTmpDir(env = process.env, shm = '/dev/shm') {
  if (env['TEST_TMPDIR']) return { dir: env['TEST_TMPDIR'], own: false };
  try {
    if (!fs.statSync(shm).isDirectory()) return undefined;
    fs.accessSync(shm, fs.constants.W_OK);
    const room = fs.statfsSync(shm);
    if (room.bavail * room.bsize < MIN_FREE_BYTES) return undefined;
    for (const name of fs.readdirSync(shm)) {
      // only what a run of this user made: mkdtemp's name (six characters after the pid), a real
      // directory, this user's (another user's run may be alive in a PID namespace not seen here,
      // and root must not walk into a tree another user can change beneath it)
      const pid = Number(/^svc-test-run-(\d+)-[A-Za-z0-9]{6}$/.exec(name)?.[1]);
      if (!(pid > 0) || pid === process.pid || alive(pid)) continue;
      const stat = fs.lstatSync(path.join(shm, name), { throwIfNoEntry: false });
      if (stat?.isDirectory() && stat.uid === process.getuid?.()) fs.rmSync(path.join(shm, name), { recursive: true, force: true });
    }
    const dir = fs.mkdtempSync(path.join(shm, `${RUN_PREFIX}${process.pid}-`));
    // tests run programs they write there (an installed svc-relay): not in a folder mounted
    // noexec, as Docker mounts /dev/shm
    try {
      const probe = path.join(dir, 'exec-probe');
      fs.writeFileSync(probe, '');
      fs.chmodSync(probe, 0o700);
      fs.accessSync(probe, fs.constants.X_OK);
      fs.rmSync(probe);
    } catch {
      fs.rmSync(dir, { recursive: true, force: true });
      return undefined;
    }
    return { dir, own: true };
  } catch {
    return undefined;
  }
}

function main() {
  let tap;
  try {
    tap = tapArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`npm test: ${err.message}\n`);
    return 1;
  }
  // the test cache stays where it was (kept between runs); everything else goes to the run's dir
  process.env['TEST_CACHE_DIR'] ??= path.join(os.tmpdir(), 'svc-test-cache');
  const tmp = testTmpDir();
  if (tmp) process.env['TMPDIR'] = tmp.dir;
  try {
    return suite(tap);
  } finally {
    if (tmp?.own) fs.rmSync(tmp.dir, { recursive: true, force: true });
  }
}

function suite(tap) {
  let status = compile();
  if (status !== 0) {
    process.stderr.write('npm test: the sources or the tests do not compile (above); no test was run\n');
    return status;
  }
  const tapBin = path.join(path.dirname(require.resolve('tap/package.json')), 'dist/esm/run.mjs');
  status = tapBuilt(tapBin);
  if (status !== 0) return status;
  // the test cache, built once here rather than by each of the first test files at once
  status = run(path.join(ROOT, OUT, 'test/helpers/warm-cache.js'), []);
  if (status !== 0) return status;
  if (tap.files) return run(tapBin, tap.argv);
  // the suite (package.json "tap": three files at a time, test/latency/ left out), then the latency
  // tests one at a time, with nothing else running beside them
  status = run(tapBin, tap.argv);
  const latency = testsUnder(ROOT, 'test/latency').map((f) => `${OUT}/${f.replace(/\.ts$/, '.js')}`);
  const second = latency.length > 0 ? run(tapBin, ['--jobs=1', ...tap.argv, ...latency]) : 0;
  return status !== 0 ? status : second;
}

// run as a program (npm test); test/meta/test-script.test.ts imports it for its functions
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exitCode = main();
