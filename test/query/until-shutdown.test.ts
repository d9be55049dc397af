/**
 * query/backends.ts `untilShutdown`: a live or relay statement's signal, also aborted by the
 * control plane's shutdown. The shutdown's signal lives as long as the process; what each
 * statement hangs on it must come off when the statement is done (AbortSignal.any, used before,
 * kept one entry per statement on it for good on Node.js 20: 400,000 statements, 400,000 entries).
 */
import { getEventListeners } from 'node:events';
import t from 'tap';
import { untilShutdown } from '../../control-plane/query/backends.js';
import { startServer } from '../helpers/server.js';

t.test('nothing stays on the shutdown signal once statements are done', async (t) => {
  const shutdown = new AbortController();
  for (let i = 0; i < 1000; i++) {
    const own = new AbortController();
    const stop = untilShutdown(own.signal, shutdown.signal);
    if (i % 2 === 0) own.abort(new Error('revoked'));
    stop.release();
    t.equal(getEventListeners(own.signal, 'abort').length, 0);
  }
  t.equal(getEventListeners(shutdown.signal, 'abort').length, 0, 'no listener left on the shutdown signal');
});

t.test('the linked signal aborts with the reason of whichever stops first', async (t) => {
  const shutdown = new AbortController();
  const own = new AbortController();
  const a = untilShutdown(own.signal, shutdown.signal);
  const reason = new Error('shutting down');
  shutdown.abort(reason);
  t.equal(a.signal.aborted, true);
  t.equal(a.signal.reason, reason, "the shutdown's reason (answered 503)");
  a.release();

  const live = new AbortController();
  const own2 = new AbortController();
  const b = untilShutdown(own2.signal, live.signal);
  const revoked = new Error('revoked');
  own2.abort(revoked);
  t.equal(b.signal.reason, revoked, "the statement's own reason");
  t.equal(getEventListeners(live.signal, 'abort').length, 1, 'still on the shutdown until released');
  b.release();
  t.equal(getEventListeners(live.signal, 'abort').length, 0);

  const already = untilShutdown(AbortSignal.abort(revoked), live.signal);
  t.equal(already.signal.reason, revoked, 'a signal aborted already');
  t.equal(untilShutdown(new AbortController().signal, AbortSignal.abort(reason)).signal.reason, reason, 'a shutdown begun already');
  const none = new AbortController().signal;
  t.equal(untilShutdown(none, undefined).signal, none, 'no shutdown signal: the statement\'s own');
});

t.test("the app's shutdown signal takes a listener per running statement without a leak warning", async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  t.teardown(() => void process.off('warning', onWarning));
  // more than 10 statements at once (EventTarget's default limit) printed MaxListenersExceededWarning
  const own = Array.from({ length: 20 }, () => untilShutdown(new AbortController().signal, srv.svc.services.shutdown));
  t.ok(getEventListeners(srv.svc.services.shutdown, 'abort').length >= 20, 'one listener per statement');
  await new Promise((res) => setTimeout(res, 20));
  t.same(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning')), [], 'no leak warning');
  for (const s of own) s.release();
});
