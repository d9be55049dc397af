import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { isSealedWith, loadMasterKey, masterKeyFrom, open, seal } from '../../control-plane/secrets/index.js';
import { tempDir } from '../helpers/server.js';

t.test('sealed secrets open only with the key that sealed them, and any tampering is caught', async (t) => {
  const k1 = masterKeyFrom('11'.repeat(32));
  const k2 = masterKeyFrom(Buffer.alloc(32, 7).toString('base64'));
  const sealed = seal(k1, 'postgres://reader:s3cret@db.internal/app');
  t.notMatch(sealed, /s3cret/);
  t.match(sealed, new RegExp(`^v1\\.${k1.id}\\.`));
  t.not(seal(k1, 'same'), seal(k1, 'same'), 'a fresh IV every time');
  t.equal(open([k2, k1], sealed).toString(), 'postgres://reader:s3cret@db.internal/app', 'a rotated-out key still opens what it sealed');
  t.throws(() => open([k2], sealed), { code: 'SECRETS_ERR_UNKNOWN_KEY' });
  const parts = sealed.split('.');
  const body = Buffer.from(parts[4] as string, 'base64url');
  body[0] = (body[0] ?? 0) ^ 1;
  parts[4] = body.toString('base64url');
  t.throws(() => open([k1], parts.join('.')), { code: 'SECRETS_ERR_SEALED' }, 'tampered ciphertext');
  t.throws(() => open([k1], 'v3.x.y.z.w'), { code: 'SECRETS_ERR_SEALED' });
  t.throws(() => masterKeyFrom('short'), { code: 'SECRETS_ERR_KEY' });
});

t.test('without SVC_MASTER_KEY a key is generated once into the data dir, mode 0600', async (t) => {
  const dir = await tempDir();
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const [a, b] = await Promise.all([loadMasterKey(undefined, dir), loadMasterKey(undefined, dir)]);
  t.equal(a.id, b?.id, 'concurrent first uses agree on one key');
  const again = await loadMasterKey(undefined, dir);
  t.equal(again.id, a.id, 'and it is kept');
  const st = await fs.stat(path.join(dir, 'master.key'));
  t.equal(st.mode & 0o777, 0o600);
  const configured = await loadMasterKey('22'.repeat(32), dir);
  t.equal(configured.id, masterKeyFrom('22'.repeat(32)).id, 'SVC_MASTER_KEY wins');
});

t.test('a truncated authentication tag never verifies (the tag length is pinned to 16 bytes)', async (t) => {
  const k = masterKeyFrom('33'.repeat(32));
  for (const sealed of [seal(k, 'token-value'), seal(k, 'token-value', 'credential\norg_a\nstripe')]) {
    const parts = sealed.split('.');
    const tag = Buffer.from(parts[3] as string, 'base64url');
    t.equal(tag.length, 16);
    for (const n of [4, 8, 12, 15]) {
      const short = [...parts];
      short[3] = tag.subarray(0, n).toString('base64url');
      t.throws(() => open([k], short.join('.'), 'credential\norg_a\nstripe'), { code: 'SECRETS_ERR_SEALED' }, `${parts[0]}: a ${n}-byte prefix of the right tag is refused`);
    }
  }
});

t.test('v2 values are bound to their context; v1 values (written before) still open', async (t) => {
  const k = masterKeyFrom('44'.repeat(32));
  const bound = seal(k, 'rk_test_secret', 'credential\norg_a\nstripe');
  t.match(bound, new RegExp(`^v2\\.${k.id}\\.`));
  t.equal(open([k], bound, 'credential\norg_a\nstripe').toString(), 'rk_test_secret');
  t.throws(() => open([k], bound, 'credential\norg_b\nstripe'), { code: 'SECRETS_ERR_SEALED' }, 'another organization');
  t.throws(() => open([k], bound, 'credential\norg_a\ngithub'), { code: 'SECRETS_ERR_SEALED' }, 'another kind');
  t.throws(() => open([k], bound), { code: 'SECRETS_ERR_SEALED' }, 'no context');
  t.throws(() => open([k], bound.replace(/^v2\./, 'v1.'), 'credential\norg_a\nstripe'), { code: 'SECRETS_ERR_SEALED' }, 'relabelled as v1: the tag covers the context, so it fails');
  const old = seal(k, 'rk_test_old');
  t.match(old, /^v1\./, 'no context: the v1 format');
  t.equal(open([k], old, 'credential\norg_a\nstripe').toString(), 'rk_test_old', 'a v1 value opens whatever the context');
  t.ok(isSealedWith(bound, k));
  t.notOk(isSealedWith(old, k), 'v1 is re-sealed at start-up');
  t.notOk(isSealedWith(bound, masterKeyFrom('55'.repeat(32))), 'another key is re-sealed at start-up');
});
