import fs from 'node:fs/promises';
import path from 'node:path';
import { EmbeddedPostgres } from '../embedded/index.js';
import { lockDirectory } from './dir-lock.js';
import type { QueryOptions, Row, Sql, Store } from './types.js';

/**
 * The store's server settings: a 32 MB buffer cache (PGlite's default is 128 MB) holds the hot
 * part of a store this size; the files are on disk and the OS caches the rest.
 */
const STORE_SETTINGS: Readonly<Record<string, string>> = { shared_buffers: '32MB' };

export interface CheckpointPolicy {
  /** how often the WAL written since the last checkpoint is looked at */
  readonly everyMs: number;
  /** a checkpoint is made once more than this has been written since the last one */
  readonly walBytes: number;
  /** told when a look or a checkpoint fails (it is tried again at the next look) */
  readonly onError?: (err: Error) => void;
}

/**
 * An embedded PostgreSQL runs as a single process with no checkpointer: it never checkpoints on
 * its own, so its WAL would grow on disk for as long as it runs and be replayed whole after a
 * crash. The store checks once a minute and checkpoints past 16 MB of WAL (whole WAL files are
 * then removed or recycled, as on a server).
 */
const CHECKPOINTS: CheckpointPolicy = { everyMs: 60_000, walBytes: 16 * 1024 * 1024 };

/**
 * The store in an embedded PGlite under a data directory (its own worker thread), which this
 * process holds locked while the store is open (dir-lock.ts): a second process is refused.
 */
export async function openEmbeddedStore(dir: string, template?: Uint8Array, checkpoints: Partial<CheckpointPolicy> = {}, warn?: (message: string) => void): Promise<Store> {
  const policy: CheckpointPolicy = { ...CHECKPOINTS, ...checkpoints };
  await fs.mkdir(path.dirname(path.resolve(dir)), { recursive: true });
  const lock = await lockDirectory(dir, warn);
  let engine: EmbeddedPostgres;
  try {
    engine = await startEngine(dir, template);
  } catch (err) {
    await lock.release();
    throw err;
  }
  const store = storeOver(engine);
  let checking = false;
  const timer = setInterval(() => {
    if (checking || !engine.alive) return;
    checking = true;
    engine
      .checkpointPast(policy.walBytes)
      // tried again at the next look
      .catch((err: unknown) => policy.onError?.(err as Error))
      .finally(() => (checking = false));
  }, policy.everyMs);
  timer.unref();
  return {
    ...store,
    soleProcess: lock.held,
    close: async () => {
      clearInterval(timer);
      try {
        await store.close();
      } finally {
        await lock.release();
      }
    },
  };
}

/**
 * The engine on `dir`, its directory closed to other users. An empty directory gets a new
 * database, marked as being made (`<dir>.creating`) until it is whole: a creation cut short (a
 * kill) is made again from nothing at the next start. A directory holding files but no database
 * (no PG_VERSION, and no creation under way) is refused: PGlite would make a new, empty one over
 * them, and with it lose every balance, key and audit chain they hold.
 */
async function startEngine(dir: string, template: Uint8Array | undefined): Promise<EmbeddedPostgres> {
  const creating = `${path.resolve(dir)}.creating`;
  if (await exists(creating)) {
    // its contents, not the directory itself (which may be a mounted volume)
    for (const f of await fs.readdir(dir).catch(() => [] as string[])) await fs.rm(path.join(dir, f), { recursive: true, force: true });
  }
  // its owner's alone: PGlite writes most files (WAL, catalogs) 0666 whatever the umask, and the
  // store holds the audit trail's statements, key hashes and balances; an existing directory
  // (made 0755 by an earlier version) is closed too, unless another user owns it (EPERM: left as
  // its owner set it, e.g. a mounted volume)
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  await fs.chmod(dir, 0o700).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPERM') throw err;
  });
  // (a volume mounted as the directory itself has its lost+found)
  const entries = (await fs.readdir(dir)).filter((f) => f !== 'lost+found');
  const fresh = entries.length === 0;
  if (!fresh && !entries.includes('PG_VERSION')) {
    throw new Error(
      `${dir} holds files but no database (no PG_VERSION): it is damaged or is not a store, and a new, empty store is not made over it; restore it from a backup, or move it away to start with an empty store`,
    );
  }
  if (!fresh) return EmbeddedPostgres.start({ dataDir: dir, settings: STORE_SETTINGS });
  await fs.writeFile(creating, '');
  let engine: EmbeddedPostgres;
  if (template) engine = await EmbeddedPostgres.start({ dataDir: dir, loadDataDir: template, settings: STORE_SETTINGS });
  else {
    // creating a database touches several hundred MB that its thread keeps: create it in a thread
    // of its own, end that, and open it again
    await (await EmbeddedPostgres.start({ dataDir: dir })).close();
    engine = await EmbeddedPostgres.start({ dataDir: dir, settings: STORE_SETTINGS });
  }
  await fs.rm(creating, { force: true });
  return engine;
}

const exists = (p: string): Promise<boolean> => fs.access(p).then(() => true, () => false);

function storeOver(engine: EmbeddedPostgres): Store {
  return {
    kind: 'embedded',
    query: <T extends object = Row>(text: string, params: readonly unknown[] = [], options?: QueryOptions) => engine.query(text, params, options?.prepared === true) as Promise<T[]>,
    tx: <T>(fn: (sql: Sql) => Promise<T>) =>
      engine.exclusive(async (s) => {
        await s.exec('BEGIN');
        const sql: Sql = { query: <R extends object = Row>(text: string, params: readonly unknown[] = []) => s.query(text, params) as Promise<R[]> };
        try {
          const result = await fn(sql);
          await s.exec('COMMIT');
          return result;
        } catch (err) {
          if (engine.alive) await s.exec('ROLLBACK');
          throw err;
        }
      }),
    close: () => engine.close(),
  };
}

/**
 * A dump of a fresh, fully migrated embedded store: starting a new data dir from it skips initdb
 * and the migrations (tests start many stores).
 */
export async function buildEmbeddedTemplate(migrateFn: (store: Store) => Promise<unknown>): Promise<Uint8Array> {
  const engine = await EmbeddedPostgres.start();
  try {
    await migrateFn(storeOver(engine));
    return await engine.dump();
  } finally {
    await engine.close();
  }
}
