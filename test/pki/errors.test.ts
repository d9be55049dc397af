import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { PKI_ERRORS, PkiError, isPkiError } from '../../pki/index.js';
import { ROOT } from '../helpers/root.js';

const pkiDir = join(ROOT, 'pki');
const readme = readFileSync(join(pkiDir, 'README.md'), 'utf8');
const codes = Object.keys(PKI_ERRORS);

t.test('every code is PKI_ERR_*, unique, and documented in pki/README.md', async (t) => {
  t.ok(codes.length > 0);
  // An object literal silently keeps the last of two equal keys, so count them in the source.
  const declared = [...readFileSync(join(pkiDir, 'errors.ts'), 'utf8').matchAll(/^\s+(PKI_ERR_[A-Z_]+):/gm)].map((m) => m[1]);
  t.same(declared, codes, 'each code declared once');
  t.equal(new Set(Object.values(PKI_ERRORS)).size, codes.length, 'summaries are unique');
  for (const code of codes) {
    t.match(code, /^PKI_ERR_[A-Z_]+$/);
    const rows = readme.split('\n').filter((line) => line.startsWith(`| \`${code}\` |`));
    t.equal(rows.length, 1, `${code} has exactly one row in the README's error table`);
  }
});

t.test('the README and the sources name no code outside the registry', async (t) => {
  const sources = readdirSync(pkiDir)
    .filter((f) => f.endsWith('.ts') || f.endsWith('.md'))
    .map((f) => readFileSync(join(pkiDir, f), 'utf8'))
    .join('\n');
  const mentioned = new Set(sources.match(/PKI_ERR_[A-Z_]*[A-Z](?![A-Z_]*\*)/g) ?? []);
  for (const code of mentioned) t.ok(code in PKI_ERRORS, `${code} is in the registry`);
  for (const code of codes) t.ok(mentioned.has(code), `${code} is used or documented`);
});

t.test('PkiError carries its code', async (t) => {
  const err = new PkiError('PKI_ERR_REVOKED', 'gone');
  t.ok(err instanceof Error);
  t.ok(isPkiError(err));
  t.notOk(isPkiError(new Error('x')));
  t.equal(err.code, 'PKI_ERR_REVOKED');
  t.equal(err.name, 'PkiError');
  t.equal(err.message, 'gone');
});
