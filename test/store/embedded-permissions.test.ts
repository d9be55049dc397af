/**
 * The embedded store's directory is its owner's alone. PGlite writes most of its files (the WAL,
 * the catalogs, PG_VERSION) with mode 0666 whatever the umask, so in a directory others can enter,
 * any local user could read the audit trail's statements and rewrite the store (an agent key hash
 * of their own, a wallet balance). Seen by review: `state/` was 0755 holding 0666 files.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { openEmbeddedStore } from '../../control-plane/store/embedded.js';
import { tempDir } from '../helpers/server.js';

const modeOf = async (p: string): Promise<number> => (await fs.stat(p)).mode & 0o777;

t.test('a new embedded store directory is made 0700', async (t) => {
  const dir = await tempDir('svc-store-mode-');
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const state = path.join(dir, 'state');
  const store = await openEmbeddedStore(state);
  t.teardown(() => store.close());
  await store.query('CREATE TABLE t (v text)');
  await store.query("INSERT INTO t VALUES ('x')");
  t.equal((await modeOf(state)).toString(8), '700', 'only its owner can enter the store directory');
});

t.test('an existing store directory others could enter is closed to them when the store opens', async (t) => {
  const dir = await tempDir('svc-store-mode-');
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const state = path.join(dir, 'state');
  await (await openEmbeddedStore(state)).close();
  // as an earlier version left it (the umask's 0755)
  await fs.chmod(state, 0o755);
  const store = await openEmbeddedStore(state);
  t.teardown(() => store.close());
  t.equal((await modeOf(state)).toString(8), '700', 'reopening closes it');
  t.same(await store.query('SELECT 1 AS one'), [{ one: 1 }], 'the store answers as before');
});
