/**
 * The in-process registry of running statements: a query that passed its checks before its
 * connection, key or relay was revoked here, and registers after (it waited for its reservation),
 * is stopped before it starts; a closed registry does not watch the store again; the watcher
 * answers a relay's deletion seen in the store as relay_deleted, not as its connections' revocation.
 */
import t from 'tap';
import { RunningQueries } from '../../control-plane/query/running.js';
import type { Sql } from '../../control-plane/store/index.js';

const later = new Date(Date.now() + 3_600_000);

t.test('a query registered after its connection, key or relay was revoked is stopped at once', async (t) => {
  const running = new RunningQueries();
  t.equal(await running.revoke('conn_a'), 0, 'nothing was running');
  const a = running.start('conn_a', { expiresAt: later });
  t.equal(a.signal.aborted, true, 'connection revoked before it registered');
  t.equal(a.reason()?.status, 410);
  t.match(a.reason()?.details, { cause: 'revoked' });
  a.done();

  await running.keyRevoked('key_1');
  const k = running.start('conn_b', { expiresAt: later, keyId: 'key_1' });
  t.match(k.reason()?.details, { cause: 'key_revoked' });
  k.done();

  await running.relayDeleted('rly_1');
  const r = running.start('conn_c', { expiresAt: later, relayId: 'rly_1' });
  t.match(r.reason()?.details, { cause: 'relay_deleted', relay_id: 'rly_1' });
  r.done();

  const other = running.start('conn_d', { expiresAt: later, keyId: 'key_2', relayId: 'rly_2' });
  t.equal(other.signal.aborted, false, 'others run');
  other.done();
  running.close();
});

t.test('what it remembers is bounded', async (t) => {
  const running = new RunningQueries();
  for (let i = 0; i <= RunningQueries.REMEMBERED; i++) await running.revoke(`conn_${i}`);
  t.equal(running.start('conn_0', { expiresAt: later }).signal.aborted, false, 'the oldest is forgotten (the settlement still refuses it)');
  t.equal(running.start(`conn_${RunningQueries.REMEMBERED}`, { expiresAt: later }).signal.aborted, true, 'the newest is remembered');
  running.close();
});

t.test('the watcher: a relay deleted elsewhere answers its statements with the cause relay_deleted, though its connections are revoked too', async (t) => {
  // what the store answers for them: the deletion revoked the connection in the same transaction
  const store = { query: async () => [{ kind: 'c', id: 'conn_w' }, { kind: 'r', id: 'rly_w' }] } as unknown as Sql;
  const running = new RunningQueries(store);
  t.teardown(() => running.close());
  const q = running.start('conn_w', { expiresAt: later, relayId: 'rly_w' });
  const alive = setInterval(() => undefined, 1000); // the watcher's timer does not hold the process open
  await new Promise((resolve) => q.signal.addEventListener('abort', resolve, { once: true }));
  clearInterval(alive);
  t.match(q.reason()?.details, { cause: 'relay_deleted', relay_id: 'rly_w' });
  q.done();
});

t.test('a query registered after its relay was deleted elsewhere is answered relay_deleted, though its connection is remembered revoked too', async (t) => {
  const running = new RunningQueries();
  t.teardown(() => running.close());
  // what the watcher remembers of one deletion seen in the store: the relay and its connection (review of e6e837d)
  await running.revoke('conn_r');
  await running.relayDeleted('rly_r');
  const q = running.start('conn_r', { expiresAt: later, relayId: 'rly_r' });
  t.equal(q.signal.aborted, true);
  t.match(q.reason()?.details, { cause: 'relay_deleted', relay_id: 'rly_r' });
  q.done();
});
