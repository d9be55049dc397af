/**
 * The benches' working directories (control-plane data, demo images: tens of MB a run) go when
 * the bench ends, failed or not. Review: bench/run removed its directory only after a run that
 * got to its end, and its end-to-end rows now fail on any non-2xx answer, so a failed run left
 * its directory in the system's temporary directory.
 */
import fs from 'node:fs/promises';
import t from 'tap';
import { inTempDir } from '../../bench/temp-dir.js';

t.test('a bench working directory is removed after the bench, failed or not', async (t) => {
  let kept = '';
  const answer = await inTempDir('svc-bench-test-', async (dir) => {
    kept = dir;
    await fs.writeFile(`${dir}/file`, 'x');
    return 42;
  });
  t.equal(answer, 42, "the bench's answer comes back");
  await t.rejects(fs.stat(kept), { code: 'ENOENT' }, 'and its directory is gone');
  const failure = new Error('answered 402');
  await t.rejects(
    inTempDir('svc-bench-test-', async (dir) => {
      kept = dir;
      await fs.mkdir(`${dir}/embedded/state`, { recursive: true });
      throw failure;
    }),
    failure,
    "a failed bench's error comes back",
  );
  await t.rejects(fs.stat(kept), { code: 'ENOENT' }, 'and its directory is gone too');
});
