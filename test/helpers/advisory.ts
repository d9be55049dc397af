/**
 * Places held as advisory locks (the demo engines' shares: control-plane/demo/external.ts on a
 * shared demo database, control-plane/demo/shares.ts on the store), read from pg_locks: one
 * consistent snapshot (pg_stat_activity is read backend by backend, so a place passed from one
 * statement to the next during the read could be counted twice).
 */
import type pg from 'pg';

/** granted advisory locks in the two-int4 form whose second key is in [space, space + 64) */
export async function placesHeld(client: pg.Client, space: number): Promise<number> {
  const r = await client.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND objid::bigint >= $1 AND objid::bigint < $1 + 64",
    [space],
  );
  return r.rows[0]?.n ?? 0;
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
