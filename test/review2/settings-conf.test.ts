/**
 * Review: `settings` is passed to PGlite as `postgresqlconf`, which *replaces* postgresql.conf
 * (copyToFS of the joined lines), it does not add to it. initdb's lines go: timezone = UTC,
 * log_timezone = UTC, default_text_search_config = 'pg_catalog.english'. For the store the file
 * on disk is rewritten at every open. (Harmless today only because the demo and REST preambles
 * SET LOCAL TimeZone and text search is not in the allow-list.)
 */
import t from 'tap';
import { EmbeddedPostgres, SMALL_FOOTPRINT } from '../../control-plane/embedded/index.js';
import { smallImage } from './helpers.js';

t.test('SMALL_FOOTPRINT changes shared_buffers and nothing else', async (t) => {
  const image = await smallImage('a');
  const show = async (settings?: readonly string[]): Promise<Record<string, unknown>> => {
    const db = await EmbeddedPostgres.start({ loadDataDir: image, ...(settings ? { settings } : {}) });
    try {
      const rows = await db.query("SELECT name, setting FROM pg_settings WHERE name IN ('TimeZone', 'log_timezone', 'default_text_search_config', 'DateStyle', 'shared_buffers') ORDER BY name");
      return Object.fromEntries(rows.map((r) => [r['name'], r['setting']]));
    } finally {
      await db.terminate();
    }
  };
  const before = await show();
  const after = await show(SMALL_FOOTPRINT);
  t.equal(after['shared_buffers'], '2048');
  t.same({ ...after, shared_buffers: before['shared_buffers'] }, before, `only shared_buffers differs: ${JSON.stringify({ before, after })}`);
});
