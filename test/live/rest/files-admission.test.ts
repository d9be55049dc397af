/**
 * Many `http-files` queries of one big file at once, through the real API of the compiled control
 * plane (a child process, so its memory is its own; ./files-load.ts): the downloads are admitted
 * (at most SVC_LIVE_REST_ENGINES at once in the process, half of that for one organization,
 * observed at the file server), a file wanted by several statements at once is downloaded once
 * (never across organizations), a CSV is read as it arrives, and the control plane's memory stays
 * bounded. Before, every query downloaded the file whole at once: 40 queries of a 45 MB file
 * took the process from 1.9 GB to 4.0 GB.
 */
import t from 'tap';
import { MB, runLoad } from './files-load.js';

t.test('12 queries of a 30 MB file from 3 organizations: at most 2 downloads at once, 1 per organization, and bounded memory', async (t) => {
  const queriesPerOrg = 4;
  const orgs = 3;
  const out = await runLoad({ fileBytes: 30_000_000, queriesPerOrg, orgs, warm: 2, env: { SVC_LIVE_REST_ENGINES: '2', SVC_QUERY_TIMEOUT_MS: '300000' } });
  const growth = out.peakRss - out.rssBefore;
  t.comment(
    `downloads ${out.downloads} for ${queriesPerOrg * orgs} queries, at most ${out.maxDownloads} at once (${out.maxDownloadsPerOrg} for one organization); ` +
      `peak RSS ${Math.round(out.peakRss / MB)} MB, ${Math.round(growth / MB)} MB over the ${Math.round(out.rssBefore / MB)} MB before`,
  );
  for (const a of out.answers) {
    if (a.status === 200) t.same(a.rows, [{ n: 10_000, last: 10_000 }], 'the first 10,000 rows (the row cap) of the file');
    else t.same([a.status, a.code, a.reason, a.retryAfter], [429, 'rate_limited', 'downloads_busy', '1'], 'or, past the deadline, busy with when to retry');
  }
  t.ok(out.answers.some((a) => a.status === 200), 'queries were answered');
  t.ok(out.downloads >= 1 && out.downloads <= queriesPerOrg * orgs);
  t.ok(out.maxDownloads <= 2, `at most SVC_LIVE_REST_ENGINES (2) downloads at once in the process (saw ${out.maxDownloads})`);
  t.ok(out.maxDownloadsPerOrg <= 1, `at most 1 at once for one organization (saw ${out.maxDownloadsPerOrg})`);
  // each query downloading and decoding the whole file at once held about 3 times its size:
  // 12 × 30 MB × 3 ≈ 1 GB; admitted and read as it arrives, a few rows' worth per download
  t.ok(growth < 300 * MB, `memory grew by ${Math.round(growth / MB)} MB while the queries ran (at most 300 MB)`);
});
