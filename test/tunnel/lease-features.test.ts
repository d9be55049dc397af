/**
 * What a relay's tunnel negotiated (relays.features, read as GET /v1/relays upgrade_required) is
 * written with the lease claim. A relay that was outdated and reconnects upgraded through the same
 * replica, whose claim then fails (the store answered an error once), must not keep its old
 * features: the heartbeat renews the lease this replica already names, and claims again for the
 * tunnel whose own claim never landed. Found by review of b31411c: the renewal alone kept the lease,
 * so upgrade_required (and version) stayed the old tunnel's until the relay reconnected again.
 * A real store (the embedded engine runs the same SQL as PostgreSQL).
 */
import t from 'tap';
import { listRelays } from '../../control-plane/relays/index.js';
import type { Store } from '../../control-plane/store/index.js';
import { TunnelLeases } from '../../control-plane/tunnel/leases.js';
import { TunnelRegistry, type LiveTunnel } from '../../control-plane/tunnel/index.js';
import type { Session } from '../../protocol/index.js';
import { RELAY_FEATURES } from '../../protocol/relay-contract.js';
import { signupAgent, startServer } from '../helpers/server.js';

function tunnel(relayId: string, orgId: string, serial: string, version: string, features: readonly string[]): LiveTunnel {
  const session = {
    closed: new Promise<void>(() => undefined),
    negotiated: { version: 1, features: [...features] },
    drain: async () => undefined,
    close: () => undefined,
  } as unknown as Session;
  return { relayId, orgId, serial, session, connectedAt: new Date(), version, terminate: () => undefined };
}

t.test("an upgraded relay's tunnel whose claim failed: the next heartbeat records what it negotiated", async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const store = srv.svc.store;
  const { orgId } = await signupAgent(srv.url, 'Lease Features Org');
  const relayId = 'rly_lease_features';
  const serial = 'serial_lease_features';
  await store.query('INSERT INTO relays (id, org_id, name, created_at) VALUES ($1, $2, $3, now())', [relayId, orgId, relayId]);
  await store.query("INSERT INTO relay_certificates (serial, fingerprint, key_fingerprint, relay_id, not_before, not_after, issued_at) VALUES ($1, $1, $1, $2, now(), now() + interval '1 day', now())", [serial, relayId]);

  // the store fails the next claim (once), then answers as usual; `beforeClaim` runs before a claim reaches it
  let failClaim = false;
  let beforeClaim: (() => Promise<void>) | undefined;
  const flaky = new Proxy(store, {
    get(target, p, receiver) {
      if (p === 'query') {
        return async (sql: string, params?: unknown[]) => {
          if (failClaim && sql.includes('SET tunnel_replica')) {
            failClaim = false;
            throw new Error('connection reset (test)');
          }
          if (beforeClaim && sql.includes('SET tunnel_replica')) {
            const run = beforeClaim;
            beforeClaim = undefined;
            await run();
          }
          return target.query(sql, params as never);
        };
      }
      const v = Reflect.get(target, p, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as Store;
  const registry = new TunnelRegistry();
  const leases = new TunnelLeases(flaky, 'rep_features', '127.0.0.1:1', registry);
  const upgradeRequired = async (): Promise<{ upgrade_required: boolean; version: string | null } | undefined> => (await listRelays(store, orgId)).find((r) => r.relay_id === relayId);

  const old = tunnel(relayId, orgId, serial, 'svc-relay/0.1.0', []);
  registry.add(old);
  await leases.claim(old);
  t.match(await upgradeRequired(), { upgrade_required: true, version: 'svc-relay/0.1.0' }, 'the outdated relay: upgrade_required');

  // upgraded, it connects again through this replica; the old tunnel drains; the claim fails
  const current = tunnel(relayId, orgId, serial, 'svc-relay/0.2.0', RELAY_FEATURES);
  registry.add(current);
  failClaim = true;
  await t.rejects(leases.claim(current), /connection reset/);
  t.match(await upgradeRequired(), { upgrade_required: true }, 'nothing recorded yet');

  await leases.beat();
  t.match(await upgradeRequired(), { upgrade_required: false, version: 'svc-relay/0.2.0' }, 'the next heartbeat recorded the upgraded tunnel');
  const [row] = await store.query<{ features: string[] | null }>('SELECT features FROM relays WHERE id = $1', [relayId]);
  t.same(row?.features, [...RELAY_FEATURES]);

  // again, but a newer tunnel of the relay claims through another replica between this replica's
  // renewal and its second claim: the lease stays with the newer tunnel (the retry takes nothing)
  const other = new TunnelRegistry();
  const elsewhere = new TunnelLeases(store, 'rep_elsewhere', '127.0.0.1:2', other);
  const again = tunnel(relayId, orgId, serial, 'svc-relay/0.2.1', RELAY_FEATURES);
  registry.add(again);
  failClaim = true;
  await t.rejects(leases.claim(again), /connection reset/);
  const newer = tunnel(relayId, orgId, serial, 'svc-relay/0.2.2', RELAY_FEATURES);
  other.add(newer);
  beforeClaim = () => elsewhere.claim(newer);
  await leases.beat();
  const [lease] = await store.query<{ tunnel_replica: string; version: string }>('SELECT tunnel_replica, version FROM relays WHERE id = $1', [relayId]);
  t.same(lease, { tunnel_replica: 'rep_elsewhere', version: 'svc-relay/0.2.2' }, 'the newer claim elsewhere keeps the lease');
  await leases.stop();
  await elsewhere.stop();
});
