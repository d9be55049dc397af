/**
 * A query whose reservation was swept (sweepReservations, as after a long stall) before its
 * settlement is answered with its rows and charged nothing: settlement says 'swept', and the
 * second settlement ('none') still counts the query and its egress on the connection.
 */
import t from 'tap';
import { PendingEvent } from '../../control-plane/audit/index.js';
import { reserve, settleQuery, sweepReservations } from '../../control-plane/billing/index.js';
import { openStore } from '../../control-plane/store/index.js';
import { storeTemplate, tempDir } from '../helpers/server.js';
import { orgAndConnection } from '../helpers/store-rows.js';

t.test('a swept query that is answered counts its egress on the connection', async (t) => {
  const store = await openStore({ databaseUrl: undefined, dataDir: await tempDir(), template: await storeTemplate() });
  t.teardown(() => store.close());
  const { orgId, connectionId: conn } = await orgAndConnection(store);
  const r = await reserve(store, orgId, 100_000, { connectionId: conn });
  t.equal(await sweepReservations(store, -60_000), 1, 'swept (as after a crash or a long stall)');
  const q = { reservation: r, bytes: 1234, connectionId: conn, check: { keyId: undefined, relayId: undefined }, count: true } as const;
  // exactly what runQuery does: 'settle' answers 'swept', then 'none' with the same bytes
  t.equal((await settleQuery(store, { ...q, mode: 'settle', event: new PendingEvent(conn, { type: 'query' }) })).outcome, 'swept');
  t.equal((await settleQuery(store, { ...q, mode: 'none', event: new PendingEvent(conn, { type: 'query', bytes_egressed: 1234 }) })).outcome, 'ok');
  const [c] = await store.query<{ queries: number | bigint; bytes_egressed: number | bigint }>('SELECT queries, bytes_egressed FROM connections WHERE id = $1', [conn]);
  t.equal(Number(c?.queries), 1);
  t.equal(Number(c?.bytes_egressed), 1234, 'the 1234 bytes answered are counted');
});
