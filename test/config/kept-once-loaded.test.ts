/**
 * Modules and compiled code loaded on first use (mysql2, the MCP SDK, PGlite's engine, the master
 * keys, the relay CA): a load that failed once was kept, so every later use failed the same way
 * until the process restarted (mysql2 and the MCP SDK did so).
 */
import t from 'tap';
import { keptOnceLoaded } from '../../control-plane/once.js';

t.test('a failed load is tried again; a loaded one is kept; concurrent callers share one load', async (t) => {
  let runs = 0;
  let fail = true;
  const load = keptOnceLoaded(async () => {
    runs++;
    await new Promise((r) => setTimeout(r, 10));
    if (fail) throw new Error(`load ${runs} failed`);
    return { run: runs };
  });
  const [a, b] = await Promise.allSettled([load(), load()]);
  t.equal(runs, 1, 'two callers while it runs: one load');
  t.match(a, { status: 'rejected', reason: { message: 'load 1 failed' } });
  t.match(b, { status: 'rejected', reason: { message: 'load 1 failed' } }, 'both get its error');
  fail = false;
  const loaded = await load();
  t.same(loaded, { run: 2 }, 'the next call after a failure loads again');
  t.equal(await load(), loaded, 'then the loaded value is kept');
  t.equal(runs, 2, 'and not loaded again');
});
