/**
 * The live-connection pool on its own (live/pool.ts), with stand-in connections: a key that
 * changes because the host resolved to another address is not a retired credential (a host with
 * several addresses alternates keys, and its statements must keep running), while a key retired by
 * forget() (the credential replaced or deleted) is refused, to waiters too.
 */
import t from 'tap';
import { ApiError } from '../../control-plane/errors.js';
import { LiveConnections, type PoolDriver } from '../../control-plane/live/pool.js';
import { shutdownStop } from '../../control-plane/query/errors.js';

interface Conn {
  readonly id: number;
  ended: boolean;
}

function pool(max = 1): { conns: LiveConnections<Conn>; opened: Conn[] } {
  const opened: Conn[] = [];
  const driver: PoolDriver<Conn> = { kind: 'postgres', end: (c) => void (c.ended = true), watch: () => undefined };
  return { conns: new LiveConnections(driver, max, 60_000), opened };
}

t.test('keys alternating between addresses keep working; a forgotten credential does not', async (t) => {
  const { conns, opened } = pool();
  t.teardown(() => conns.close());
  const open = async (): Promise<Conn> => {
    const c = { id: opened.length, ended: false };
    opened.push(c);
    return c;
  };
  const soon = () => Date.now() + 1000;
  for (const key of ['v1@10.0.0.1', 'v1@10.0.0.2', 'v1@10.0.0.1', 'v1@10.0.0.2']) {
    const c = await conns.acquire('org', key, open, soon());
    t.ok(c, `a connection under ${key}`);
    conns.release('org', key, c, true);
  }
  t.equal(opened.filter((c) => !c.ended).length, 1, 'the pools of the other address were ended, not kept');

  // the credential replaced: its key is retired, for waiters too
  const held = await conns.acquire('org', 'v1@10.0.0.2', open, soon());
  const waiting = conns.acquire('org', 'v1@10.0.0.2', open, soon()).then(
    () => 'got one',
    (err: { details?: { reason?: string } }) => err.details?.reason ?? 'error',
  );
  conns.forget('org');
  t.equal(await waiting, 'credential_changed', 'a waiter of the replaced credential gets 503 credential_changed');
  const late = await conns.acquire('org', 'v1@10.0.0.2', open, soon()).then(
    () => 'got one',
    (err: { details?: { reason?: string } }) => err.details?.reason ?? 'error',
  );
  t.equal(late, 'credential_changed', 'and so does a late statement holding the old version');
  conns.release('org', 'v1@10.0.0.2', held, true);
  t.ok(held.ended, 'the connection in use when the credential changed is ended when given back');
  const fresh = await conns.acquire('org', 'v2@10.0.0.2', open, soon());
  t.notOk(fresh.ended, 'the new version opens normally');
});

t.test('a waiter stops at once when its statement is revoked', async (t) => {
  const { conns } = pool();
  t.teardown(() => conns.close());
  const open = async (): Promise<Conn> => ({ id: 0, ended: false });
  const held = await conns.acquire('org', 'k', open, Date.now() + 5000);
  const ac = new AbortController();
  const waiting = conns.acquire('org', 'k', open, Date.now() + 5000, ac.signal);
  const started = Date.now();
  ac.abort(new ApiError('connection_revoked', 'revoked'));
  await t.rejects(waiting, { code: 'connection_revoked', message: 'revoked' }, "the signal's reason");
  t.ok(Date.now() - started < 1000, 'not at the deadline');
  conns.release('org', 'k', held, true);
});

t.test('a statement revoked while its connection opens runs nothing; the connection is kept for the next', async (t) => {
  const { conns, opened } = pool();
  t.teardown(() => conns.close());
  const ac = new AbortController();
  const open = async (): Promise<Conn> => {
    const c = { id: opened.length, ended: false };
    opened.push(c);
    ac.abort(new ApiError('connection_revoked', 'revoked while opening'));
    return c;
  };
  await t.rejects(conns.acquire('org', 'k', open, Date.now() + 5000, ac.signal), { code: 'connection_revoked', message: 'revoked while opening' });
  const next = await conns.acquire('org', 'k', async () => Promise.reject(new Error('should reuse')), Date.now() + 5000);
  t.equal(next, opened[0], 'the next statement reuses the connection opened for it');
  t.notOk(next.ended);
  conns.release('org', 'k', next, true);
});

t.test("a statement stopped by the shutdown while it waits gets the shutdown's 503; a bare abort is 503 too, never a DOMException", async (t) => {
  const { conns } = pool();
  t.teardown(() => conns.close());
  const open = async (): Promise<Conn> => ({ id: 0, ended: false });
  const held = await conns.acquire('org', 'k', open, Date.now() + 5000);

  const shutdown = new AbortController();
  const waiting = conns.acquire('org', 'k', open, Date.now() + 5000, shutdown.signal);
  shutdown.abort(shutdownStop());
  const err = await waiting.then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof ApiError, 'an ApiError, which the query path answers as it is');
  t.match(err, { code: 'service_unavailable', status: 503, headers: { 'Retry-After': '1' } }, "the shutdown's answer");
  t.equal(err, shutdown.signal.reason, 'the very reason of the abort');
  await t.rejects(conns.acquire('org', 'k', open, Date.now() + 5000, shutdown.signal), { code: 'service_unavailable', status: 503 }, 'and so is a statement that asks after the abort');

  const bare = new AbortController();
  const stopped = conns.acquire('org', 'k', open, Date.now() + 5000, bare.signal);
  bare.abort();
  const e2 = await stopped.then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(e2 instanceof ApiError, `a bare abort (its reason a DOMException) is answered as an ApiError, not a 500: ${String(e2)}`);
  t.match(e2, { code: 'service_unavailable', status: 503, details: { connector_kind: 'postgres' } });
  conns.release('org', 'k', held, true);
});
