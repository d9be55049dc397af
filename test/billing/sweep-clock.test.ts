/**
 * A hold's age is measured on the store's clock, whichever replica made it and whichever sweeps:
 * holds were stamped with the reserving replica's clock and swept by the sweeping replica's, so a
 * replica whose clock ran a few minutes ahead gave back the holds of queries still running on
 * the others, which were then answered free (found by an outside review of several replicas).
 * Here the replica's clock (this thread's Date; the embedded store keeps the real one in its
 * thread) is set ahead, or behind, for the reserve or the sweep.
 */
import t from 'tap';
import { reserve, sweepReservations } from '../../control-plane/billing/index.js';
import { signupAgent, startServer } from '../helpers/server.js';

const RealDate = Date;

/** runs `fn` with this thread's clock `skewMs` off */
async function withClockOff<T>(skewMs: number, fn: () => Promise<T>): Promise<T> {
  class Skewed extends RealDate {
    constructor(...args: [] | [string | number | Date]) {
      if (args.length === 0) super(RealDate.now() + skewMs);
      else super(args[0]);
    }
    static override now(): number {
      return RealDate.now() + skewMs;
    }
  }
  globalThis.Date = Skewed as DateConstructor;
  try {
    return await fn();
  } finally {
    globalThis.Date = RealDate;
  }
}

t.test("a sweep on a replica whose clock is ahead leaves running queries' holds", async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url, 'Clock Org');
  const held = await reserve(srv.svc.store, a.orgId, 1024);
  t.equal(held.payer, 'trial');
  const swept = await withClockOff(10 * 60_000, () => sweepReservations(srv.svc.store, 80_000));
  t.equal(swept, 0, 'a hold taken a moment ago is not stale, whatever this replica’s clock says');
  t.equal((await srv.svc.store.query('SELECT id FROM reservations WHERE org_id = $1', [a.orgId])).length, 1);
});

t.test('a hold taken on a replica whose clock is behind is not stale to a sweep on the others', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url, 'Late Clock Org');
  await withClockOff(-10 * 60_000, () => reserve(srv.svc.store, a.orgId, 1024));
  t.equal(await sweepReservations(srv.svc.store, 80_000), 0);
  t.equal((await srv.svc.store.query('SELECT id FROM reservations WHERE org_id = $1', [a.orgId])).length, 1);
  // and one that is stale by the store's clock is still swept
  await srv.svc.store.query("UPDATE reservations SET created_at = now() - interval '10 minutes' WHERE org_id = $1", [a.orgId]);
  t.equal(await sweepReservations(srv.svc.store, 80_000), 1);
});
