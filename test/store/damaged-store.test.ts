/**
 * A damaged embedded store stops the start, loudly, and is left as it was. PGlite makes a new
 * database in any directory without a PG_VERSION file, so a store that had lost that one file
 * (its balances, keys and audit chains all still there) was silently made again over them: the
 * control plane came up empty and every agent key answered 401. A creation of the store cut short
 * by a kill (PG_VERSION is among the last files written) is still made again at the next start.
 * A store PostgreSQL cannot start on (its WAL or control file gone or cut short) says what
 * PostgreSQL said: the start failed with `Aborted(). Build with -sASSERTIONS for more info.`,
 * WebAssembly's word for the engine's exit, which named no file and no cause.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { openStore } from '../../control-plane/store/index.js';
import { storeTemplate, storeTemplateDir, tempDir } from '../helpers/server.js';
import { ensureDist, ROOT } from '../cli/dist.js';
import type { TapTest } from '../helpers/tap.js';

const exists = (p: string): Promise<boolean> => fs.access(p).then(() => true, () => false);

t.test('a store that lost PG_VERSION is refused, not made again over its files', async (t) => {
  const { dataDir, state } = await storeWithOrg(t);
  const version = await fs.readFile(path.join(state, 'PG_VERSION'));
  await fs.rm(path.join(state, 'PG_VERSION'));
  const opened = await openStore({ databaseUrl: undefined, dataDir }).catch((err: unknown) => err as Error);
  if (!(opened instanceof Error)) await opened.close();
  t.match(opened, { code: 'STORE_ERR_OPEN', message: /holds files but no database \(no PG_VERSION\)/ }, 'the start stops and says why');
  t.notOk(await exists(path.join(state, 'PG_VERSION')), 'nothing was made in its place');

  // put back, the store is the one it was
  await fs.writeFile(path.join(state, 'PG_VERSION'), version);
  const again = await openStore({ databaseUrl: undefined, dataDir });
  t.teardown(() => again.close());
  t.same(await again.query("SELECT wallet_nc FROM orgs WHERE id = 'org_rich'"), [{ wallet_nc: 5000000000000 }], 'its balances were left untouched');
});

t.test('a store whose creation a kill cut short is made again at the next start', async (t) => {
  ensureDist();
  const dataDir = await tempDir('svc-damaged-');
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const state = path.join(dataDir, 'state');
  // the compiled store, as the control plane opens it on a first start
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', `const { openStore } = await import(${JSON.stringify(path.join(ROOT, 'dist/control-plane/store/index.js'))}); await openStore({ databaseUrl: undefined, dataDir: process.argv[1] }); console.log('opened');`, dataDir],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  // killed once the new database's files are being written, before PG_VERSION (among the last)
  for (;;) {
    const files = await fs.readdir(state).catch(() => [] as string[]);
    if (files.length > 0 && !files.includes('PG_VERSION')) break;
    if (files.includes('PG_VERSION') || child.exitCode !== null) {
      t.fail(`the creation ended before it could be cut short (${out.trim() || 'no output'})`);
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  child.kill('SIGKILL');
  await exited;
  t.notOk(await exists(path.join(state, 'PG_VERSION')), 'the kill left a directory of files and no PG_VERSION');

  // made again from the migrated template (as from nothing, the mark is what clears the way; the
  // template spares the test the database's creation, several seconds of CPU)
  const store = await openStore({ databaseUrl: undefined, dataDir, template: await storeTemplate() });
  t.teardown(() => store.close());
  t.ok((await store.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations'))[0]?.n, 'the next start makes the store and migrates it');
});

/** a closed store with one organization in it, under a new data dir */
async function storeWithOrg(t: TapTest): Promise<{ dataDir: string; state: string }> {
  const dataDir = await tempDir('svc-damaged-');
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const state = path.join(dataDir, 'state');
  await fs.cp(await storeTemplateDir(), state, { recursive: true });
  const store = await openStore({ databaseUrl: undefined, dataDir });
  await store.query("INSERT INTO orgs (id, name, created_at, trial_expires_at, wallet_nc) VALUES ('org_rich', 'Rich', now(), now(), 5000000000000)");
  await store.close();
  return { dataDir, state };
}

const damages: readonly { readonly what: string; readonly damage: (state: string) => Promise<void>; readonly says: RegExp }[] = [
  {
    what: 'its WAL segment removed',
    damage: async (state) => {
      for (const f of await fs.readdir(path.join(state, 'pg_wal'))) if (/^[0-9A-F]{24}$/.test(f)) await fs.rm(path.join(state, 'pg_wal', f));
    },
    says: /PostgreSQL: .*could not locate a valid checkpoint record/,
  },
  {
    what: 'its WAL segment cut to nothing',
    damage: async (state) => {
      for (const f of await fs.readdir(path.join(state, 'pg_wal'))) if (/^[0-9A-F]{24}$/.test(f)) await fs.truncate(path.join(state, 'pg_wal', f), 0);
    },
    says: /PostgreSQL: .*checkpoint record/,
  },
  {
    what: 'its control file cut short',
    damage: (state) => fs.truncate(path.join(state, 'global', 'pg_control'), 100),
    says: /PostgreSQL: .*global\/pg_control/,
  },
];

for (const d of damages) {
  t.test(`a store with ${d.what} stops the start with what PostgreSQL said`, async (t) => {
    const { dataDir, state } = await storeWithOrg(t);
    await d.damage(state);
    const opened = await openStore({ databaseUrl: undefined, dataDir }).catch((err: unknown) => err as Error);
    if (!(opened instanceof Error)) await opened.close();
    t.match(opened, { code: 'STORE_ERR_OPEN', message: d.says });
    t.ok(await exists(path.join(state, 'PG_VERSION')), 'the store is left as it was');
  });
}
