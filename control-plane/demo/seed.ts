/**
 * Seeding the embedded demo database. Runs inside the embedded engine's worker thread (see
 * EmbeddedPostgres.runModule), so generating ~225k rows and loading them with COPY never blocks
 * the event loop.
 */
import type { PGlite } from '@electric-sql/pglite';
import { DATASETS } from './datasets/index.js';
import { copyText, demoFingerprint, finishStatements, qualified, schemaStatements, tableData } from './load.js';

export async function seed(db: PGlite): Promise<void> {
  const fingerprint = demoFingerprint(DATASETS);
  for (const stmt of schemaStatements(DATASETS)) await db.exec(stmt);
  for (const data of tableData(DATASETS)) {
    if (data.rows.length === 0) continue;
    await db.query(`COPY ${qualified(data.dataset, data.table)} FROM '/dev/blob'`, [], { blob: new Blob([copyText(data)]) });
  }
  for (const stmt of finishStatements(DATASETS, fingerprint)) await db.exec(stmt);
}
