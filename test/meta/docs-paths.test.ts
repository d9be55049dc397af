/**
 * The manual names files that exist: in every page of docs/ and README.md, each source path in
 * backticks (`relay-agent/supervisor.ts`, `query/sql/walker.ts`, `examples/verify-audit.mjs`)
 * exists, from the repository's root or, as docs/architecture.md names them, from control-plane/;
 * `dist/x.js` stands for `x.ts`. A bare file name (`walker.ts`) must be the name of some source
 * file. And where a path is followed by a name (`relays/index.ts` `register`), that file holds the
 * name. Files move when modules are split; this keeps the pages from pointing at where they were.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/root.js';

const SKIP_DIRS = new Set(['node_modules', 'dist', '.git', '.svc-data', '.tap']);
const SOURCE = /\.(ts|mjs|js)$/;

function walk(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = dir === '' ? e.name : `${dir}/${e.name}`;
    if (e.isDirectory()) return SKIP_DIRS.has(e.name) ? [] : walk(rel);
    return [rel];
  });
}

const files = walk('');
const basenames = new Set(files.filter((f) => SOURCE.test(f)).map((f) => path.posix.basename(f)));
const pages = ['README.md', ...files.filter((f) => f.startsWith('docs/') && f.endsWith('.md'))];

/** the file a path in the manual stands for, or null */
function resolveDocPath(p: string, exists: (rel: string) => boolean): string | null {
  const source = p.startsWith('dist/') ? p.slice('dist/'.length).replace(/\.js$/, '.ts') : p;
  for (const candidate of [source, `control-plane/${source}`]) if (exists(candidate)) return candidate;
  return null;
}

/** source paths in backticks, with the name in backticks right after one when there is one */
function pathsIn(text: string): { path: string; name: string | null; line: number }[] {
  const out: { path: string; name: string | null; line: number }[] = [];
  text.split('\n').forEach((line, i) => {
    const re = /`([A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)*\.(?:ts|mjs|js))`(?: `([A-Za-z_$][\w$]*)(?:\.[\w$]+)*`)?/g;
    for (let m = re.exec(line); m; m = re.exec(line)) out.push({ path: m[1] as string, name: m[2] ?? null, line: i + 1 });
  });
  return out;
}

t.test('the helpers', async (t) => {
  t.same(pathsIn('see `relays/index.ts` `register` and `walker.ts`, `dist/bench/relay.js`'), [
    { path: 'relays/index.ts', name: 'register', line: 1 },
    { path: 'walker.ts', name: null, line: 1 },
    { path: 'dist/bench/relay.js', name: null, line: 1 },
  ]);
  t.same(pathsIn('`DemoBackend.prepare` and `/openapi.json`'), [], 'identifiers and URLs are not paths');
  const has = (rel: string): boolean => existsSync(path.join(ROOT, rel));
  t.equal(resolveDocPath('query/sql/walker.ts', has), 'control-plane/query/sql/walker.ts');
  t.equal(resolveDocPath('dist/bench/relay.js', has), 'bench/relay.ts');
  t.equal(resolveDocPath('relay-agent/tunnel.ts', has), null, 'a file that does not exist is caught');
});

t.test('every source file the manual names exists, and holds the name given with it', async (t) => {
  t.ok(pages.length > 10, `${pages.length} pages`);
  const exists = (rel: string): boolean => existsSync(path.join(ROOT, rel));
  const problems: string[] = [];
  let checked = 0;
  for (const page of pages) {
    for (const ref of pathsIn(readFileSync(path.join(ROOT, page), 'utf8'))) {
      checked++;
      const where = `${page}:${ref.line}: \`${ref.path}\``;
      if (!ref.path.includes('/')) {
        if (!basenames.has(ref.path)) problems.push(`${where}: no source file has this name`);
        continue;
      }
      const file = resolveDocPath(ref.path, exists);
      if (file === null) {
        problems.push(`${where}: no such file (from the root or control-plane/)`);
        continue;
      }
      if (ref.name !== null && !new RegExp(`\\b${ref.name.replace(/\$/g, '\\$')}\\b`).test(readFileSync(path.join(ROOT, file), 'utf8'))) {
        problems.push(`${where} \`${ref.name}\`: ${file} has no ${ref.name}`);
      }
    }
  }
  t.ok(checked > 100, `${checked} paths checked`);
  t.same(problems, [], 'the manual points at files (and names) that are there');
});
