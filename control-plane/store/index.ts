/**
 * The control plane's state store: embedded PGlite under the data dir by default, PostgreSQL when
 * DATABASE_URL is set. Opening it applies the migrations.
 */
import path from 'node:path';
import { buildEmbeddedTemplate, openEmbeddedStore } from './embedded.js';
import { migrate } from './migrations.js';
import { openPostgresStore } from './postgres.js';
import { StoreError, type Store } from './types.js';

export type { QueryOptions, Row, Sql, Store } from './types.js';
export { StoreError } from './types.js';
export { MIGRATIONS, migrate, type Migration } from './migrations.js';

export interface StoreOptions {
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  /** a dumped, already-migrated embedded store to start a fresh data dir from (tests) */
  readonly template?: Uint8Array;
  /** told of trouble the store recovers from on its own or runs on despite (an embedded store's failed checkpoint, or no lock on its directory) */
  readonly warn?: (message: string) => void;
}

export async function openStore(options: StoreOptions): Promise<Store> {
  let store: Store;
  try {
    store = options.databaseUrl
      ? await openPostgresStore(options.databaseUrl)
      : await openEmbeddedStore(
          path.join(options.dataDir, 'state'),
          options.template,
          { onError: (err) => options.warn?.(`the embedded store could not checkpoint (${err.message}); its WAL grows until the next checkpoint`) },
          options.warn,
        );
  } catch (err) {
    const where = options.databaseUrl ? 'DATABASE_URL' : path.join(options.dataDir, 'state');
    throw new StoreError('STORE_ERR_OPEN', `cannot open the state store (${where}): ${(err as Error).message}`, { cause: err });
  }
  try {
    await migrate(store);
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
  return store;
}

/** A dump of a fresh, migrated embedded store (tests start many stores from one). */
export async function embeddedStoreTemplate(): Promise<Uint8Array> {
  return buildEmbeddedTemplate(migrate);
}
