/**
 * The start's warning about SVC_ variables no svc program reads (config.ts `unknownSettings`)
 * never names a variable the project's own documentation tells its users to set: every SVC_ name
 * written in README.md, docs/ and examples/ is a setting or read by another program, except the
 * misspelling the configuration page shows as its example.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { unknownSettings } from '../../control-plane/config.js';
import { ROOT } from '../cli/dist.js';

/** shown in docs/configuration.md as what the warning is for */
const DOCUMENTED_TYPOS = new Set(['SVC_RATE_LIMT']);

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

t.test('no SVC_ variable the documentation names is reported as unknown', async (t) => {
  const sources = [path.join(ROOT, 'README.md'), ...files(path.join(ROOT, 'docs')), ...files(path.join(ROOT, 'examples'))];
  const named = new Map<string, string>();
  for (const f of sources) for (const m of fs.readFileSync(f, 'utf8').matchAll(/\bSVC_[A-Z0-9_]*[A-Z0-9]\b/g)) named.set(m[0], path.relative(ROOT, f));
  t.ok(named.size > 30, `${named.size} SVC_ names found`);
  for (const typo of DOCUMENTED_TYPOS) t.ok(named.has(typo), `${typo} is still the documented example`);
  const env = Object.fromEntries([...named.keys()].filter((n) => !DOCUMENTED_TYPOS.has(n)).map((n) => [n, 'x']));
  t.same(
    unknownSettings(env).map((u) => `${u.name} (${named.get(u.name)})`),
    [],
    'every one is a setting or another program’s',
  );
});
