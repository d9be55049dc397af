/** control-plane/time.ts `pause`: the abortable timer the webhook worker and the external demo engine wait on. */
import { getEventListeners } from 'node:events';
import t from 'tap';
import { pause } from '../../control-plane/time.js';

t.test('resolves after its time, leaving no listener on the signal', async (t) => {
  const ac = new AbortController();
  const started = performance.now();
  await pause(30, ac.signal);
  t.ok(performance.now() - started >= 25, 'it waited');
  t.equal(getEventListeners(ac.signal, 'abort').length, 0, 'its abort listener is gone');
});

t.test('resolves at once when the signal aborts, its timer cleared', async (t) => {
  const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const ac = new AbortController();
  const before = timers();
  const waiting = pause(60_000, ac.signal);
  t.equal(timers(), before + 1, 'its timer runs');
  ac.abort();
  await waiting;
  t.equal(getEventListeners(ac.signal, 'abort').length, 0, 'no listener left');
  // a 60 s timer left behind would keep this process alive for a minute after the test ends
  t.equal(timers(), before, 'its timer is gone');
});

t.test('a signal aborted already: resolves without waiting', async (t) => {
  const ac = new AbortController();
  ac.abort();
  const started = performance.now();
  await pause(60_000, ac.signal);
  t.ok(performance.now() - started < 30_000, 'it did not wait its time');
});

t.test('many waits on one long-lived signal leave no listener each', async (t) => {
  const ac = new AbortController();
  for (let i = 0; i < 50; i++) await pause(0, ac.signal);
  t.equal(getEventListeners(ac.signal, 'abort').length, 0);
});
