/**
 * The hash svc_append_event computes in the store equals audit/chain.ts `eventHash` of the stored
 * body, for hostile field values, on both stores; concurrent appends give one chain, and the
 * store's times never go backwards along it.
 */
import t from 'tap';
import { appendEvent, eventHash, verifyConnection } from '../../control-plane/audit/index.js';
import type { EventBody } from '../../control-plane/audit/chain.js';
import { openStore, type Store } from '../../control-plane/store/index.js';
import { freshDatabase, realPostgresAvailable, storeTemplate, tempDir } from '../helpers/server.js';
import { orgAndConnection } from '../helpers/store-rows.js';

async function makeConn(store: Store): Promise<string> {
  return (await orgAndConnection(store)).connectionId;
}

const nasty = [
  '\ud800',
  '\udc00x',
  'a\u2028b\u2029c',
  'nul\u0000nul',
  '\u0001\u001f\u007f\u0080\u00ff',
  '\ufeff\ufffe\uffff',
  '\u{10ffff}\u{1f600}',
  "quote ' \" \\ / \b\f\n\r\t",
  'é' + 'x'.repeat(2_000_000) + '\ud83d',
];
const numbers = [1e21, -0, 5e-324, 1.7976931348623157e308, 0.1 + 0.2, -1e-7, 2 ** 53, 1e-6, 123456789012345680000];
const keySets: Record<string, unknown>[] = [
  { prev_hasg: 1, prev_hash_: 2, 'seq ': 3, sep: 4, 'seq\u0000': 5, hash: 'h', '': 0, sez: 6, prev: 7, s: 8 },
  { ['__proto__']: { prev_hash: 'x', seq: 1 }, '\ud800': 1, '\u20ac': 2, 'Z': 3, 'prev_hash\u0000': 4 },
  { nested: { b: [1, undefined, { seq: -0 }], a: new Date(0) }, u: undefined },
];

const postgres = await realPostgresAvailable();
for (const name of ['embedded', 'postgres'] as const) {
  t.test(`store hash = eventHash and the chain verifies (${name})`, { skip: name === 'postgres' && !postgres ? 'no PostgreSQL answers at TEST_DATABASE_URL' : false }, async (t) => {
    let store: Store;
    if (name === 'embedded') {
      store = await openStore({ databaseUrl: undefined, dataDir: await tempDir(), template: await storeTemplate() });
      t.teardown(() => store.close());
    } else {
      const db = await freshDatabase('svc_review_audit');
      store = await openStore({ databaseUrl: db.url, dataDir: await tempDir() });
      t.teardown(async () => {
        await store.close();
        await db.drop();
      });
    }
    const conn = await makeConn(store);
    const fieldsList: Record<string, unknown>[] = [
      ...nasty.map((s) => ({ type: 'query', sql: s })),
      ...numbers.map((n) => ({ type: 'query', n, arr: [n] })),
      ...keySets,
    ];
    for (const fields of fieldsList) {
      const ev = await appendEvent(store, conn, fields);
      const { hash, ...body } = ev as EventBody & { hash: string };
      // (a field named "hash" is shadowed by the event's hash in the answer, as before: only the stored form is checked then)
      if (!('hash' in fields)) t.equal(hash, eventHash(body as EventBody), `returned event hashes as the store did: ${JSON.stringify(Object.keys(fields))}`);
      const [row] = await store.query<{ body: string; hash: string }>('SELECT body, hash FROM audit_events WHERE event_id = $1', [ev.id]);
      t.equal(row?.hash, eventHash(JSON.parse(row?.body ?? '{}') as EventBody), 'stored body re-hashes to the stored hash');
    }
    // concurrent appends: one order
    await Promise.all(Array.from({ length: 100 }, (_, i) => appendEvent(store, conn, { type: 'query', i })));
    const v = await verifyConnection(store, conn);
    t.match(v, { verified: true, events_checked: fieldsList.length + 100, broken_at: null });
    const times = (await store.query<{ body: string }>('SELECT body FROM audit_events WHERE connection_id = $1 ORDER BY seq', [conn])).map((r) => (JSON.parse(r.body) as { at: string }).at);
    t.ok(times.every((at, i) => i === 0 || at >= (times[i - 1] as string)), 'times never go backwards along the chain');
    t.ok(times.every((at) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(at) && new Date(at).toISOString() === at), 'in toISOString form');
  });
}
