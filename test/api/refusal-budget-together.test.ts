/**
 * The refused-statement budget (SVC_REFUSED_STATEMENTS_PER_MINUTE) bounds the statements parsed
 * and refused when they arrive together, not only one after another.
 *
 * Review (helper-92, three replicas under load): the budget was looked at before a statement ran
 * and charged after it was refused, so statements sent at once were all let through on the
 * tokens left: with a burst of 10 on one replica, 30 refused statements sent together were all
 * parsed and answered 403, none 429; across three replicas, 29 of 30. A key's statements that
 * arrive while others of it run here are now let through only while the budget's tokens are more
 * than those running, and otherwise wait for one of them to end.
 */
import t from 'tap';
import { RefusalBudget } from '../../control-plane/http/rate-limit.js';
import { storeAround } from '../helpers/rate-buckets.js';
import { twoReplicas } from '../helpers/replicas.js';
import { api, embeddedStore, openConnection, realPostgresAvailable, signupAgent, startServer } from '../helpers/server.js';

type Answer = { error?: { code: string; details?: { reason?: string } } };

const statuses = (rs: { status: number }[]): string => rs.map((r) => r.status).join(' ');

t.test('one server: refused statements sent together spend the burst, the rest are answered 429', async (t) => {
  const s = await startServer({ env: { SVC_REFUSED_STATEMENTS_PER_MINUTE: '4' } }); // a burst of 2, refilled one every 15 s
  t.teardown(() => s.close());
  const agent = await signupAgent(s.url, 'Together');
  const conn = await openConnection(s.url, agent.key, 'demo-healthcare', ['read:patients']);
  const together = await Promise.all(Array.from({ length: 10 }, () => api<Answer>(s.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: 'SELECT * FROM secrets' } })));
  const parsed = together.filter((r) => r.status === 403).length;
  t.ok(parsed <= 2, `at most the burst of 2 parsed and refused: ${statuses(together)}`);
  t.ok(
    together.every((r) => r.status === 403 || (r.status === 429 && r.body.error?.details?.reason === 'refused_statements')),
    'the others: 429 refused_statements',
  );
});

t.test('one server: statements that are not refused, sent together, all run on a small budget', async (t) => {
  const s = await startServer({ env: { SVC_REFUSED_STATEMENTS_PER_MINUTE: '4' } });
  t.teardown(() => s.close());
  const agent = await signupAgent(s.url, 'Together ok');
  const conn = await openConnection(s.url, agent.key, 'demo-healthcare', ['read:patients']);
  const together = await Promise.all(
    Array.from({ length: 8 }, (_, i) => api<Answer>(s.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: `SELECT patient_id FROM patients LIMIT ${i + 1}` } })),
  );
  t.same(together.map((r) => r.status), Array.from({ length: 8 }, () => 200), 'every one answered 200: those beyond the budget waited for the others, none was refused');
  const refused = await Promise.all(Array.from({ length: 3 }, () => api<Answer>(s.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: 'SELECT * FROM secrets' } })));
  t.equal(refused.filter((r) => r.status === 403).length, 2, `the whole burst is still there afterwards: ${statuses(refused)}`);
});

t.test('on a shared store: two budgets (replicas) let through at most the burst on each', async (t) => {
  const shared = storeAround(await embeddedStore(t), { kind: 'postgres' });
  const a = new RefusalBudget(4, shared);
  const b = new RefusalBudget(4, shared);
  // ten statements on each replica at once, each refused once it is let through
  const through = await Promise.all(
    Array.from({ length: 20 }, async (_, i) => {
      try {
        const ticket = await (i % 2 ? a : b).check('k');
        await ticket.refused();
        ticket.ended();
        return true;
      } catch (err) {
        if ((err as { code?: string }).code === 'rate_limited') return false;
        throw err;
      }
    }),
  );
  const n = through.filter(Boolean).length;
  t.ok(n <= 4, `at most the burst of 2 let through on each replica: ${n} of 20`);
});

t.test('on a shared store: statements running through one replica never make another refuse', async (t) => {
  const shared = storeAround(await embeddedStore(t), { kind: 'postgres' });
  const a = new RefusalBudget(4, shared);
  const b = new RefusalBudget(4, shared);
  const running = [await a.check('k'), await a.check('k')]; // the burst of 2, both running on A
  const onB = await Promise.all([b.check('k'), b.check('k')]).then(
    (x) => x,
    () => undefined,
  );
  t.ok(onB, 'two statements on B are let through meanwhile: nothing is held for those running on A');
  for (const x of [...running, ...(onB ?? [])]) x.ended();
});

if (!(await realPostgresAvailable())) {
  t.skip('two replicas on one PostgreSQL store, refused statements sent together to both: no PostgreSQL answers at TEST_DATABASE_URL', () => undefined);
} else {
  t.test('two replicas on one PostgreSQL store: refused statements sent together to both', async (t) => {
    const { a, b } = await twoReplicas(t, 'svc_test_refusal_together', {}, { SVC_REFUSED_STATEMENTS_PER_MINUTE: '4' }); // a burst of 2
    const agent = await signupAgent(a.url, 'Refusals together');
    const conn = await openConnection(a.url, agent.key, 'demo-healthcare', ['read:patients']);
    const together = await Promise.all(
      Array.from({ length: 20 }, (_, i) => api<Answer>(i % 2 ? a.url : b.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: 'SELECT * FROM secrets' } })),
    );
    const parsed = together.filter((r) => r.status === 403).length;
    t.ok(parsed <= 4, `at most the burst of 2 parsed on each replica, the rest 429: ${statuses(together)}`);
    t.ok(together.every((r) => r.status === 403 || r.status === 429), 'nothing but 403 and 429');
  });
}
