/**
 * The same store tests against the embedded PGlite and, when one answers, a real PostgreSQL.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { MIGRATIONS, migrate, openStore, type Store } from '../../control-plane/store/index.js';
import { freshDatabase, realPostgresAvailable, storeTemplate, tempDir } from '../helpers/server.js';

interface Engine {
  name: string;
  open(): Promise<Store>;
  /** open the same state again, as after a restart */
  reopen(): Promise<Store>;
  cleanup(): Promise<void>;
}

async function engines(): Promise<Engine[]> {
  const dir = await tempDir();
  const list: Engine[] = [
    {
      name: 'embedded PGlite',
      open: () => openStore({ databaseUrl: undefined, dataDir: dir }),
      reopen: () => openStore({ databaseUrl: undefined, dataDir: dir }),
      cleanup: () => fs.rm(dir, { recursive: true, force: true }),
    },
  ];
  if (await realPostgresAvailable()) {
    const db = await freshDatabase();
    list.push({ name: 'PostgreSQL', open: () => openStore({ databaseUrl: db.url, dataDir: dir }), reopen: () => openStore({ databaseUrl: db.url, dataDir: dir }), cleanup: db.drop });
  } else {
    t.comment('no PostgreSQL answers at TEST_DATABASE_URL: store tests run on the embedded engine only');
  }
  return list;
}

for (const engine of await engines()) {
  t.test(`store on ${engine.name}`, async (t) => {
    t.teardown(engine.cleanup);
    const store = await engine.open();
    const versions = await store.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    t.same(versions.map((v) => v.version), MIGRATIONS.map((m) => m.version), 'every migration applied');
    t.same(await migrate(store), [], 'migrating again applies nothing');

    await store.query("INSERT INTO orgs (id, name, created_at, trial_expires_at) VALUES ('org_1', 'One', now(), now())");
    // a failing transaction leaves nothing behind
    await t.rejects(
      store.tx(async (sql) => {
        await sql.query("INSERT INTO orgs (id, name, created_at, trial_expires_at) VALUES ('org_2', 'Two', now(), now())");
        await sql.query("INSERT INTO orgs (id, name, created_at, trial_expires_at) VALUES ('org_1', 'dup', now(), now())");
      }),
    );
    t.same(await store.query('SELECT id FROM orgs ORDER BY id'), [{ id: 'org_1' }]);
    // a committed one keeps everything; bigint counters come back as numbers
    await store.tx(async (sql) => {
      await sql.query("UPDATE orgs SET wallet_nc = 123456789012345 WHERE id = 'org_1'");
    });
    const [row] = await store.query<{ wallet_nc: number; created_at: Date }>("SELECT wallet_nc, created_at FROM orgs WHERE id = 'org_1'");
    t.equal(row?.wallet_nc, 123456789012345);
    t.ok(row?.created_at instanceof Date);
    // the wallet can never go negative, whatever the code asks
    await t.rejects(store.query("UPDATE orgs SET wallet_nc = -1 WHERE id = 'org_1'"));
    await store.close();

    const again = await engine.reopen();
    t.same(await again.query('SELECT id, wallet_nc FROM orgs'), [{ id: 'org_1', wallet_nc: 123456789012345 }], 'state survives a restart');
    await again.close();
  });
}

t.test('a fresh embedded data dir can start from a migrated template', async (t) => {
  const dir = await tempDir();
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const store = await openStore({ databaseUrl: undefined, dataDir: dir, template: await storeTemplate() });
  t.same((await store.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations'))[0]?.n, MIGRATIONS.length);
  await store.close();
  t.ok((await fs.readdir(path.join(dir, 'state'))).length > 0, 'the state lives under the data dir');
});

t.test('an unreachable DATABASE_URL fails with a clear coded error', async (t) => {
  await t.rejects(openStore({ databaseUrl: 'postgres://nobody@127.0.0.1:1/none', dataDir: '/nonexistent' }), { code: 'STORE_ERR_OPEN', message: /DATABASE_URL/ });
});
