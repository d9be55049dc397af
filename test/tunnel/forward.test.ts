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
