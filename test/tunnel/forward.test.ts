/**
 * The asking side of a relay forward (tunnel/forward.ts): a replica's first forwards after a
 * start share one certificate (found by review: each concurrent first forward generated its own
 * RSA key on the main thread, about 4 s of blocked event loop for 12 of them, and left the
 * replaced agents' sockets open).
 */
import t from 'tap';
import { createCa } from '../../pki/index.js';
import { RelayForwarder } from '../../control-plane/tunnel/forward.js';
import type { Store } from '../../control-plane/store/index.js';
import { tcpServer } from '../helpers/tcp.js';

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

t.test('a forward stopped before or while it is sent fails alone and never ends the process', async (t) => {
  const ca = createCa({ keyBits: 2048 });
  const store = { kind: 'embedded' } as unknown as Store; // holder() is not called here
  const fwd = new RelayForwarder(store, 'rep_asker', async () => ca);
  t.teardown(() => fwd.close());
  // a holder that accepts connections and never answers
  const { port } = await tcpServer(t);
  const holder = { replicaId: 'rep_holder', address: `127.0.0.1:${port}` };
  const request = { relay_id: 'rly_x', sql: 'SELECT 1', limits: { timeoutMs: 5000, maxRows: 10, maxBytes: 1000 } } as unknown as Parameters<RelayForwarder['run']>[1];
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
