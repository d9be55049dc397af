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

/**
 * Compiled files whose source is gone (a test deleted or renamed) are removed, or tap would still
 * run them: the incremental build only writes.
 */
function prune() {
  const out = path.join(ROOT, OUT);
  for (const rel of walk(out)) {
    if (rel === '.tsbuildinfo') continue;
    const base = rel.replace(/\.map$/, '');
    const sources = base.endsWith('.js') ? [base.replace(/\.js$/, '.ts')] : [base];
    if (!sources.some((s) => fs.existsSync(path.join(ROOT, s)))) fs.rmSync(path.join(out, rel));
  }
}

function compile() {
  prune();
  const tsc = require.resolve('typescript/bin/tsc');
  // dist/ (what `npm start` and the tests driving the compiled svc, svc-relay and control plane
  // run), brought up to date once here rather than by each such test file (test/cli/dist.ts)
  let status = run(tsc, ['-p', 'tsconfig.json']);
  if (status !== 0) return status;
  process.env['TEST_DIST_BUILT'] = '1';
  status = run(tsc, ['-p', 'tsconfig.test-build.json']);
  if (status !== 0) return status;
  // the incremental build trusts its record of what it wrote: a compiled test removed by hand is
  // written again by a full build
  const missing = walk(path.join(ROOT, 'test')).filter((f) => f.endsWith('.ts') && !fs.existsSync(path.join(ROOT, OUT, 'test', f.replace(/\.ts$/, '.js'))));
  if (missing.length > 0) {
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

/** a source test file → its compiled counterpart, a folder → the compiled tests under it; anything else as given */
function compiled(arg) {
  if (arg.startsWith('-')) return [arg];
  const rel = path.relative(ROOT, path.resolve(arg)).split(path.sep).join('/');
  if (rel.startsWith('..') || rel.startsWith(`${OUT}/`)) return [arg];
  if (rel.endsWith('.ts')) return [path.join(OUT, rel.replace(/\.ts$/, '.js'))];
  if (fs.existsSync(path.join(ROOT, rel)) && fs.statSync(path.join(ROOT, rel)).isDirectory()) {
    const dir = path.join(OUT, rel);
    return walk(path.join(ROOT, dir)).filter((f) => f.endsWith('.test.js')).map((f) => path.join(dir, f));
  }
  return [arg];
}

function main() {
  const args = process.argv.slice(2);
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
  const files = args.filter((a) => !a.startsWith('-'));
  if (files.length > 0) return run(tapBin, args.flatMap(compiled));
  // the suite (package.json "tap": three files at a time, test/latency/ left out), then the latency
  // tests one at a time, with nothing else running beside them
  status = run(tapBin, args);
  const latencyDir = path.join(OUT, 'test/latency');
  const latency = walk(path.join(ROOT, latencyDir)).filter((f) => f.endsWith('.test.js')).map((f) => path.join(latencyDir, f));
  const second = latency.length > 0 ? run(tapBin, ['--jobs=1', ...args, ...latency]) : 0;
  return status !== 0 ? status : second;
}

process.exitCode = main();
