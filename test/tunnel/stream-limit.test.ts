/**
 * A relay takes a bounded number of statements at once on its tunnel (its HELLO's
 * maxConcurrentStreams, 256 by default; a slow database, or a hostile relay that never ends its
 * streams, fills it). A statement past that limit was answered `503 relay_unavailable` "the
 * tunnel is closing; retry shortly", with no Retry-After, while the tunnel was open and serving.
 * It is the relay being busy: `503 service_unavailable`, `details.reason: "relay_busy"`,
 * `Retry-After: 1`, never sent, so never started (not charged), like a relay whose database
 * connections stay busy. Two real protocol sessions over an in-memory transport.
 */
import t from 'tap';
import { memoryTransportPair, Session } from '../../protocol/index.js';
import { RELAY_FEATURES } from '../../protocol/relay-contract.js';
import { runOnRelay } from '../../control-plane/query/relay.js';
import { TunnelRegistry } from '../../control-plane/tunnel/index.js';
import { isApiError } from '../../control-plane/errors.js';

t.test('a statement past the relay\'s concurrent streams is "relay busy", retryable, never started', async (t) => {
  const [serverSide, relaySide] = memoryTransportPair();
  const server = new Session(serverSide, { role: 'server', features: [...RELAY_FEATURES] });
  const relay = new Session(relaySide, { role: 'client', features: [...RELAY_FEATURES], agent: 'svc-relay/test', maxConcurrentStreams: 1 });
  t.teardown(() => {
    relay.close();
    server.close();
  });
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let seen = 0;
  relay.onStream(async (q) => {
    seen++;
    await held;
    await q.sendColumns([{ name: 'one', typeOid: 23 }]);
    await q.sendRows([[1]]);
    await q.end();
  });
  await Promise.all([server.ready, relay.ready]);
  const registry = new TunnelRegistry();
  registry.add({ relayId: 'rly_busy', orgId: 'org_busy', serial: 'ab', session: server, connectedAt: new Date(), version: 'svc-relay/test', terminate: () => relay.close() });

  const limits = { timeoutMs: 30_000, maxRows: 10, maxBytes: 100_000 };
  const first = runOnRelay(registry, 'rly_busy', 'SELECT 1', limits);
  while (seen < 1) await new Promise((r) => setTimeout(r, 5));

  let started = false;
  const err = await runOnRelay(registry, 'rly_busy', 'SELECT 2', limits, { onStart: () => (started = true) }).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(isApiError(err), String(err));
  t.match(err, { status: 503, code: 'service_unavailable', details: { relay_id: 'rly_busy', reason: 'relay_busy' }, message: /already running 1 statement/ });
  t.equal(isApiError(err) ? err.headers?.['Retry-After'] : undefined, '1');
  t.equal(started, false, 'never sent, never started: not charged');

  release();
  t.same((await first).rows, [{ one: 1 }], 'the statement running meanwhile finishes');
  t.same((await runOnRelay(registry, 'rly_busy', 'SELECT 3', limits)).rows, [{ one: 1 }], 'and the next one runs once a stream is free');
});
