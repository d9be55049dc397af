/**
 * Migration 18 (store/functions.ts SETTLE_STORE_CLOCK): svc_settle judges a connection's expiry by
 * the later of the caller's clock and the store's. A replica whose clock lags the store's (here:
 * its `p_now` an hour behind, as settleQuery sends it) is answered `expired` for a connection whose
 * expiry the store's clock has passed; before, it settled and answered it. A connection the
 * store's clock has not seen expire is settled as before. On the embedded store and on PostgreSQL.
 */
import t from 'tap';
import { PendingEvent } from '../../control-plane/audit/index.js';
import { reserve, settleQuery } from '../../control-plane/billing/index.js';
import { MIGRATIONS, type Sql, type Store } from '../../control-plane/store/index.js';
import { realPostgresAvailable } from '../helpers/server.js';
import { migratedStore } from '../helpers/store-kinds.js';
import { orgAndConnection } from '../helpers/store-rows.js';

const HOUR_MS = 3_600_000;
/** svc_settle's p_now: its 15th parameter */
const P_NOW = 14;

/** `store` as a replica whose clock is an hour behind the store's sees it: svc_settle's p_now moved back */
function lagging(store: Store): Sql {
  return {
    query: (text, params, options) => {
      if (!text.includes('svc_settle(') || !params) return store.query(text, params, options);
      const shifted = [...params];
      shifted[P_NOW] = new Date(Date.parse(String(params[P_NOW])) - HOUR_MS).toISOString();
      return store.query(text, shifted, options);
    },
  };
}

const postgres = await realPostgresAvailable();
for (const kind of ['embedded', 'postgres'] as const) {
  const skip = kind === 'postgres' && !postgres ? 'no PostgreSQL answers at TEST_DATABASE_URL' : false;
  t.test(`a replica whose clock lags the store's cannot answer a connection past its expiry (${kind})`, { skip }, async (t) => {
    const store = await migratedStore(t, kind, MIGRATIONS, 'svc_settle18');
    const { orgId, connectionId } = await orgAndConnection(store);
    const settle = async (what: string) =>
      settleQuery(lagging(store), {
        mode: 'settle',
        reservation: await reserve(store, orgId, 1_000_000, { connectionId }),
        bytes: 10,
        connectionId,
        check: { keyId: undefined, relayId: undefined },
        count: true,
        event: new PendingEvent(connectionId, { type: 'query', what }, `evt_${what}`),
      });

    t.equal((await settle('before_expiry')).outcome, 'ok', 'before its expiry by either clock: settled');
    // expired a second ago by the store's clock, which the lagging replica's p_now has not reached
    await store.query("UPDATE connections SET expires_at = now() - interval '1 second' WHERE id = $1", [connectionId]);
    t.equal((await settle('after_expiry')).outcome, 'expired', "past its expiry by the store's clock: expired, nothing written");
    const [c] = await store.query<{ queries: number; head_seq: number }>('SELECT queries, head_seq FROM connections WHERE id = $1', [connectionId]);
    t.same(c, { queries: 1, head_seq: 1 }, 'only the first query was counted and audited');
  });
}
