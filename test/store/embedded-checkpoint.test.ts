/**
 * The embedded store checkpoints on its own: an embedded PostgreSQL has no checkpointer, so before
 * this its WAL grew on disk for as long as the server ran (and was all replayed after a crash).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { openEmbeddedStore } from '../../control-plane/store/embedded.js';
import { tempDir } from '../helpers/server.js';

const walFiles = async (dir: string): Promise<number> => (await fs.readdir(path.join(dir, 'pg_wal'))).filter((f) => /^[0-9A-F]{24}$/.test(f)).length;

t.test('WAL past the threshold is checkpointed while the store runs: what a crash would replay stays bounded', async (t) => {
  const dir = await tempDir('svc-store-ckpt-');
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const store = await openEmbeddedStore(dir, undefined, { everyMs: 100, walBytes: 1024 * 1024 });
  t.teardown(() => store.close());
  await store.query('CREATE TABLE churn (id int, body text)');
  const lsn = async (): Promise<{ insert: string; redo: string; since: number }> =>
    (await store.query<{ insert: string; redo: string; since: number }>(
      'SELECT pg_current_wal_insert_lsn()::text AS insert, redo_lsn::text AS redo, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), redo_lsn)::float8 AS since FROM pg_control_checkpoint()',
    ))[0]!;
  const start = await lsn();
  for (let i = 0; i < 4; i++) {
    // a few MB of WAL per round
    await store.query(`INSERT INTO churn SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g`);
    await store.query('DELETE FROM churn');
    await new Promise((r) => setTimeout(r, 400));
  }
  const end = await lsn();
  const written = (await store.query<{ d: number }>('SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8 AS d', [end.insert, start.insert]))[0]!.d;
  t.not(end.redo, start.redo, 'checkpoints were made without being asked for');
  t.ok(written > 8 * 1024 * 1024, `the rounds wrote ${(written / 1048576).toFixed(1)} MB of WAL`);
  t.ok(end.since < written / 2, `only ${(end.since / 1048576).toFixed(1)} MB of it is past the last checkpoint`);
  t.ok((await walFiles(dir)) <= 6, 'the WAL on disk stays a few files');
  t.same(await store.query('SELECT count(*)::int AS n FROM churn'), [{ n: 0 }], 'the store answers as before');
});
