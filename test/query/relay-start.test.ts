/**
 * A relay statement counts as started (an agent that leaves is then charged the query price, as
 * one leaving any statement that reached its source: query/engine.ts) only once it was sent to
 * the relay. Read in review: the relay backend marked the start before anything else, so an agent
 * that left while its statement was refused or never sent (no tunnel, an outdated relay, the
 * holder's store lookup, a forward the holder refused) was charged for a statement that never ran.
 *
 * The real relay backend and tunnel registry, with real sessions over an in-memory transport (the
 * relay's side answering as an executor would); forwards are tested in test/tunnel/forward.test.ts.
 */
import t from 'tap';
import { Session, memoryTransportPair } from '../../protocol/index.js';
import { RELAY_FEATURES } from '../../protocol/relay-contract.js';
import { Catalogue, parseScopes } from '../../control-plane/catalogue/index.js';
import { ApiError } from '../../control-plane/errors.js';
import { RelayBackend, type PolicyChecks, type PreparedStatement, type RunContext } from '../../control-plane/query/backends.js';
import { TunnelRegistry } from '../../control-plane/tunnel/index.js';
import { echo } from '../relay-agent/fakes.js';
import type { TapTest } from '../helpers/tap.js';

const target = new Catalogue().target('postgres-relay');
if (!target) throw new Error('no postgres-relay target');
const scopes = parseScopes(target, ['relay:rly_start', 'read:public.orders']);
const statement: PreparedStatement = { sql: 'SELECT id FROM public.orders', tables: ['public.orders'], rowFilters: { 'public.orders': null }, tablesAllowed: ['public.orders'], plan: undefined };

/** a tunnel of relay rly_start in `registry`, the relay offering `features` and answering each statement with its text */
async function tunnel(t: TapTest, registry: TunnelRegistry, features: string[]): Promise<{ readonly streams: () => number }> {
  const [a, b] = memoryTransportPair();
  const server = new Session(a, { role: 'server', pingIntervalMs: 0, features: [...RELAY_FEATURES] });
  const relay = new Session(b, { role: 'client', pingIntervalMs: 0, features });
  let streams = 0;
  relay.onStream((q) => (streams++, echo(q)));
  await Promise.all([server.ready, relay.ready]);
  registry.add({ relayId: 'rly_start', orgId: 'org_x', serial: 's', session: server, connectedAt: new Date(), version: 'svc-relay/test', terminate: () => server.close() });
  t.teardown(() => {
    server.close();
    relay.close();
  });
  return { streams: () => streams };
}

/** runs the statement on `registry`'s tunnels; how many times it was said to start, and when */
async function run(registry: TunnelRegistry, signal = new AbortController().signal): Promise<{ starts: number; startedBeforeAnswer: boolean; outcome: unknown }> {
  const backend = new RelayBackend(registry, {} as PolicyChecks); // prepare is not called: the statement is already checked
  let starts = 0;
  let answered = false;
  let startedBeforeAnswer = false;
  const ctx: RunContext = {
    orgId: 'org_x',
    connectionId: 'conn_x',
    scopes,
    limits: { timeoutMs: 10_000, maxRows: 10, maxBytes: 10_000 },
    signal,
    trial: false,
    onStart: () => {
      starts++;
      startedBeforeAnswer = !answered;
    },
  };
  const outcome = await backend.run(statement, ctx).then(
    (r) => ((answered = true), r),
    (e: unknown) => e,
  );
  return { starts, startedBeforeAnswer, outcome };
}

t.test('no live tunnel: refused, never started', async (t) => {
  const r = await run(new TunnelRegistry());
  t.ok(r.outcome instanceof ApiError && r.outcome.code === 'relay_unavailable', String(r.outcome));
  t.equal(r.starts, 0);
});

t.test('an outdated relay (its HELLO lacks catalog-search-path): refused, never started', async (t) => {
  const registry = new TunnelRegistry();
  await tunnel(t, registry, []);
  const r = await run(registry);
  t.ok(r.outcome instanceof ApiError && r.outcome.details?.['reason'] === 'relay_outdated', String(r.outcome));
  t.equal(r.starts, 0, 'not started: the agent leaving meanwhile would be charged for nothing');
});

t.test('stopped before it was sent (the agent or the asking replica gone): not sent, never started', async (t) => {
  // review: the stream was opened and cancelled at once, and the statement counted as started
  const registry = new TunnelRegistry();
  const relay = await tunnel(t, registry, [...RELAY_FEATURES]);
  const gone = new ApiError('service_unavailable', 'stopped');
  const r = await run(registry, AbortSignal.abort(gone));
  t.equal(r.outcome, gone, 'answered with what stopped it');
  t.equal(r.starts, 0);
  await run(registry); // a statement after it reaches the relay: the count below is not vacuous
  t.equal(relay.streams(), 1, 'the stopped one never reached the relay');
});

t.test('a current relay: started once, when sent, before its answer', async (t) => {
  const registry = new TunnelRegistry();
  await tunnel(t, registry, [...RELAY_FEATURES]);
  const r = await run(registry);
  t.notOk(r.outcome instanceof Error, String(r.outcome));
  t.same((r.outcome as { rows: unknown[] }).rows, [{ statement: statement.sql }], 'the relay ran it');
  t.equal(r.starts, 1);
  t.ok(r.startedBeforeAnswer);
});
