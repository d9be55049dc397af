/** A fresh store of either kind for tests of the store functions below the API, torn down with the test. */
import fs from 'node:fs/promises';
import path from 'node:path';
import { migrate, type Migration, type Store } from '../../control-plane/store/index.js';
import { openEmbeddedStore } from '../../control-plane/store/embedded.js';
import { openPostgresStore } from '../../control-plane/store/postgres.js';
import { freshDatabase, tempDir } from './server.js';
import type { TapTest } from './tap.js';

export type StoreKind = 'embedded' | 'postgres';

/** a new store of `kind` (PostgreSQL: a fresh database named `dbPrefix`_…) with `migrations` applied */
export async function migratedStore(t: TapTest, kind: StoreKind, migrations: readonly Migration[], dbPrefix: string): Promise<Store> {
  let store: Store;
  if (kind === 'embedded') {
    const dir = await tempDir();
    store = await openEmbeddedStore(path.join(dir, 'state'));
    t.teardown(async () => {
      await store.close();
      await fs.rm(dir, { recursive: true, force: true });
    });
  } else {
    const db = await freshDatabase(dbPrefix);
    store = await openPostgresStore(db.url);
    t.teardown(async () => {
      await store.close();
      await db.drop();
    });
  }
  await migrate(store, migrations);
  return store;
}
