/** Rows written straight into a store, for tests of the store functions below the API. */
import { randomBytes } from 'node:crypto';
import { genesisHash } from '../../control-plane/audit/index.js';
import type { Store } from '../../control-plane/store/index.js';

/** A new organization (its trial open for a day) and one demo connection of it (an hour). */
export async function orgAndConnection(store: Store): Promise<{ readonly orgId: string; readonly connectionId: string }> {
  const orgId = `org_t_${randomBytes(6).toString('hex')}`;
  await store.query(`INSERT INTO orgs (id, name, created_at, trial_expires_at) VALUES ($1, 't', now(), now() + interval '1 day')`, [orgId]);
  const connectionId = `conn_t_${randomBytes(6).toString('hex')}`;
  const created = new Date().toISOString();
  const genesis = genesisHash({ connection_id: connectionId, org_id: orgId, target_id: 'demo-healthcare', scopes: [], created_at: created });
  await store.query(
    `INSERT INTO connections (id, org_id, target_id, scopes, tier, ttl_seconds, created_at, expires_at, genesis_hash, head_hash)
     VALUES ($1, $2, 'demo-healthcare', '[]', 'container', 3600, $3, now() + interval '1 hour', $4, $4)`,
    [connectionId, orgId, created, genesis],
  );
  return { orgId, connectionId };
}
