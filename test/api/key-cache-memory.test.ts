/**
 * accounts `KeyCache` against a real (embedded) store: bounded, and a key revoked in the store is
 * never written to as used.
 */
import t from 'tap';
import { KEY_CACHE_MAX, KEY_CACHE_MS, KeyCache, signup } from '../../control-plane/accounts/index.js';
import { embeddedStore } from '../helpers/server.js';

t.test('KeyCache', async (t) => {
  const store = await embeddedStore(t);

  t.test('a key revoked in the store and used from the cache is not marked used', async (t) => {
    const { apiKey, agentId } = await signup(store, 'Org', 'agent');
    const realNow = Date.now;
    t.teardown(() => {
      Date.now = realNow;
    });
    const t0 = realNow();
    // last used almost a minute ago: read now, the key is not written to (minute granularity)
    const lastUsed = new Date(t0 - KEY_CACHE_MS + 1_000).toISOString();
    await store.query('UPDATE agent_keys SET last_used_at = $2 WHERE id = $1', [agentId, lastUsed]);
    const keys = new KeyCache(store);
    Date.now = () => t0;
    t.ok(await keys.fresh(apiKey), 'read from the store');
    await store.query('UPDATE agent_keys SET revoked_at = now() WHERE id = $1', [agentId]);
    // two seconds later, still cached; last used more than a minute before
    Date.now = () => t0 + 2_000;
    t.match(await keys.recent(apiKey), { cached: true }, 'answered from the cache');
    Date.now = realNow;
    const [row] = await store.query<{ last_used_at: Date | string }>('SELECT last_used_at FROM agent_keys WHERE id = $1', [agentId]);
    t.equal(new Date(row?.last_used_at ?? 0).toISOString(), lastUsed, 'last_used_at not written after the revocation');
  });

  t.test('a key revoked, un-revoked and revoked again', async (t) => {
    const { apiKey, agentId } = await signup(store, 'Org2', 'agent');
    const keys = new KeyCache(store);
    t.ok(await keys.fresh(apiKey));
    await store.query('UPDATE agent_keys SET revoked_at = now() WHERE id = $1', [agentId]);
    t.equal(await keys.revoked(agentId), true);
    t.equal(await keys.recent(apiKey), undefined, 'forgotten, read again: revoked');
    await store.query('UPDATE agent_keys SET revoked_at = NULL WHERE id = $1', [agentId]);
    t.match(await keys.recent(apiKey), { cached: false }, 'valid again, read from the store');
    t.match(await keys.recent(apiKey), { cached: true });
    await store.query('UPDATE agent_keys SET revoked_at = now() WHERE id = $1', [agentId]);
    t.equal(await keys.revoked(agentId), true);
    t.equal(await keys.recent(apiKey), undefined);
    await store.query('DELETE FROM agent_keys WHERE id = $1', [agentId]);
    t.equal(await keys.revoked(agentId), true, 'a key gone from the store counts as revoked');
  });

  t.test(`at most ${KEY_CACHE_MAX} keys, the least recently used forgotten first`, async (t) => {
    const { orgId } = await signup(store, 'Many', 'agent');
    const n = KEY_CACHE_MAX + 5;
    const keyOf = (i: number): string => `svc_conn_${String(i).padStart(43, 'A')}`;
    await store.query(
      `INSERT INTO agent_keys (id, org_id, agent_name, key_hash, created_at, last_used_at)
       SELECT 'key_many_' || i, $1, 'a', encode(sha256(convert_to('svc_conn_' || lpad(i::text, 43, 'A'), 'UTF8')), 'hex'), now(), now()
       FROM generate_series(0, $2::int - 1) AS i`,
      [orgId, n],
    );
    const keys = new KeyCache(store);
    t.ok(await keys.fresh(keyOf(0)), 'the first key read');
    for (let i = 1; i < n; i++) {
      if (i === KEY_CACHE_MAX - 1) t.match(await keys.recent(keyOf(0)), { cached: true }, 'the first key used again');
      await keys.fresh(keyOf(i));
    }
    t.equal(keys.stats().size, KEY_CACHE_MAX, 'bounded');
    t.match(await keys.recent(keyOf(0)), { cached: true }, 'the key used recently kept');
    t.match(await keys.recent(keyOf(1)), { cached: false }, 'the least recently used forgotten');
  });
});
