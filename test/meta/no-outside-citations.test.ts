/**
 * The code, the tests and the manual cite only what this repository holds: no tracked file names
 * the design documents that lived outside it (CONTRACT.md, DESIGN.md) or a `../shared` folder
 * beside it. The decisions they held are stated in docs/ (docs/decisions.md and the topical pages),
 * and that is what comments cite.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT, sourceOf } from '../helpers/root.js';

const SELF = sourceOf(import.meta.url);
const OUTSIDE = /CONTRACT\.md|DESIGN\.md|\.\.\/shared/;

function trackedFiles(): string[] | null {
  try {
    return execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
      .split('\0')
      .filter((f) => f !== '');
  } catch {
    return null;
  }
}

const files = trackedFiles();

t.test('no tracked file cites a document outside the repository', { skip: files === null ? 'not a git checkout: git ls-files is not available' : false }, async (t) => {
  const list = (files ?? []).filter((f) => f !== SELF && !f.split('/').includes('node_modules'));
  t.ok(list.length > 100, `${list.length} tracked files`);
  t.ok(list.includes('README.md') && list.some((f) => f.startsWith('control-plane/')), 'the list holds the README and the sources');
  const offenders: string[] = [];
  for (const f of list) {
    const full = path.join(ROOT, f);
    if (!existsSync(full) || !statSync(full).isFile()) continue; // deleted in the working tree
    readFileSync(full, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (OUTSIDE.test(line)) offenders.push(`${f}:${i + 1}: ${line.trim()}`);
      });
  }
  t.same(offenders, [], 'cite docs/ (docs/decisions.md or the topical page) instead');
});

t.test('the pattern catches each outside name', async (t) => {
  for (const name of ['CONTRACT', 'DESIGN']) t.ok(OUTSIDE.test(`see ${name}.md "Errors"`), `${name}.md`);
  t.ok(OUTSIDE.test(`import x from '${['..', 'shared', 'x.js'].join('/')}'`), '../shared');
  t.notOk(OUTSIDE.test('see docs/decisions.md'), 'docs/ pages pass');
});
