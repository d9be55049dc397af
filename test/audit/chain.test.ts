import { createHash } from 'node:crypto';
import t from 'tap';
import { canon, canonParts, eventHash, genesisHash, verifyChain, type StoredEvent } from '../../control-plane/audit/chain.js';

t.test('canon follows RFC 8785', async (t) => {
  // RFC 8785 §3.2.2/§3.2.3 examples
  t.equal(canon({ numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001] }), '{"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27]}');
  t.equal(canon({ b: 1, a: 2, c: { z: null, y: [true, false] } }), '{"a":2,"b":1,"c":{"y":[true,false],"z":null}}');
  // keys sorted by UTF-16 code units: the surrogate 0xD83D of U+1F600 sorts before U+FB33
  t.equal(canon({ '\ufb33': 1, '\ud83d\ude00': 2, '\u20ac': 3, '\r': 4, '1': 5 }), '{"\\r":4,"1":5,"\u20ac":3,"\ud83d\ude00":2,"\ufb33":1}');
  t.equal(canon('\u2028 "q" \\ \u0001'), '"\u2028 \\"q\\" \\\\ \\u0001"');
  t.equal(canon(-0), '0');
  t.throws(() => canon(Number.NaN));
  t.throws(() => canon(() => 1));
  t.equal(canon({ a: undefined, b: 1 }), '{"b":1}');
});

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

t.test('genesis and event hashes are the published formulas', async (t) => {
  const g = { connection_id: 'conn_x', org_id: 'org_y', target_id: 'demo-healthcare', scopes: ['read:encounters', 'period:2024-Q1'], created_at: '2026-01-01T00:00:00.000Z' };
  const expected = sha('svc-audit-v1\n{"connection_id":"conn_x","created_at":"2026-01-01T00:00:00.000Z","org_id":"org_y","scopes":["read:encounters","period:2024-Q1"],"target_id":"demo-healthcare"}');
  t.equal(genesisHash(g), expected);
  const body = { seq: 1, prev_hash: expected, id: 'evt_1', type: 'query', cost_cents: 0.5 };
  t.equal(eventHash(body), sha(`${expected}\n{"cost_cents":0.5,"id":"evt_1","prev_hash":"${expected}","seq":1,"type":"query"}`));
});

function chain(n: number): { genesis: string; events: StoredEvent[] } {
  const genesis = sha('genesis');
  const events: StoredEvent[] = [];
  let prev = genesis;
  for (let i = 1; i <= n; i++) {
    const body = { seq: i, prev_hash: prev, id: `evt_${i}`, n: i };
    const hash = eventHash(body);
    events.push({ seq: i, body, hash });
    prev = hash;
  }
  return { genesis, events };
}

t.test('verifyChain finds the first broken event', async (t) => {
  const { genesis, events } = chain(6);
  const head = { seq: 6, hash: (events[5] as StoredEvent).hash };
  t.same(verifyChain(genesis, events, head), { verified: true, events_checked: 6, broken_at: null });
  t.same(verifyChain(genesis, [], { seq: 0, hash: genesis }), { verified: true, events_checked: 0, broken_at: null });

  const edited = events.map((e) => (e.seq === 3 ? { ...e, body: { ...e.body, n: 99 } } : e));
  t.match(verifyChain(genesis, edited, head), { verified: false, broken_at: 3 });

  const missing = events.filter((e) => e.seq !== 4);
  t.match(verifyChain(genesis, missing, head), { verified: false, broken_at: 4 });

  const swapped = [...events];
  [swapped[1], swapped[2]] = [swapped[2] as StoredEvent, swapped[1] as StoredEvent];
  t.match(verifyChain(genesis, swapped, head), { verified: false, broken_at: 2 });

  const truncated = events.slice(0, 4);
  t.match(verifyChain(genesis, truncated, head), { verified: false, events_checked: 4, broken_at: 5 });
  // without the head a truncated chain looks whole: the head is what catches it
  t.match(verifyChain(genesis, truncated), { verified: true });

  const wrongGenesis = verifyChain(sha('other'), events, head);
  t.match(wrongGenesis, { verified: false, broken_at: 1 });

  // re-hashing an edited event breaks the link of the next one
  const rehashed = events.map((e) => {
    if (e.seq !== 2) return e;
    const body = { ...(e.body as StoredEvent['body'] & { seq: number; prev_hash: string }), n: 42 };
    return { ...e, body, hash: eventHash(body) };
  });
  t.match(verifyChain(genesis, rehashed, head), { verified: false, broken_at: 3 });
});

t.test('canonParts cuts the canonical JSON exactly around at, prev_hash and seq', async (t) => {
  const prev = sha('prev');
  const at = '2026-11-25T16:00:00.123Z';
  const bodies: Record<string, unknown>[] = [
    {},
    { type: 'query' },
    { a: 1, z: 2, ab: 3, au: 4 },
    // keys sorting before, between and after the three, and nested keys of the same names
    { org_id: 'o', q: 1, r: { prev_hash: 'x', seq: 9, at: 1 }, row_filters: { seq: null }, sa: true, sql: "it's \"quoted\" \\ \u0000 \ud83d\ude00", zz: [1, { seq: 2 }] },
    { 'prev_hash\u0000': 1, 'seq\u0000': 2, prev_has: 3, seq_: 4, at_: 5, as: 6, '\ud83d': 'lone', '\u20ac': 5, '': 0 },
  ];
  for (const body of bodies) {
    const [a, b, c, d] = canonParts(body);
    for (const seq of [1, 42, 2_000_000_000]) t.equal(`${a}${at}${b}${prev}${c}${seq}${d}`, canon({ ...body, at, prev_hash: prev, seq }), JSON.stringify(Object.keys(body)));
  }
  t.throws(() => canonParts({ seq: 1 }), TypeError);
  t.throws(() => canonParts({ prev_hash: 'x' }), TypeError);
  t.throws(() => canonParts({ at: 'x' }), TypeError);
});
