/**
 * A trial query that waits for its organization's trial egress holds waits in this process's
 * wake-up list; once every waiter has stopped waiting (its wait ran out: the hold was released on
 * another replica, or never), the organization leaves the list. It stayed there, an empty entry
 * per organization that ever waited, for as long as the process ran.
 */
import t from 'tap';
import { reserve, trialWaitingOrgs } from '../../control-plane/billing/index.js';
import { openStore } from '../../control-plane/store/index.js';
import { storeTemplate, tempDir } from '../helpers/server.js';
import { orgAndConnection } from '../helpers/store-rows.js';

t.test('an organization whose trial waiters all stopped waiting is not kept', async (t) => {
  const store = await openStore({ databaseUrl: undefined, dataDir: await tempDir(), template: await storeTemplate() });
  t.teardown(() => store.close());
  const before = trialWaitingOrgs();
  const orgs = [await orgAndConnection(store), await orgAndConnection(store)];
  // other running trial queries hold all of each organization's trial egress
  for (const { orgId } of orgs) await store.query('UPDATE orgs SET trial_egress_held = 1000000000000 WHERE id = $1', [orgId]);
  const waits = orgs.flatMap(({ orgId, connectionId }) => [1, 2].map(() => reserve(store, orgId, 1_000_000, { waitMs: 150, connectionId }).then(() => 'reserved', (err: { code?: string }) => err.code)));
  await new Promise((r) => setTimeout(r, 60));
  t.equal(trialWaitingOrgs(), before + 2, 'both organizations wait while their holds stand');
  t.same(await Promise.all(waits), ['rate_limited', 'rate_limited', 'rate_limited', 'rate_limited'], 'no hold was released before the deadline: 429, nothing reserved');
  t.equal(trialWaitingOrgs(), before, 'once none waits, neither organization is kept');
});
