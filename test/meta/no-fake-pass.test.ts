/**
 * A case that did not run must say so as a skip (`t.skip(reason, …)` or `{ skip: reason }`), never
 * as a passing assertion: this scans every test file for a `t.pass(…)` whose message says it was
 * skipped, so the defect cannot come back unnoticed.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT, sourceOf } from '../helpers/root.js';

const root = path.join(ROOT, 'test');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return files(p);
    return e.name.endsWith('.ts') ? [p] : [];
  });
}

const FAKE = /\.pass\(\s*[`'"]\s*(?:skip|not run|did not run)/i;

t.test('no test reports a case that did not run as a pass', async (t) => {
  const all = files(root);
  t.ok(all.length > 50, `scanned ${all.length} test files`);
  const offenders: string[] = [];
  for (const f of all) {
    if (f === path.join(ROOT, sourceOf(import.meta.url))) continue; // its own example below
    readFileSync(f, 'utf8').split('\n').forEach((line, i) => {
      if (FAKE.test(line)) offenders.push(`${path.relative(root, f)}:${i + 1}: ${line.trim()}`);
    });
  }
  t.same(offenders, [], 'use t.skip(reason, …) for a case that does not run');
  const oldForm = ['t', 'pass'].join('.') + "('skipped: no server')"; // built, so this file holds no such line itself
  t.ok(FAKE.test(oldForm), 'the pattern catches the old form');
});
