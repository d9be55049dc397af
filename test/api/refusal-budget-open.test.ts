/**
 * The refusal budget on a PostgreSQL store, found open by a replica, is taken as open for a
 * moment without asking the store (REFUSALS_OPEN_MS). The documented bound: refusals made through
 * other replicas in that moment may let one more refused statement through on this one.
 *
 * Review: every query that arrived in the moment was let through from what the replica knew, so
 * an agent that spent its budget on one replica and then sent its refused statements to another
 * all at once had every one of them parsed and checked (up to its per-key request rate, 200 by
 * default), not one. And a look at the store that was answered after this replica's own take
 * still marked the budget open.
 *
 * The buckets' SQL runs on the embedded store's engine here (as in rate-limit-replicas); the
 * budgets are told it is PostgreSQL's so they keep their buckets in it, as on a shared store.
 */
import t from 'tap';
import { RefusalBudget } from '../../control-plane/http/rate-limit.js';
import { countingPeeks, storeAround } from '../helpers/rate-buckets.js';
import { twoReplicas } from '../helpers/replicas.js';
import { api, embeddedStore, openConnection, realPostgresAvailable, signupAgent } from '../helpers/server.js';

/** whether `keyId`'s next query is let through (true) or answered 429 (false) */
async function admitted(budget: RefusalBudget, keyId: string): Promise<boolean> {
  try {
    (await budget.check(keyId)).ended();
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'rate_limited') return false;
    throw err;
  }
}

t.test('queries arriving together on a replica that took the budget as open: one more through, not all', async (t) => {
  const shared = storeAround(await embeddedStore(t), { kind: 'postgres' });
  // 4 a minute: a burst of 2, refilled one every 15 s (none refills during the test)
  const a = new RefusalBudget(4, shared);
  const b = new RefusalBudget(4, shared);
  t.ok(await admitted(a, 'k'), 'replica A finds the budget open (and keeps that for a moment)');
  await b.charge('k');
  await b.charge('k');
  t.notOk(await admitted(b, 'k'), 'the key spent its budget through replica B');
  // ten refused statements sent to A at once: each is checked before any of them is refused and charged
  const through = (await Promise.all(Array.from({ length: 10 }, () => admitted(a, 'k')))).filter(Boolean).length;
  t.equal(through, 1, `one more let through on A, the rest answered 429: ${through} of 10 let through`);
});

t.test("a look at the store answered after this replica's own take does not mark the budget open", async (t) => {
  const store = await embeddedStore(t);
  let hold: Promise<void> | undefined;
  let ran!: () => void;
  const lookedUp = new Promise<void>((r) => (ran = r));
  // the look-up runs at once, its answer comes back when `hold` settles (a slow round trip)
  const shared = storeAround(store, {
    kind: 'postgres',
    peek: async (run) => {
      const rows = await run();
      if (hold) {
        ran();
        await hold;
      }
      return rows;
    },
  });
  const a = new RefusalBudget(4, shared);
  await a.charge('k'); // one of the burst of 2 left
  let answer!: () => void;
  hold = new Promise((r) => (answer = r));
  const first = admitted(a, 'k'); // finds the last one, its answer on the way
  await lookedUp;
  await a.charge('k'); // meanwhile a statement let through before is refused here and takes it
  hold = undefined;
  answer();
  t.ok(await first, 'the query whose look-up found the token is let through');
  t.notOk(await admitted(a, 'k'), 'the next asks the store, which has none left: 429');
});

t.test('a look at the store made while a take of this replica is on its way does not mark the budget open', async (t) => {
  const store = await embeddedStore(t);
  let hold: Promise<void> | undefined;
  let sent!: () => void;
  const taking = new Promise<void>((r) => (sent = r));
  // a take held before it reaches the store (a slow round trip there)
  const shared = storeAround(store, {
    kind: 'postgres',
    other: async (run) => {
      if (hold) {
        sent();
        await hold;
      }
      return run();
    },
  });
  const a = new RefusalBudget(4, shared);
  await a.charge('k'); // one of the burst of 2 left
  let release!: () => void;
  hold = new Promise((r) => (release = r));
  const charged = a.charge('k'); // a statement let through before is refused here: its take is on its way
  await taking;
  t.ok(await admitted(a, 'k'), 'a query meanwhile finds the last one (the take has not reached the store)');
  hold = undefined;
  release();
  await charged;
  t.notOk(await admitted(a, 'k'), 'the next asks the store, which has none left since the take: 429');
});

t.test('one query at a time still asks the store once a moment; one arriving beside it asks again', async (t) => {
  const { store: shared, peeks } = countingPeeks(await embeddedStore(t), 'postgres');
  const a = new RefusalBudget(4, shared);
  (await a.check('k')).ended();
  const lent = await a.check('k');
  t.equal(peeks(), 1, 'the second query is let through on what the first found');
  const beside = await a.check('k');
  t.equal(peeks(), 2, 'a query arriving while it runs asks the store');
  beside.ended();
  lent.ended();
  lent.ended(); // a second call ends nothing more
  const next = await a.check('k');
  t.equal(peeks(), 2, 'once it has ended, the next is let through on what was found');
  const again = await a.check('k');
  t.equal(peeks(), 3, 'and again one beside it asks the store (the second ended() of the first did not end this one)');
  again.ended();
  next.ended();
});

if (!(await realPostgresAvailable())) {
  t.skip('two replicas on one PostgreSQL store, refused statements sent together: no PostgreSQL answers at TEST_DATABASE_URL', () => undefined);
} else {
  t.test('two replicas on one PostgreSQL store: refused statements sent together to the other replica', async (t) => {
    const { a, b } = await twoReplicas(t, 'svc_test_refusal_open', {}, { SVC_REFUSED_STATEMENTS_PER_MINUTE: '4' }); // a burst of 2
    const agent = await signupAgent(a.url, 'Refusals');
    const conn = await openConnection(a.url, agent.key, 'demo-healthcare', ['read:patients']);
    const query = (url: string, sql: string) => api<{ error?: { code: string } }>(url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql } });
    t.equal((await query(a.url, 'SELECT patient_id FROM patients LIMIT 1')).status, 200, 'replica A finds the budget open');
    const spent = [];
    for (let i = 0; i < 3; i++) spent.push((await query(b.url, 'SELECT * FROM secrets')).status);
    t.same(spent, [403, 403, 429], 'the key spends its budget through replica B');
    // (before the review two to ten of them were parsed, as they arrived before the first was refused)
    const together = await Promise.all(Array.from({ length: 10 }, () => query(a.url, 'SELECT * FROM secrets')));
    const parsed = together.filter((r) => r.status === 403).length;
    t.ok(parsed <= 1, `at most one more refused statement parsed on A, the rest 429: ${together.map((r) => r.status).join(' ')}`);
    t.ok(together.every((r) => r.status === 403 || r.status === 429), 'nothing but 403 and 429');
  });
}
