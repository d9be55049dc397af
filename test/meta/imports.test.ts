/**
 * The sources' import graph (scripts/check-imports.mjs): no import cycle but the known ones it
 * lists with their reason, and the dependency direction kept (protocol/ and pki/ import nothing
 * from control-plane/, relay-agent/ or cli/; relay-agent/ nothing from control-plane/). The
 * checker itself is tried on small trees that break each rule.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import ts from 'typescript';
import { checkImports, cyclicComponents, importGraph, KNOWN_CYCLES } from '../../scripts/check-imports.mjs';
import { ROOT } from '../cli/dist.js';
import { fileTree } from '../helpers/file-tree.js';

t.test('the sources: no new cycle, the dependency direction kept', async (t) => {
  const { graph } = importGraph(ROOT);
  t.ok(graph.size > 100, `${graph.size} source files read`);
  t.ok((graph.get('control-plane/app.ts') ?? []).includes('control-plane/config.ts'), 'imports are resolved to files');
  t.same(checkImports(ROOT), []);
  const present = new Set(cyclicComponents(graph).map((c) => c.join(' ')));
  for (const known of KNOWN_CYCLES.keys()) if (!present.has(known)) t.comment(`a known cycle is gone: remove it from KNOWN_CYCLES: ${known}`);
});

t.test('the checker reads the same relative imports as TypeScript does', async (t) => {
  const { graph } = importGraph(ROOT);
  const differ: string[] = [];
  for (const [file, deps] of graph) {
    const specs = ts.preProcessFile(fs.readFileSync(path.join(ROOT, file), 'utf8'), true, true).importedFiles.map((f) => f.fileName);
    const resolved = specs
      .filter((s) => s.startsWith('./') || s.startsWith('../'))
      .map((s) => path.posix.normalize(path.posix.join(path.posix.dirname(file), s)).replace(/\.js$/, '.ts'))
      .map((s) => (fs.existsSync(path.join(ROOT, s)) ? s : `${s.replace(/\.ts$/, '')}/index.ts`))
      .filter((s) => s.endsWith('.ts'));
    const expected = [...new Set(resolved)].sort();
    if (expected.join() !== deps.join()) differ.push(`${file}: TypeScript ${expected.join(', ')}; checker ${deps.join(', ')}`);
  }
  t.same(differ, []);
});

t.test('`node scripts/check-imports.mjs` exits 0 on the sources', async (t) => {
  const out = execFileSync(process.execPath, [path.join(ROOT, 'scripts/check-imports.mjs')], { encoding: 'utf8' });
  t.match(out, /^imports: \d+ files, no cycle/);
});

const tree = (t: Test, files: Record<string, string>): string => fileTree(t, files, 'imports-');

t.test('the checker finds a cycle, type-only or through a re-export, written across lines', async (t) => {
  const dir = tree(t, {
    'control-plane/a.ts': "import {\n  b,\n} from './b.js';\nexport const a = b;\n",
    'control-plane/b.ts': "export * from './c/index.js';\nexport const b = 1;\n",
    'control-plane/c/index.ts': "import type { A } from '../a.js';\n// import { x } from '../nowhere.js' (a comment is not an import)\nexport type C = A;\n",
    'control-plane/d.ts': "const later = () => import('./d.js');\nexport { later };\n",
    'control-plane/e.ts': "import { a } from './a.js';\nexport const url = 'http://example.com/x.js';\nexport const e = a;\n",
  });
  t.same(cyclicComponents(importGraph(dir).graph), [['control-plane/a.ts', 'control-plane/b.ts', 'control-plane/c/index.ts'], ['control-plane/d.ts']]);
  t.same(checkImports(dir), [
    'import cycle: control-plane/a.ts → control-plane/b.ts → control-plane/c/index.ts → control-plane/a.ts',
    'import cycle: control-plane/d.ts → control-plane/d.ts',
  ]);
});

t.test('the checker finds imports against the dependency direction, and imports of no file', async (t) => {
  const dir = tree(t, {
    'control-plane/x.ts': "export const x = 1;\n",
    'protocol/p.ts': "import { x } from '../control-plane/x.js';\nimport { r } from '../relay-agent/r.js';\nexport const p = x + r;\n",
    'pki/k.ts': "import { c } from '../cli/c.js';\nexport const k = c;\n",
    'cli/c.ts': "import { x } from '../control-plane/x.js';\nexport const c = x;\n",
    'relay-agent/r.ts': "import { x } from '../control-plane/x.js';\nimport { p } from '../protocol/p.js';\nimport { gone } from './gone.js';\nexport const r = x + p + gone;\n",
  });
  t.same(checkImports(dir), [
    'relay-agent/r.ts: ./gone.js resolves to no file',
    'pki/k.ts imports cli/c.ts: pki/ must not import from cli/',
    'protocol/p.ts imports control-plane/x.ts: protocol/ must not import from control-plane/',
    'protocol/p.ts imports relay-agent/r.ts: protocol/ must not import from relay-agent/',
    'relay-agent/r.ts imports control-plane/x.ts: relay-agent/ must not import from control-plane/',
    'import cycle: protocol/p.ts → relay-agent/r.ts → protocol/p.ts',
  ]);
});
