/**
 * The asking side of a relay forward (tunnel/forward.ts): a replica's first forwards after a
 * start share one certificate (found by review: each concurrent first forward generated its own
 * RSA key on the main thread, about 4 s of blocked event loop for 12 of them, and left the
 * replaced agents' sockets open).
 */
import t from 'tap';
import { createCa } from '../../pki/index.js';
import { FORWARD_CONNECT_MS, RelayForwarder } from '../../control-plane/tunnel/forward.js';
import { ApiError } from '../../control-plane/errors.js';
import type { Store } from '../../control-plane/store/index.js';
import { tcpServer } from '../helpers/tcp.js';
import type { TapTest } from '../helpers/tap.js';

t.test('concurrent first forwards share one replica certificate', async (t) => {
  const ca = createCa({ keyBits: 2048 });
  let asked = 0;
  const store = { kind: 'embedded' } as unknown as Store; // holder() is not called here
  const fwd = new RelayForwarder(store, 'rep_single', async () => {
    asked++;
    return ca;
  });
  t.teardown(() => fwd.close());
  const agent = (fwd as unknown as { agent(): Promise<{ agent: object }> }).agent.bind(fwd);
  const got = await Promise.all(Array.from({ length: 12 }, () => agent()));
  t.equal(asked, 1, 'the CA was asked once');
  t.equal(new Set(got.map((g) => g.agent)).size, 1, 'one agent, one certificate, for all twelve');
  t.equal((await agent()).agent, got[0]?.agent, 'and kept for later forwards');
});

/** a forwarder, and a holder that accepts connections and never answers (a replica frozen, or cut off) */
async function silentHolder(t: TapTest, timeoutMs: number) {
  const ca = createCa({ keyBits: 2048 });
  const store = { kind: 'embedded' } as unknown as Store; // holder() is not called here
  const fwd = new RelayForwarder(store, 'rep_asker', async () => ca);
  t.teardown(() => fwd.close());
  const { port } = await tcpServer(t);
  const holder = { replicaId: 'rep_holder', address: `127.0.0.1:${port}` };
  const request = { relay_id: 'rly_x', sql: 'SELECT 1', limits: { timeoutMs, maxRows: 10, maxBytes: 1000 } } as unknown as Parameters<RelayForwarder['run']>[1];
  return { fwd, holder, request };
}

t.test('a forward stopped before or while it is sent fails alone and never ends the process', async (t) => {
  const { fwd, holder, request } = await silentHolder(t, 5000);
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown): void => void uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  t.teardown(() => process.off('uncaughtException', onUncaught));
  // already stopped when asked
  await t.rejects(fwd.run(holder, request, AbortSignal.abort()), /aborted/);
  // stopped while the request is on its way
  const c = new AbortController();
  const running = fwd.run(holder, request, c.signal);
  setImmediate(() => c.abort());
  await t.rejects(running, /aborted/);
  await new Promise((r) => setTimeout(r, 200)); // a late 'error' from the destroyed request would surface here
  t.same(uncaught, [], 'no unhandled error');
});

t.test('a holder that accepts the connection and never completes it is not waited for until the deadline', async (t) => {
  // review: a frozen holder (its kernel still accepts) held every forward to it until the statement's deadline plus 5 s
  const { fwd, holder, request } = await silentHolder(t, 600_000);
  const err = (await fwd.run(holder, request).then(() => undefined, (e: unknown) => e)) as ApiError | undefined;
  t.ok(err instanceof ApiError, String(err));
  t.equal(err?.code, 'relay_unavailable', 'a retryable 503');
  t.match(err?.message, new RegExp(`did not complete the connection within ${FORWARD_CONNECT_MS / 1000} s`), 'answered after the connection bound, not the 10-minute deadline');
  t.equal(err?.headers?.['Retry-After'], '1');
});
