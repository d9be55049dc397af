/**
 * `svc audit verify --offline` (verifyExport) on an export of part of a chain, the events after a
 * seq (`?format=jsonl&after_seq=n`), and on lines that are not JSON. Found in review: a partial
 * export never verified (the verifier wanted seq 1 first), and the published example script threw
 * on a garbled line instead of reporting it broken. The chain here is built with the server's own
 * hash function; test/audit/verify-example runs the example script on a real server's exports.
 */
import t from 'tap';
import { canon, eventHash } from '../../control-plane/audit/index.js';
import { verifyExport } from '../../cli/svc/commands/audit.js';

const GENESIS = 'a'.repeat(64);

/** a chain of `n` events as export lines, and each event's hash */
function chain(n: number): { lines: string[]; hashes: string[] } {
  const lines: string[] = [];
  const hashes: string[] = [];
  let prev = GENESIS;
  for (let seq = 1; seq <= n; seq++) {
    const body = { seq, prev_hash: prev, type: 'query', at: `2026-11-27T00:00:0${seq}.000Z`, sql: `SELECT ${seq}` };
    const hash = eventHash(body);
    lines.push(canon({ ...body, hash }));
    hashes.push(hash);
    prev = hash;
  }
  return { lines, hashes };
}

t.test('an export after a seq verifies from that seq, tied to the event before it', async (t) => {
  const { lines, hashes } = chain(4);
  const part = lines.slice(2).join('\n') + '\n'; // events 3 and 4: after_seq=2
  t.same(verifyExport(part, { afterSeq: 2, link: hashes[1] }), { verified: true, events_checked: 2, broken_at: null, head: hashes[3] }, 'tied to the hash of event 2');
  t.same(verifyExport(part, { afterSeq: 2 }), { verified: true, events_checked: 2, broken_at: null, head: hashes[3] }, 'or only as one unbroken piece');
  const wrongLink = verifyExport(part, { afterSeq: 2, link: hashes[0] });
  t.same([wrongLink.verified, wrongLink.broken_at], [false, 3], 'linked to another event: broken at its first event');
  const asWhole = verifyExport(part);
  t.same([asWhole.verified, asWhole.broken_at], [false, 1], 'without --after-seq it must start at seq 1');
  const cut = verifyExport(lines.slice(3).join('\n'), { afterSeq: 2 });
  t.same([cut.verified, cut.broken_at], [false, 3], 'a line cut from its start is caught');
  const whole = verifyExport(lines.join('\n'), { link: GENESIS });
  t.same([whole.verified, whole.events_checked, whole.head], [true, 4, hashes[3]], 'a whole export verifies as before');
});

t.test('a line that is not JSON is reported broken at its seq', async (t) => {
  const { lines } = chain(3);
  for (const garbled of ['{"seq":', 'null', '[1,2]', '42', 'not json']) {
    const r = verifyExport([lines[0], garbled, lines[2]].join('\n'), { link: GENESIS });
    t.same([r.verified, r.broken_at, r.events_checked], [false, 2, 2], `${JSON.stringify(garbled)}: broken at seq 2`);
  }
  const part = verifyExport([lines[1], 'garbage'].join('\n'), { afterSeq: 1 });
  t.same([part.verified, part.broken_at], [false, 3], 'in a partial export too, at its seq');
});
