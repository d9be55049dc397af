/**
 * control-plane/http/in-process.ts: `whenCallerLeaves` (a route's client leaving, by its socket or
 * by the signal an in-process caller registered) and the in-process call tokens.
 */
import Fastify from 'fastify';
import t from 'tap';
import { IN_PROCESS_CALL_HEADER, inProcessCall, inProcessCalls, whenCallerLeaves } from '../../control-plane/http/in-process.js';
import { sendThenLeave } from '../helpers/leave.js';
import { until, type TapTest } from '../helpers/tap.js';

/** An app whose one route waits for `gate` before it watches its client (as the query route awaits auth and its refusal budget first). */
async function app(t: TapTest) {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const seen = { entered: false, closed: false, done: false, left: 0 };
  const f = Fastify();
  f.get('/work', async (req, reply) => {
    seen.entered = true;
    reply.raw.once('close', () => (seen.closed = true));
    await gate;
    const stop = whenCallerLeaves(req, reply, () => seen.left++);
    // the work: over at once (the client is gone, or it answers)
    await new Promise((r) => setImmediate(r));
    stop();
    seen.done = true;
    return { left: seen.left };
  });
  await f.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => f.close());
  const addr = f.server.address();
  const url = typeof addr === 'object' && addr ? `http://127.0.0.1:${addr.port}` : '';
  return { f, url, seen, open };
}

t.test('a client gone before the route starts watching still counts as gone', async (t) => {
  const { url, seen, open } = await app(t);
  const sent = sendThenLeave(url, 'GET', '/work', 'k');
  await until('the route runs', () => seen.entered);
  sent.leave();
  await sent.done;
  await until('the server saw the connection close', () => seen.closed);
  open();
  await until('the route is over', () => seen.done);
  t.equal(seen.left, 1, 'leave was called once: the statement would otherwise run on to its deadline');
});

t.test('an answered request is not taken for a client that left', async (t) => {
  const { f, seen, open } = await app(t);
  open();
  const r = await f.inject({ method: 'GET', url: '/work' });
  t.equal(r.statusCode, 200);
  t.equal(seen.left, 0);
});

t.test('an in-process call follows its registered signal; a token from outside, or released, names nothing', async (t) => {
  const { f, seen, open } = await app(t);
  open();
  const ac = new AbortController();
  ac.abort();
  const call = inProcessCall(ac.signal);
  t.equal(inProcessCalls(), 1);
  const forged = await f.inject({ method: 'GET', url: '/work', headers: { [IN_PROCESS_CALL_HEADER]: 'f'.repeat(32) } });
  t.same(forged.json(), { left: 0 }, 'a made-up token names nothing');
  const real = await f.inject({ method: 'GET', url: '/work', headers: call.headers });
  t.same(real.json(), { left: 1 }, 'the registered signal, aborted already, is the client leaving');
  call.release();
  t.equal(inProcessCalls(), 0, 'released');
  const after = await f.inject({ method: 'GET', url: '/work', headers: call.headers });
  t.same(after.json(), { left: 1 }, 'a released token names nothing (no further leave)');
  t.equal(seen.left, 1);
});
