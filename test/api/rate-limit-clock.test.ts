/**
 * A replica keeps what the store told it about a bucket for a moment: a key refused (up to a
 * second, until a token could be there) and a refusal budget found open (REFUSALS_OPEN_MS). Those
 * moments are measured on a clock that only moves forward. Review: they were measured on the
 * wall clock, so when it stepped back (a correction, a virtual machine resumed) by an hour, a key
 * refused a moment before was refused for that hour on this replica without asking the store
 * (`Retry-After` near 3600), and a budget found open stayed open as long.
 *
 * The store runs in its own thread here, on its own clock: only this thread's wall clock steps.
 */
import t from 'tap';
import { StoreBuckets } from '../../control-plane/http/rate-limit.js';
import { countingPeeks } from '../helpers/rate-buckets.js';
import { embeddedStore } from '../helpers/server.js';
import type { TapTest } from '../helpers/tap.js';

/** steps this thread's wall clock back an hour until the test ends */
function stepBack(t: TapTest): void {
  const real = Date.now;
  Date.now = () => real() - 3_600_000;
  t.teardown(() => {
    Date.now = real;
  });
}

t.test('a key refused a moment ago is asked about again after its moment, whatever the wall clock did', async (t) => {
  const store = await embeddedStore(t);
  // a token a second, a burst of 1: the second take comes well within the second on a loaded
  // machine (at a token every 50 ms, two store calls 50 ms apart on CI found the token back)
  const b = new StoreBuckets(store, 'stepped', 1, 1);
  t.equal(await b.take('k'), 0);
  t.ok((await b.take('k')) >= 1, 'refused: the burst is spent');
  stepBack(t);
  await new Promise((r) => setTimeout(r, 1200)); // a token is back in the store
  t.equal(await b.wait('k'), 0, 'the refused moment is over: the store says a token is there');
  t.equal(await b.take('k'), 0, 'and it is taken');
});

t.test('a budget found open is asked about again after its moment, whatever the wall clock did', async (t) => {
  const { store, peeks } = countingPeeks(await embeddedStore(t));
  const b = new StoreBuckets(store, 'stepped', 1 / 60, 2, 50); // open for 50 ms
  t.equal(await b.wait('k'), 0);
  t.equal(peeks(), 1);
  stepBack(t);
  await new Promise((r) => setTimeout(r, 200));
  t.equal(await b.wait('k'), 0);
  t.equal(peeks(), 2, 'past its moment, the store is asked again');
});
