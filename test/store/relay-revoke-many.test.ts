/**
 * Deleting a relay revokes its live connections in one transaction. Each took three or four store
 * statements (the revocation, its audit event, the webhook lookup and delivery), so a relay with
 * thousands of connections held the store (on the embedded store: every organization's queries)
 * for seconds: 2,000 took about 3 s. Now a few statements for all of them, each still revoked,
 * with its own `connection.revoked` event on its chain and its webhook delivery.
 */
import t from 'tap';
import { appendEvent, genesisHash, verifyConnection } from '../../control-plane/audit/index.js';
import { revokeRelayConnections } from '../../control-plane/connections/index.js';
import { openStore, type Sql } from '../../control-plane/store/index.js';
import type { QueryOptions, Row } from '../../control-plane/store/types.js';
import { storeTemplate, tempDir } from '../helpers/server.js';

t.test('a relay with many connections is revoked in a few statements, each connection as before', async (t) => {
  const store = await openStore({ databaseUrl: undefined, dataDir: await tempDir(), template: await storeTemplate() });
  t.teardown(() => store.close());
  const orgId = 'org_t_many';
  await store.query(`INSERT INTO orgs (id, name, created_at, trial_expires_at) VALUES ($1, 't', now(), now() + interval '1 day')`, [orgId]);
  const created = new Date().toISOString();
  const insert = async (id: string, relay: string): Promise<void> => {
    const genesis = genesisHash({ connection_id: id, org_id: orgId, target_id: 'postgres-relay', scopes: [`relay:${relay}`], created_at: created });
    await store.query(
      `INSERT INTO connections (id, org_id, target_id, scopes, tier, ttl_seconds, created_at, expires_at, genesis_hash, head_hash)
       VALUES ($1, $2, 'postgres-relay', $3, 'container', 3600, $4, now() + interval '1 hour', $5, $5)`,
      [id, orgId, JSON.stringify([`relay:${relay}`]), created, genesis],
    );
  };
  const ids = Array.from({ length: 1200 }, (_, i) => `conn_t_many_${String(i).padStart(4, '0')}`);
  for (const id of ids) await insert(id, 'rly_gone');
  await insert('conn_t_other', 'rly_kept');
  // one connection already has an event on its chain: the revocation links after it
  await appendEvent(store, ids[7] as string, { type: 'query', org_id: orgId });
  await store.query(`INSERT INTO webhook_endpoints (org_id, connection_id, url, secret_sealed, created_at, updated_at) VALUES ($1, $2, 'https://example.com/hook', 'x', now(), now())`, [orgId, ids[3]]);

  let statements = 0;
  const revoked = await store.tx((sql) => {
    const counting: Sql = {
      query: <T extends object = Row>(text: string, params?: readonly unknown[], o?: QueryOptions) => {
        statements++;
        return sql.query<T>(text, params, o);
      },
    };
    return revokeRelayConnections(counting, orgId, 'rly_gone', 'key_t', new Date());
  });
  t.equal(revoked.length, ids.length, 'every connection through the relay');
  t.ok(statements <= 10, `${statements} statements for ${ids.length} connections (three per connection before, four with a receiver)`);

  const rows = await store.query<{ id: string; revoked_reason: string | null; head_seq: number }>('SELECT id, revoked_reason, head_seq FROM connections WHERE org_id = $1 ORDER BY id', [orgId]);
  t.same(rows.filter((r) => r.id !== 'conn_t_other').map((r) => r.revoked_reason), ids.map(() => 'relay_deleted'), 'each revoked for its relay');
  t.equal(rows.find((r) => r.id === 'conn_t_other')?.revoked_reason, null, "another relay's connection is untouched");
  t.equal(rows.find((r) => r.id === ids[7])?.head_seq, 2, 'the revocation follows the event already on its chain');
  for (const id of [ids[0], ids[7], ids[ids.length - 1]] as string[]) {
    t.match(await verifyConnection(store, id), { verified: true, broken_at: null }, `${id}: its chain verifies`);
  }
  const events = await store.query<{ connection_id: string; body: string }>("SELECT connection_id, body FROM audit_events WHERE body LIKE '%connection.revoked%'");
  t.equal(events.length, ids.length, 'one connection.revoked event per connection');
  t.match(JSON.parse(events[0]?.body ?? '{}'), { type: 'connection.revoked', org_id: orgId, by: 'key_t', reason: 'relay_deleted', relay_id: 'rly_gone' });
  const deliveries = await store.query<{ connection_id: string; event: string; body: string }>('SELECT connection_id, event, body FROM webhook_deliveries');
  t.same(deliveries.map((d) => [d.connection_id, d.event]), [[ids[3], 'connection.revoked']], 'a delivery for the one connection with a receiver');
  t.match(JSON.parse(deliveries[0]?.body ?? '{}'), { event: 'connection.revoked', connection_id: ids[3], environment: 'live', data: { target_id: 'postgres-relay', resource: { resourceType: 'AuditEvent', action: 'D' } } });
});
