/**
 * Where the repository is, for tests that read its files (sources, docs, examples): the same
 * answer when a test runs from its source (`test/…/x.test.ts`) and when `npm test` runs it compiled
 * (`.test-build/test/…/x.test.js`, docs/testing.md).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** the folder the compiled tests and sources are written to (tsconfig.test-build.json) */
export const TEST_BUILD_DIR = '.test-build';

/**
 * The repository holding a folder: the one that holds .test-build/ when the folder is inside it
 * (whatever tsc wrote there: a JSON module a test imports, package.json included, is copied into
 * it), else the nearest folder above that holds package.json.
 */
export function findRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (path.basename(dir) === TEST_BUILD_DIR) return path.dirname(dir);
    if (path.dirname(dir) === dir) break;
  }
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

/** the repository's root folder */
export const ROOT = findRoot(path.dirname(fileURLToPath(import.meta.url)));

/**
 * The source file (repository-relative, `/`-separated) of a module, given its `import.meta.url`:
 * `test/meta/x.test.ts` for `.test-build/test/meta/x.test.js` as for the source itself.
 */
export function sourceOf(moduleUrl: string): string {
  const rel = path.relative(ROOT, fileURLToPath(moduleUrl)).split(path.sep).join('/');
  return rel.startsWith(`${TEST_BUILD_DIR}/`) ? rel.slice(TEST_BUILD_DIR.length + 1).replace(/\.js$/, '.ts') : rel;
}

/**
 * The URL of a module beside `moduleUrl` (its `import.meta.url`), named without extension: `.ts`
 * when running from the sources, `.js` when compiled.
 */
export function besideModule(name: string, moduleUrl: string): URL {
  return new URL(`./${name}.${moduleUrl.endsWith('.ts') ? 'ts' : 'js'}`, moduleUrl);
}
