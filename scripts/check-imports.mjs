#!/usr/bin/env node
/**
 * The import graph of the sources: every relative import (static `import`/`export … from`, and
 * `import('…')` with a literal path) of every .ts file under the source folders, resolved to a
 * file. It fails (exit 1, one line per problem) on
 *  - an import cycle (type-only imports count too: they tie the modules together just the same);
 *  - an import against the dependency direction: protocol/ and pki/ import nothing from
 *    control-plane/, relay-agent/ or cli/, nor does pg-read/; relay-agent/ imports nothing from
 *    control-plane/;
 *  - a relative import that resolves to no file.
 * Plain Node.js, no dependency: `node scripts/check-imports.mjs` (test/meta/imports.test.ts runs it).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** the folders whose .ts files are checked (those that exist) */
export const SOURCE_DIRS = ['cli', 'control-plane', 'protocol', 'pki', 'relay-agent', 'pg-read'];

/** folder → the top-level folders it must not import from */
export const FORBIDDEN = {
  protocol: ['control-plane', 'relay-agent', 'cli'],
  pki: ['control-plane', 'relay-agent', 'cli'],
  'relay-agent': ['control-plane'],
  'pg-read': ['control-plane', 'relay-agent', 'cli'],
};

/**
 * Cycles not broken yet, by their files (sorted, space-separated: the whole strongly connected
 * component, so a cycle that grows is reported again), with the reason. Remove an entry once its
 * cycle is gone.
 */
export const KNOWN_CYCLES = new Map([
  [
    'control-plane/tunnel/forward.ts control-plane/tunnel/index.ts control-plane/tunnel/leases.ts',
    'types only, but for index.ts → forward.ts (FORWARD_PATH, serveForward): leases.ts names TunnelRegistry and LiveTunnel, forward.ts names LeaseHolder; breaking it moves those types out of tunnel/index.ts',
  ],
]);

const IMPORT = /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[\w*${}\s,]+?\s+from\s+)?['"](\.{1,2}\/[^'"]+)['"]|\bimport\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

/**
 * `.ts` files under `dir`, recursively (no dist/, node_modules/ or .d.ts).
 * @param {string} dir
 * @returns {string[]}
 */
function tsFiles(dir) {
  /** @type {string[]} */
  const out = [];
  if (!fs.existsSync(dir)) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules' && e.name !== 'dist') out.push(...tsFiles(p));
    } else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/**
 * Comments removed (strings kept), so that an import written in a comment is not read as one.
 * @param {string} text
 */
function stripComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\/|([^:\\'"`]|^)\/\/[^\n]*/g, (/** @type {string} */ m, /** @type {string | undefined} */ before) => (m.startsWith('/*') ? ' ' : `${before ?? ''}`));
}

/**
 * The file a relative specifier names: `./x.js` is `./x.ts` in the sources.
 * @param {string} from the importing file
 * @param {string} spec
 */
function resolve(from, spec) {
  const base = path.resolve(path.dirname(from), spec);
  const candidates = [base.replace(/\.js$/, '.ts'), base.replace(/\.mjs$/, '.mts'), base, `${base}.ts`, path.join(base, 'index.ts')];
  return candidates.find((c) => fs.existsSync(c) && fs.statSync(c).isFile());
}

/**
 * The relative imports of every source file under `root`.
 * @param {string} root
 * @returns {{ graph: Map<string, string[]>, unresolved: string[] }} repo-relative paths (with /)
 */
export function importGraph(root) {
  const rel = (/** @type {string} */ p) => path.relative(root, p).split(path.sep).join('/');
  /** @type {Map<string, string[]>} */
  const graph = new Map();
  /** @type {string[]} */
  const unresolved = [];
  for (const dir of SOURCE_DIRS) {
    for (const file of tsFiles(path.join(root, dir))) {
      const text = stripComments(fs.readFileSync(file, 'utf8'));
      const deps = new Set();
      for (const m of text.matchAll(IMPORT)) {
        const spec = m[1] ?? m[2];
        if (spec === undefined) continue;
        const target = resolve(file, spec);
        if (target === undefined) unresolved.push(`${rel(file)}: ${spec} resolves to no file`);
        else if (target.endsWith('.ts')) deps.add(rel(target));
      }
      graph.set(rel(file), [...deps].sort());
    }
  }
  return { graph, unresolved };
}

/**
 * The strongly connected components of the graph that hold a cycle (more than one file, or a
 * file importing itself), each sorted.
 * @param {Map<string, string[]>} graph
 * @returns {string[][]}
 */
export function cyclicComponents(graph) {
  // Tarjan's algorithm, iterative (deep graphs must not overflow the stack)
  let index = 0;
  /** @type {Map<string, number>} */ const idx = new Map();
  /** @type {Map<string, number>} */ const low = new Map();
  /** @type {string[]} */ const stack = [];
  const onStack = new Set();
  /** @type {string[][]} */ const components = [];
  const lowOf = (/** @type {string} */ v) => /** @type {number} */ (low.get(v));
  for (const start of [...graph.keys()].sort()) {
    if (idx.has(start)) continue;
    /** @type {[string, number][]} */
    const work = [[start, 0]];
    while (work.length > 0) {
      const frame = /** @type {[string, number]} */ (work[work.length - 1]);
      const [v, i] = frame;
      if (i === 0 && !idx.has(v)) {
        idx.set(v, index);
        low.set(v, index);
        index++;
        stack.push(v);
        onStack.add(v);
      }
      const deps = graph.get(v) ?? [];
      if (i < deps.length) {
        frame[1] = i + 1;
        const w = /** @type {string} */ (deps[i]);
        if (!graph.has(w)) continue;
        if (!idx.has(w)) work.push([w, 0]);
        else if (onStack.has(w)) low.set(v, Math.min(lowOf(v), /** @type {number} */ (idx.get(w))));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent[0], Math.min(lowOf(parent[0]), lowOf(v)));
      if (lowOf(v) !== idx.get(v)) continue;
      /** @type {string[]} */
      const comp = [];
      for (;;) {
        const w = /** @type {string} */ (stack.pop());
        onStack.delete(w);
        comp.push(w);
        if (w === v) break;
      }
      if (comp.length > 1 || deps.includes(v)) components.push(comp.sort());
    }
  }
  return components.sort((a, b) => (a[0] ?? '').localeCompare(b[0] ?? ''));
}

/**
 * One shortest cycle through the first file of a component (breadth first), to show it.
 * @param {Map<string, string[]>} graph
 * @param {string[]} component
 */
export function shortestCycle(graph, component) {
  const members = new Set(component);
  const first = /** @type {string} */ (component[0]);
  /** @type {Map<string, string>} */
  const from = new Map();
  const queue = [first];
  while (queue.length > 0) {
    const v = /** @type {string} */ (queue.shift());
    for (const w of graph.get(v) ?? []) {
      if (!members.has(w)) continue;
      if (w === first) {
        const path = [v];
        while (path[0] !== first) path.unshift(/** @type {string} */ (from.get(/** @type {string} */ (path[0]))));
        return [...path, first];
      }
      if (!from.has(w)) {
        from.set(w, v);
        queue.push(w);
      }
    }
  }
  return [first, first];
}

/**
 * Imports against the dependency direction ({@link FORBIDDEN}).
 * @param {Map<string, string[]>} graph
 */
export function directionViolations(graph) {
  /** @type {string[]} */
  const out = [];
  for (const [file, deps] of graph) {
    const banned = FORBIDDEN[/** @type {keyof typeof FORBIDDEN} */ (file.split('/')[0])];
    if (!banned) continue;
    for (const dep of deps) {
      const top = dep.split('/')[0] ?? '';
      if (banned.includes(top)) out.push(`${file} imports ${dep}: ${file.split('/')[0]}/ must not import from ${top}/`);
    }
  }
  return out.sort();
}

/**
 * Every problem of the tree at `root`, one line each (empty: all is well).
 * @param {string} root
 * @returns {string[]}
 */
export function checkImports(root) {
  const { graph, unresolved } = importGraph(root);
  const cycles = cyclicComponents(graph)
    .filter((c) => !KNOWN_CYCLES.has(c.join(' ')))
    .map((c) => {
      const shown = shortestCycle(graph, c);
      return `import cycle: ${shown.join(' → ')}${c.length > shown.length - 1 ? ` (${c.length} files tied together: ${c.join(', ')})` : ''}`;
    });
  return [...unresolved, ...directionViolations(graph), ...cycles];
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const problems = checkImports(root);
  for (const p of problems) process.stderr.write(`${p}\n`);
  if (problems.length > 0) process.exit(1);
  process.stdout.write(`imports: ${importGraph(root).graph.size} files, no cycle but the ${KNOWN_CYCLES.size} known (KNOWN_CYCLES), dependency direction kept\n`);
}
