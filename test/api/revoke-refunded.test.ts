/**
 * A statement that reached its source and then failed in a way that is not charged (here SQLSTATE
 * 42703, an unknown column, through a relay, found by the database once a lock it waited for is
 * released), after its connection was revoked through another replica (committed straight into
 * the store, which this replica's registry does not hear of, as in test/api/revoke-running), is
 * answered 410 connection_revoked and audited so (docs/billing.md: "revoked … before it was
 * settled is answered 410 and not charged, whatever else happened to it"), like one that failed in a charged way or succeeded. Its refund
 * used not to read the connection under its row lock: it was answered 400 invalid_sql and audited
 * `refused` after `connection.revoked`.
 */
import pg from 'pg';
import t from 'tap';
import { ordersOnRealPostgres } from '../helpers/customer-db.js';
import { api, openConnection, signupAgent, startServer } from '../helpers/server.js';
import { startRelay } from '../helpers/relay.js';
import { until } from '../helpers/tap.js';

type Answer = { error?: { code?: string; details?: Record<string, unknown> } };
type AuditEvent = { type: string; outcome?: string; error_code?: string | null; cost_cents?: number; seq: number };

t.test('a refunded failure after a revocation made elsewhere is answered 410 and audited connection_revoked', async (t) => {
  const customer = await ordersOnRealPostgres(t, 'svc_revoke_refunded', 10);
  if (!customer) return;
  const { db, client } = customer;
  const a = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 30_000 } });
  t.teardown(() => a.close());
  const store = a.svc.store;
  const org = await signupAgent(a.url, 'Revoke Refunded Org');
  await store.query('UPDATE orgs SET trial_queries_used = 100 WHERE id = $1', [org.orgId]);
  t.equal((await api(a.url, 'POST', '/v1/agent/topup', { key: org.key, body: { amount_cents: 1000 } })).status, 200);
  const relay = await startRelay(a, org.key, db.url, { applicationName: 'svc-relay-revoke-refunded' });
  t.teardown(() => relay.close());
  const conn = await openConnection(a.url, org.key, 'postgres-relay', [`relay:${relay.relayId}`, 'read:orders']);
  const usage0 = (await api(a.url, 'GET', '/v1/agent/account/usage', { key: org.key })).body;

  // the statement waits at the database for this lock; its column is looked up once it has the table
  // (watched from another session: pg_stat_activity is read once per transaction)
  const locker = new pg.Client({ connectionString: db.url });
  await locker.connect();
  t.teardown(() => locker.end());
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE orders IN ACCESS EXCLUSIVE MODE');
  const pending = api<Answer>(a.url, 'POST', `/v1/connections/${conn}/query`, { key: org.key, body: { sql: 'SELECT no_such_column FROM orders' } });
  await until('the statement waits for the lock at the database', async () => {
    const r = await client.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%no_such_column%' AND pid <> pg_backend_pid()");
    return (r.rows[0]?.n ?? 0) === 1;
  });
  // what revokeConnection commits on another replica (its event included), unheard of here
  await store.query("UPDATE connections SET revoked_at = now(), revoked_reason = 'revoked' WHERE id = $1", [conn]);
  await locker.query('COMMIT'); // the statement now fails at once (42703)

  const r = await pending;
  t.equal(r.status, 410, r.text.slice(0, 300));
  t.match(r.body.error, { code: 'connection_revoked', details: { cause: 'revoked' } });
  t.equal(r.body.error?.details?.['cost_cents'], undefined, 'no charge is reported');
  const usage1 = (await api(a.url, 'GET', '/v1/agent/account/usage', { key: org.key })).body;
  t.same(usage1, usage0, 'nothing was charged');

  const rows = await store.query<{ seq: number; body: Omit<AuditEvent, 'seq'> }>('SELECT seq, body::jsonb AS body FROM audit_events WHERE connection_id = $1 ORDER BY seq', [conn]);
  const query = rows.map((e) => ({ ...e.body, seq: e.seq })).filter((e) => e.type === 'query');
  t.equal(query.length, 1, 'the statement is audited once');
  t.match(query[0], { outcome: 'error', error_code: 'connection_revoked' }, JSON.stringify(query[0]));
  t.equal(query[0]?.cost_cents, undefined, 'no charge in its event');
});
