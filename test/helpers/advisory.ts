/**
 * Places held as advisory locks (the demo engines' shares: control-plane/demo/external.ts on a
 * shared demo database, control-plane/demo/shares.ts on the store), read from pg_locks: one
 * consistent snapshot (pg_stat_activity is read backend by backend, so a place passed from one
 * statement to the next during the read could be counted twice). pg_locks lists the locks of every
 * database of the server: these read only the client's own database (test files running at the
 * same time take places in theirs).
 */
import type pg from 'pg';
import { PLACE_SPACE_SIZE } from '../../control-plane/demo/query.js';

/**
 * first keys of the store's other two-int4 advisory locks (webhooks/claims.ts: a claim and a mock
 * event count per organization, whose second key, a hash of the organization, can fall in a
 * place space)
 */
const OTHER_LOCKS = [7361002, 7361003];

/** advisory locks of this database in the two-int4 form whose second key is in [space, space + PLACE_SPACE_SIZE), but the store's other ones */
const PLACES = `FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND objsubid = 2 AND objid::bigint >= $1 AND objid::bigint < $1 + ${PLACE_SPACE_SIZE} AND classid::bigint NOT IN (${OTHER_LOCKS.join(', ')})`;

/** places held now */
export async function placesHeld(client: pg.Client, space: number): Promise<number> {
  return (await client.query<{ n: number }>(`SELECT count(*)::int AS n ${PLACES} AND granted`, [space])).rows[0]?.n ?? 0;
}

/** statements waiting in a lock's queue for a place */
export async function placesAwaited(client: pg.Client, space: number): Promise<number> {
  return (await client.query<{ n: number }>(`SELECT count(*)::int AS n ${PLACES} AND NOT granted`, [space])).rows[0]?.n ?? 0;
}

/** Ends the sessions holding places (as when their replica dies: the store ends its connections). */
export async function endPlaceHolders(client: pg.Client, space: number): Promise<void> {
  await client.query(`SELECT pg_terminate_backend(pid) ${PLACES} AND granted`, [space]);
}

/** Reads placesHeld every few ms until stopped; `stop` resolves with the most seen at once. */
export function watchPlaces(client: pg.Client, space: number): { stop: () => Promise<number> } {
  let most = 0;
  let watching = true;
  const watch = (async () => {
    while (watching) {
      most = Math.max(most, await placesHeld(client, space));
      await new Promise((res) => setTimeout(res, 10));
    }
  })();
  return {
    stop: async () => {
      watching = false;
      await watch;
      return most;
    },
  };
}
