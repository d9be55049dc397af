/**
 * Seeding the embedded demo database. Runs inside the embedded engine's worker thread (see
 * EmbeddedPostgres.runModule), so generating ~225k rows and loading them with COPY never blocks
 * the event loop.
 */
import type { PGlite } from '@electric-sql/pglite';
import { IMAGE_ONLY_POSTGRES } from '../embedded/index.js';
import { DATASETS } from './datasets/index.js';
import { copyText, demoFingerprint, finishStatements, qualified, schemaStatements, tableData } from './load.js';

/** What seeding reports while it runs: a pack whose datasets are all loaded, then the final pass. */
export type SeedProgress =
  | { readonly stage: 'pack'; readonly pack: string; readonly targets: readonly string[]; readonly rows: number; readonly done: number; readonly of: number }
  | { readonly stage: 'finishing' };

export async function seed(db: PGlite, progress: (p: SeedProgress) => void = () => undefined): Promise<void> {
  const fingerprint = demoFingerprint(DATASETS);
  // WAL files no longer needed are removed rather than kept for reuse: the image holds no spare ones
  await db.exec('SET wal_recycle = off');
  for (const stmt of schemaStatements(DATASETS)) await db.exec(stmt);
  const packs = [...new Set(DATASETS.map((d) => d.pack))];
  const tablesLeft = new Map(DATASETS.map((d) => [d, d.tables.length]));
  const rowsOf = new Map<string, number>();
  let packsDone = 0;
  for (const data of tableData(DATASETS)) {
    if (data.rows.length > 0) await db.query(`COPY ${qualified(data.dataset, data.table)} FROM '/dev/blob'`, [], { blob: new Blob([copyText(data)]) });
    const pack = data.dataset.pack;
    rowsOf.set(pack, (rowsOf.get(pack) ?? 0) + data.rows.length);
    tablesLeft.set(data.dataset, (tablesLeft.get(data.dataset) ?? 1) - 1);
    const inPack = DATASETS.filter((d) => d.pack === pack);
    if (inPack.every((d) => tablesLeft.get(d) === 0)) {
      progress({ stage: 'pack', pack, targets: inPack.map((d) => d.targetId), rows: rowsOf.get(pack) ?? 0, done: ++packsDone, of: packs.length });
    }
  }
  progress({ stage: 'finishing' });
  for (const stmt of finishStatements(DATASETS, fingerprint)) await db.exec(stmt);
  for (const stmt of IMAGE_ONLY_POSTGRES) await db.exec(stmt);
  // every row frozen and its hint bits set, so reading never dirties a page: workers sharing the
  // image then never copy a data file for a read (see embedded/image-fs.ts); the checkpoint leaves
  // the image needing no recovery and only the current WAL file
  // (statistics first: ANALYZE writes rows into the catalog that the VACUUM then freezes too)
  await db.exec('ANALYZE');
  await db.exec('VACUUM (FREEZE)');
  await db.exec('CHECKPOINT');
}
