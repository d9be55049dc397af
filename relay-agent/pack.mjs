// @ts-check
/**
 * The relay package's build, run by `npm pack` in relay-agent/ (its `prepack` script; `postpack`
 * runs it with --clean), from a checkout where `npm ci` has been run at the root:
 *
 *  1. refuses to pack when a dependency is not pinned to exactly the version in the root
 *     package-lock.json, or `bundleDependencies` does not name every dependency;
 *  2. compiles cli/svc-relay.ts and what it imports (relay-agent/, pg-read/, protocol/, pki/) into a fresh
 *     relay-agent/dist/ (relay-agent/tsconfig.json; no tests, no control plane, no source maps);
 *  3. refuses when the package's version is not the relay's RELAY_AGENT_VERSION
 *     (`svc-relay/<version>` in relay-agent/version.ts, the source), or the compiled code imports a
 *     package that is not a dependency (or a dependency is imported by nothing);
 *  4. copies the dependencies and everything they need from the checkout's node_modules (what
 *     `npm ci` installed from the lockfile, each checked against its lockfile version) into
 *     relay-agent/node_modules, which `bundleDependencies` puts in the tarball: installing it
 *     needs no registry and no cache, and gets exactly the versions the tests ran with.
 *     (npm ignores an npm-shrinkwrap.json in a tarball installed from a file, and asks the
 *     registry for each dependency's metadata, so bundling is what makes an offline install work.)
 * `--clean` (postpack) removes relay-agent/node_modules again: the sources next to it must resolve
 * their packages from the root's node_modules, as the tests and the type-check do.
 *
 * Plain JavaScript because it runs before anything is compiled; type-checked with the tests
 * (tsconfig.test.json) and imported by test/relay-agent/package.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const RELAY_DIR = path.dirname(fileURLToPath(import.meta.url));
export const ROOT_DIR = path.resolve(RELAY_DIR, '..');
export const DIST_DIR = path.join(RELAY_DIR, 'dist');
export const BUNDLED_DIR = path.join(RELAY_DIR, 'node_modules');

/**
 * @typedef {{ name: string, version: string, dependencies?: Record<string, string>, bundleDependencies?: string[] }} PackageJson
 * @typedef {{ version?: string, integrity?: string, resolved?: string, license?: string, dependencies?: Record<string, string>, optionalDependencies?: Record<string, string>, peerDependencies?: Record<string, string>, peerDependenciesMeta?: Record<string, { optional?: boolean }>, engines?: Record<string, string> | string[], os?: string[], cpu?: string[], bin?: Record<string, string>, hasInstallScript?: boolean, optional?: boolean, dev?: boolean, devOptional?: boolean, peer?: boolean, link?: boolean }} LockEntry
 * @typedef {{ name?: string, version?: string, lockfileVersion: number, requires?: boolean, packages: Record<string, LockEntry> }} Lockfile
 */

/** @param {string} file @returns {unknown} */
function readJson(file) {
  return JSON.parse(readFileSync(file, 'utf8'));
}

/** @returns {PackageJson} */
export function relayPackage() {
  return /** @type {PackageJson} */ (readJson(path.join(RELAY_DIR, 'package.json')));
}

/** @returns {Lockfile} */
export function rootLockfile() {
  return /** @type {Lockfile} */ (readJson(path.join(ROOT_DIR, 'package-lock.json')));
}

/**
 * Where Node would find `name` when required from the package at `from` (a lockfile key: '' is
 * the root, else `node_modules/a/node_modules/b`): its own node_modules, then each ancestor's.
 * @param {Lockfile} lock @param {string} from @param {string} name @returns {string | undefined}
 */
function resolveIn(lock, from, name) {
  let dir = from;
  for (;;) {
    const key = dir === '' ? `node_modules/${name}` : `${dir}/node_modules/${name}`;
    if (lock.packages[key]) return key;
    if (dir === '') return undefined;
    const i = dir.lastIndexOf('/node_modules/');
    dir = i < 0 ? '' : dir.slice(0, i);
  }
}

/**
 * Each relay dependency whose version is not exactly the root lockfile's (empty: all pinned).
 * @param {PackageJson} pkg @param {Lockfile} lock @returns {string[]}
 */
export function pinProblems(pkg, lock) {
  const problems = [];
  for (const [name, spec] of Object.entries(pkg.dependencies ?? {})) {
    const entry = lock.packages[`node_modules/${name}`];
    if (!entry?.version) problems.push(`${name}: not in the root package-lock.json`);
    else if (entry.dev) problems.push(`${name}: only a devDependency of the root package`);
    else if (spec !== entry.version) problems.push(`${name}: "${spec}" in relay-agent/package.json, ${entry.version} in the root package-lock.json`);
  }
  return problems;
}

/**
 * Each relay dependency whose version is not exactly the root lockfile's, or that
 * `bundleDependencies` does not name (empty: all pinned and bundled).
 * @param {PackageJson} pkg @param {Lockfile} lock @returns {string[]}
 */
export function packageProblems(pkg, lock) {
  const problems = pinProblems(pkg, lock);
  const deps = Object.keys(pkg.dependencies ?? {}).sort();
  const bundled = [...(pkg.bundleDependencies ?? [])].sort();
  if (JSON.stringify(deps) !== JSON.stringify(bundled)) problems.push(`bundleDependencies (${bundled.join(', ')}) must name exactly the dependencies (${deps.join(', ')})`);
  return problems;
}

/**
 * What the relay's dependencies need installed, as root lockfile keys (`node_modules/pg`, or a
 * nested `node_modules/a/node_modules/b`), at the places Node resolves them from: the closure
 * over dependencies, optional dependencies (when the lockfile has them) and required peers.
 * `optional` is true when a package is only reached through optional dependencies.
 * Throws when the lockfile lacks a required package.
 * @param {PackageJson} pkg @param {Lockfile} lock @returns {{ key: string, version: string, optional: boolean }[]}
 */
export function dependencyClosure(pkg, lock) {
  /** @type {Map<string, boolean>} lockfile key -> reached only through optional edges */
  const reached = new Map();
  /** @type {{ key: string, optional: boolean }[]} */
  const queue = Object.keys(pkg.dependencies ?? {}).map((name) => ({ key: `node_modules/${name}`, optional: false }));
  for (let item = queue.shift(); item; item = queue.shift()) {
    const { key, optional } = item;
    const seen = reached.get(key);
    if (seen !== undefined && (seen === false || optional)) continue;
    const entry = lock.packages[key];
    if (!entry) throw new Error(`${key} is not in the root package-lock.json`);
    reached.set(key, optional);
    /** @type {[string, boolean][]} */
    const edges = [];
    for (const n of Object.keys(entry.dependencies ?? {})) edges.push([n, false]);
    for (const n of Object.keys(entry.optionalDependencies ?? {})) edges.push([n, true]);
    for (const n of Object.keys(entry.peerDependencies ?? {})) if (entry.peerDependenciesMeta?.[n]?.optional !== true) edges.push([n, false]);
    for (const [name, optionalEdge] of edges) {
      const to = resolveIn(lock, key, name);
      if (to === undefined) {
        if (optionalEdge) continue;
        throw new Error(`${key} needs ${name}, which the root package-lock.json does not hold`);
      }
      queue.push({ key: to, optional: optional || optionalEdge });
    }
  }
  return [...reached.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, optional]) => ({ key, version: /** @type {string} */ (lock.packages[key]?.version), optional }));
}

/**
 * Copies the closure from the checkout's node_modules into relay-agent/node_modules (each package
 * without its own node_modules: nested packages of the closure are copied as entries of their
 * own). Throws when an installed version differs from the lockfile's, a required package is not
 * installed, or a package has an install script (its build would be this machine's).
 * @param {PackageJson} pkg @param {Lockfile} lock
 */
export function copyBundled(pkg, lock) {
  rmSync(BUNDLED_DIR, { recursive: true, force: true });
  for (const { key, version, optional } of dependencyClosure(pkg, lock)) {
    const from = path.join(ROOT_DIR, key);
    if (!existsSync(path.join(from, 'package.json'))) {
      if (optional) continue;
      throw new Error(`${key} is not installed in the checkout: run npm ci at the root first`);
    }
    if (lock.packages[key]?.hasInstallScript) throw new Error(`${key} has an install script; the relay cannot bundle a build made on this machine`);
    const installed = /** @type {{ version?: string }} */ (readJson(path.join(from, 'package.json'))).version;
    if (installed !== version) throw new Error(`${key} is ${installed} in node_modules but ${version} in the root package-lock.json: run npm ci at the root`);
    const own = path.join(from, 'node_modules');
    cpSync(from, path.join(RELAY_DIR, key), { recursive: true, filter: (src) => src !== own });
  }
}

/**
 * The npm packages (not node: built-ins, not relative files) the compiled relay imports.
 * @param {string} dir @returns {Set<string>}
 */
export function importedPackages(dir = DIST_DIR) {
  const builtins = new Set(builtinModules);
  /** @type {Set<string>} */
  const found = new Set();
  /** @param {string} d */
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.js')) {
        const text = readFileSync(p, 'utf8');
        // static and dynamic imports, and require() (createRequire(import.meta.url)('pg/lib/utils.js'))
        const specifiers = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)|(?:\brequire|\bcreateRequire\([^)]*\))\(\s*['"]([^'"]+)['"]\s*\)/g;
        for (const m of text.matchAll(specifiers)) {
          const spec = /** @type {string} */ (m[1] ?? m[2] ?? m[3] ?? m[4]);
          if (spec.startsWith('.') || spec.startsWith('node:') || builtins.has(spec)) continue;
          const parts = spec.split('/');
          found.add(spec.startsWith('@') ? parts.slice(0, 2).join('/') : /** @type {string} */ (parts[0]));
        }
      }
    }
  };
  walk(dir);
  return found;
}

/** @param {string[]} problems */
function fail(problems) {
  process.stderr.write(`relay-agent prepack: cannot pack the relay:\n  ${problems.join('\n  ')}\n`);
  process.exit(1);
}

async function main() {
  if (process.argv.includes('--clean')) {
    rmSync(BUNDLED_DIR, { recursive: true, force: true });
    return;
  }
  const pkg = relayPackage();
  const lock = rootLockfile();
  const problems = packageProblems(pkg, lock);
  if (problems.length > 0) fail(problems);

  rmSync(DIST_DIR, { recursive: true, force: true });
  rmSync(BUNDLED_DIR, { recursive: true, force: true });
  const tsc = createRequire(path.join(ROOT_DIR, 'package.json')).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', path.join(RELAY_DIR, 'tsconfig.json')], { stdio: 'inherit' });

  /** @type {{ RELAY_AGENT_VERSION: string }} */
  const version = await import(pathToFileURL(path.join(DIST_DIR, 'relay-agent/version.js')).href);
  if (version.RELAY_AGENT_VERSION !== `svc-relay/${pkg.version}`) {
    fail([`relay-agent/package.json's version ${pkg.version} is not RELAY_AGENT_VERSION (${version.RELAY_AGENT_VERSION}, relay-agent/version.ts): set the package's version to it`]);
  }
  const imported = importedPackages();
  const declared = new Set(Object.keys(pkg.dependencies ?? {}));
  const undeclared = [...imported].filter((n) => !declared.has(n)).map((n) => `${n}: imported by the relay but not a dependency in relay-agent/package.json`);
  const unused = [...declared].filter((n) => !imported.has(n)).map((n) => `${n}: a dependency in relay-agent/package.json that the relay never imports`);
  if (undeclared.length + unused.length > 0) fail([...undeclared, ...unused]);

  try {
    copyBundled(pkg, lock);
  } catch (err) {
    rmSync(BUNDLED_DIR, { recursive: true, force: true });
    fail([/** @type {Error} */ (err).message]);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
