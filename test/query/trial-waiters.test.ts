/**
 * A trial query that waits for its organization's trial egress holds waits in this process's
 * wake-up list; once every waiter has stopped waiting (its wait ran out: the hold was released on
 * another replica, or never), the organization leaves the list. It stayed there, an empty entry
 * per organization that ever waited, for as long as the process ran. And a release that comes
 * while the store answers "held" is not missed, and only its own organization's releases send a
 * reservation answered "held" straight back to the store.
 */
import t from 'tap';
import { PendingEvent } from '../../control-plane/audit/index.js';
import { reserve, settleQuery, TRIAL, trialWaitingOrgs, type Reservation } from '../../control-plane/billing/index.js';
import { openStore, type Store } from '../../control-plane/store/index.js';
import type { QueryOptions, Row } from '../../control-plane/store/types.js';
import { storeTemplate, tempDir } from '../helpers/server.js';
import { orgAndConnection } from '../helpers/store-rows.js';

t.test('an organization whose trial waiters all stopped waiting is not kept', async (t) => {
  const store = await openStore({ databaseUrl: undefined, dataDir: await tempDir(), template: await storeTemplate() });
  t.teardown(() => store.close());
  const before = trialWaitingOrgs();
  const orgs = [await orgAndConnection(store), await orgAndConnection(store)];
  // other running trial queries hold all of each organization's trial egress
  for (const { orgId } of orgs) await store.query('UPDATE orgs SET trial_egress_held = 1000000000000 WHERE id = $1', [orgId]);
  const waits = orgs.flatMap(({ orgId, connectionId }) => [1, 2].map(() => reserve(store, orgId, 1_000_000, { waitMs: 3000, connectionId }).then(() => 'reserved', (err: { code?: string }) => err.code)));
  // (the store's first answers may take a while on a loaded machine: looked at until both wait)
  for (let i = 0; i < 120 && trialWaitingOrgs() < before + 2; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(trialWaitingOrgs(), before + 2, 'both organizations wait while their holds stand');
  t.same(await Promise.all(waits), ['rate_limited', 'rate_limited', 'rate_limited', 'rate_limited'], 'no hold was released before the deadline: 429, nothing reserved');
  t.equal(trialWaitingOrgs(), before, 'once none waits, neither organization is kept');
});

t.test('a hold released while the store answered "held" is not waited for', async (t) => {
  // review: the release's wake-up came before the reservation waited for it, so it waited for its
  // timer (up to a second) with the trial egress free
  const store = await openStore({ databaseUrl: undefined, dataDir: await tempDir(), template: await storeTemplate() });
  t.teardown(() => store.close());
  const { orgId, connectionId } = await orgAndConnection(store);
  const M = 1_000_000;
  // a running trial query holds all of the trial's egress that a query of M bytes could take
  const running = await reserve(store, orgId, TRIAL.egressBytes + M, { connectionId });
  t.equal(running.payer, 'trial');
  let released = false;
  const releasing: Store = {
    ...store,
    query: async <T extends object = Row>(text: string, params?: readonly unknown[], o?: QueryOptions): Promise<T[]> => {
      const rows = await store.query<T>(text, params, o);
      if (!released && text.includes('svc_reserve') && (rows[0] as { o_outcome?: string } | undefined)?.o_outcome === 'held') {
        released = true; // the running query ends (its hold given back) just as the store answers
        const event = new PendingEvent(connectionId, { type: 'query', outcome: 'error' });
        t.equal((await settleQuery(store, { mode: 'refund', reservation: running, bytes: 0, connectionId, check: undefined, count: false, event })).outcome, 'ok');
      }
      return rows;
    },
  };
  const outcome = await Promise.race([
    reserve(releasing, orgId, M, { waitMs: 5000, connectionId }).then((r) => `reserved (${r.payer})`),
    new Promise((r) => setTimeout(() => r('still waiting after 600 ms'), 600)),
  ]);
  t.ok(released, 'the store answered "held" first');
  t.equal(outcome, 'reserved (trial)', 'asked again at once, not after its one-second wait');
});

t.test("another organization's releases do not make a held reservation ask the store again at once", async (t) => {
  // review: the count of releases that sends a 'held' reservation straight back to the store was
  // the whole process's; under other organizations' trial traffic (a release during nearly every
  // ask) a waiting reservation asked the store in a loop instead of waiting for its own
  const store = await openStore({ databaseUrl: undefined, dataDir: await tempDir(), template: await storeTemplate() });
  t.teardown(() => store.close());
  const held = await orgAndConnection(store);
  await store.query('UPDATE orgs SET trial_egress_held = 1000000000000 WHERE id = $1', [held.orgId]);
  const busy = await orgAndConnection(store);
  const running: Reservation[] = [];
  for (let i = 0; i < 8; i++) running.push(await reserve(store, busy.orgId, 1000, { connectionId: busy.connectionId }));
  t.same(running.map((r) => r.payer), running.map(() => 'trial'), "the other organization's queries run on its trial");
  let asks = 0;
  const releasing: Store = {
    ...store,
    query: async <T extends object = Row>(text: string, params?: readonly unknown[], o?: QueryOptions): Promise<T[]> => {
      const rows = await store.query<T>(text, params, o);
      if (text.includes('svc_reserve') && params?.[1] === held.orgId) {
        asks++;
        // one of the other organization's queries ends just as the store answers
        const other = running.pop();
        if (other) {
          const event = new PendingEvent(busy.connectionId, { type: 'query', outcome: 'ok' });
          await settleQuery(store, { mode: 'refund', reservation: other, bytes: 0, connectionId: busy.connectionId, check: undefined, count: false, event });
        }
      }
      return rows;
    },
  };
  const outcome = await reserve(releasing, held.orgId, 1_000_000, { waitMs: 200, connectionId: held.connectionId }).then(
    () => 'reserved',
    (err: { code?: string }) => err.code,
  );
  t.equal(outcome, 'rate_limited', 'its own holds stood until its deadline: 429');
  t.ok(asks <= 3, `it asked the store ${asks} times (held, then once more at its deadline), not once per release elsewhere`);
});
