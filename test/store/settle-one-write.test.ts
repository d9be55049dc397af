/**
 * Migration 14 (store/functions.ts SETTLE_ONE_WRITE) replaces svc_settle with one that locks and
 * writes the connection's row once; it must answer exactly as the first version (migration 8):
 * the same outcomes, money, counters (only with p_count) and audit chain (head, seq, the hash
 * rule of svc_append_event), on the embedded store and on PostgreSQL, also in a store upgraded
 * from migration 13 with a chain already under way.
 *
 * The same scenario runs on a store at migration 13 and on one at 14; everything they write is
 * compared but the store's clock (`at` in each event, hence its hash), and each chain verifies.
 */
import t from 'tap';
import { PendingEvent, verifyConnection } from '../../control-plane/audit/index.js';
import { reserve, settleQuery, type Reservation, type SettleQuery } from '../../control-plane/billing/index.js';
import { MIGRATIONS, migrate, type Store } from '../../control-plane/store/index.js';
import { realPostgresAvailable } from '../helpers/server.js';
import { migratedStore, type StoreKind } from '../helpers/store-kinds.js';
import { orgAndConnection } from '../helpers/store-rows.js';
import type { TapTest } from '../helpers/tap.js';

const V13 = MIGRATIONS.findIndex((m) => m.version === 13) + 1;

/** a store migrated up to `upTo` migrations (of MIGRATIONS) */
const storeAt = (t: TapTest, kind: StoreKind, upTo: number): Promise<Store> => migratedStore(t, kind, MIGRATIONS.slice(0, upTo), 'svc_settle14');

/** what a scenario leaves, but the clock: outcomes, rows of money and counters, each event's body without `at` */
type Trace = unknown[];

async function snapshot(store: Store, orgId: string, conn: string): Promise<unknown> {
  const [org] = await store.query(
    `SELECT wallet_nc::text, wallet_held_nc::text, wallet_spend_nc::text, trial_queries_used, trial_spent_nc::text, trial_egress_used::text,
            trial_egress_held::text, queries_total::text, egress_total::text, list_spend_nc::text FROM orgs WHERE id = $1`,
    [orgId],
  );
  const [c] = await store.query('SELECT queries::text, bytes_egressed::text, last_query_at IS NOT NULL AS queried, head_seq FROM connections WHERE id = $1', [conn]);
  const [rsv] = await store.query('SELECT count(*)::int AS n FROM reservations WHERE org_id = $1', [orgId]);
  const ledger = await store.query('SELECT kind, amount_nc::text, balance_after_nc::text FROM ledger WHERE org_id = $1 ORDER BY id', [orgId]);
  const events = await store.query<{ seq: number; body: string }>('SELECT seq, body FROM audit_events WHERE connection_id = $1 ORDER BY seq', [conn]);
  const bodies = events.map((e) => {
    const { at: _at, prev_hash: _prev, connection_id: _conn, ...rest } = JSON.parse(e.body) as Record<string, unknown>;
    return { seq: e.seq, ...rest };
  });
  return { org, c, rsv, ledger, bodies };
}

/** the scenario: every outcome of svc_settle, with and without counting, on one connection */
async function scenario(store: Store, ids: { orgId: string; conn: string; keyId: string; relayId: string }, trace: Trace, run = 'a'): Promise<void> {
  const { orgId, conn, keyId, relayId } = ids;
  let n = 0;
  const settle = async (q: Omit<SettleQuery, 'event' | 'connectionId'>, what: string): Promise<void> => {
    const ev = new PendingEvent(conn, { type: 'query', what }, `evt_${run}_${what}_${n++}`);
    const done = await settleQuery(store, { ...q, connectionId: conn, event: ev });
    const out: Record<string, unknown> = { what, outcome: done.outcome };
    if (done.outcome === 'ok') {
      out['seq'] = done.row.o_seq;
      const [stored] = await store.query<{ hash: string }>('SELECT hash FROM audit_events WHERE event_id = $1', [ev.id]);
      out['hash_is_stored'] = stored?.hash === done.row.o_hash;
      const [head] = await store.query<{ head_hash: string }>('SELECT head_hash FROM connections WHERE id = $1', [conn]);
      out['head_is_hash'] = head?.head_hash === done.row.o_hash;
    }
    trace.push(out, await snapshot(store, orgId, conn));
  };
  const check = { keyId, relayId };
  const reserved = async (): Promise<Reservation> => reserve(store, orgId, 1_000_000, { connectionId: conn, keyId });

  await settle({ mode: 'settle', reservation: await reserved(), bytes: 12_345, check, count: true }, 'trial_settle_counted');
  await settle({ mode: 'refund', reservation: await reserved(), bytes: 0, check: undefined, count: false }, 'trial_refund');
  await settle({ mode: 'settle', reservation: await reserved(), bytes: 7, check, count: false }, 'trial_settle_uncounted');
  const swept = await reserved();
  await store.query('DELETE FROM reservations WHERE id = $1', [swept.id]);
  await settle({ mode: 'settle', reservation: swept, bytes: 5, check, count: true }, 'swept');
  await settle({ mode: 'none', reservation: swept, bytes: 5, check, count: true }, 'none_after_swept');
  // the wallet pays from here
  await store.query("UPDATE orgs SET trial_queries_used = 1000000, wallet_nc = 50000000000, auto_reload_threshold_nc = 40000000000, auto_reload_amount_nc = 1000000000 WHERE id = $1", [orgId]);
  await settle({ mode: 'settle', reservation: await reserved(), bytes: 99_999, check, count: true }, 'wallet_settle');
  await settle({ mode: 'refund', reservation: await reserved(), bytes: 0, check, count: false }, 'wallet_refund');
  // stops, in their order of precedence
  await store.query("UPDATE relays SET revoked_at = now() WHERE id = $1", [relayId]);
  await settle({ mode: 'settle', reservation: await reserved(), bytes: 1, check, count: true }, 'relay_deleted');
  await store.query("UPDATE agent_keys SET revoked_at = now() WHERE id = $1", [keyId]);
  const held = await reserve(store, orgId, 1_000_000, { connectionId: conn });
  await settle({ mode: 'settle', reservation: held, bytes: 1, check, count: true }, 'key_revoked');
  await store.query("UPDATE connections SET expires_at = now() - interval '1 second' WHERE id = $1", [conn]);
  await settle({ mode: 'settle', reservation: held, bytes: 1, check, count: true }, 'expired');
  await store.query('UPDATE connections SET revoked_at = now() WHERE id = $1', [conn]);
  await settle({ mode: 'settle', reservation: held, bytes: 1, check, count: true }, 'revoked');
  // unchecked: written whatever the connection's state
  await settle({ mode: 'refund', reservation: held, bytes: 0, check: undefined, count: false }, 'refund_unchecked');
  // an unknown connection: not found, as before
  const ghost = new PendingEvent('conn_nobody', { type: 'query' }, `evt_${run}_ghost`);
  const err = await settleQuery(store, { mode: 'none', reservation: held, bytes: 0, connectionId: 'conn_nobody', check: undefined, count: true, event: ghost }).then(
    () => 'answered',
    (e: unknown) => String((e as { sqlState?: string; code?: string }).sqlState ?? (e as { code?: string }).code),
  );
  trace.push({ ghost: err });
  const v = await verifyConnection(store, conn);
  trace.push({ verified: v.verified, events: v.events_checked });
}

/** a connection with a key and a relay of its organization, its chain started by `events` appended the first version's way */
async function setup(store: Store): Promise<{ orgId: string; conn: string; keyId: string; relayId: string }> {
  const { orgId, connectionId: conn } = await orgAndConnection(store);
  const keyId = `key_${conn}`;
  const relayId = `rly_${conn}`;
  await store.query("INSERT INTO agent_keys (id, org_id, agent_name, key_hash, created_at) VALUES ($1, $2, 'a', $1, now())", [keyId, orgId]);
  await store.query("INSERT INTO relays (id, org_id, name, created_at) VALUES ($1, $2, 'r', now())", [relayId, orgId]);
  return { orgId, conn, keyId, relayId };
}

const postgres = await realPostgresAvailable();
for (const kind of ['embedded', 'postgres'] as const) {
  const skip = kind === 'postgres' && !postgres ? 'no PostgreSQL answers at TEST_DATABASE_URL' : false;
  t.test(`migration 14's svc_settle answers and writes as the first version (${kind})`, { skip }, async (t) => {
    const before = await storeAt(t, kind, V13);
    const after = await storeAt(t, kind, MIGRATIONS.length);
    const traces: Trace[] = [];
    for (const store of [before, after]) {
      const trace: Trace = [];
      await scenario(store, await setup(store), trace);
      traces.push(trace);
    }
    t.same(traces[1], traces[0], 'the same answers, money, counters and events');
    const outcomes = (traces[0] ?? []).filter((x): x is { what: string; outcome: string } => typeof x === 'object' && x !== null && 'outcome' in x).map((x) => `${x.what}:${x.outcome}`);
    t.same(outcomes, [
      'trial_settle_counted:ok', 'trial_refund:ok', 'trial_settle_uncounted:ok', 'swept:swept', 'none_after_swept:ok', 'wallet_settle:ok', 'wallet_refund:ok',
      'relay_deleted:relay_deleted', 'key_revoked:key_revoked', 'expired:expired', 'revoked:revoked', 'refund_unchecked:ok',
    ], 'every outcome of the scenario was reached');
    t.same((traces[0] ?? []).find((x) => typeof x === 'object' && x !== null && 'ghost' in x), { ghost: 'P0002' }, 'an unknown connection: not found');
    t.match(traces[0]?.[traces[0].length - 1], { verified: true }, 'the chain verifies');
  });

  t.test(`a store upgraded from migration 13 mid-chain settles on (${kind})`, { skip }, async (t) => {
    const store = await storeAt(t, kind, V13);
    const ids = await setup(store);
    const first: Trace = [];
    await scenario(store, ids, first);
    t.same(await migrate(store, MIGRATIONS.slice(0, V13 + 1)), [14], 'migration 14 applied');
    // the same connection, reopened and its key and relay restored, settles on its chain
    await store.query('UPDATE connections SET revoked_at = NULL, expires_at = now() + interval \'1 hour\' WHERE id = $1', [ids.conn]);
    await store.query('UPDATE agent_keys SET revoked_at = NULL WHERE id = $1', [ids.keyId]);
    await store.query('UPDATE relays SET revoked_at = NULL WHERE id = $1', [ids.relayId]);
    await store.query('UPDATE orgs SET trial_queries_used = 0, trial_spent_nc = 0, trial_egress_used = 0, wallet_nc = 0, auto_reload_threshold_nc = NULL, auto_reload_amount_nc = NULL WHERE id = $1', [ids.orgId]);
    const second: Trace = [];
    await scenario(store, ids, second, 'b');
    t.match(second[second.length - 1], { verified: true }, 'one chain across the upgrade');
  });
}
