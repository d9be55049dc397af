/**
 * A relay whose tunnel the control plane drains for a newer connection the relay did not make
 * itself (a second svc-relay running with the same configuration) must not reconnect at once
 * every time: two such processes would take the tunnel from each other several times a second,
 * each time a TLS handshake and store writes on the control plane. The reconnect delay keeps
 * growing while takeovers repeat, and the log says what is going on.
 */
import t from 'tap';
import { RelayAgent } from '../../relay-agent/index.js';
import { TunnelDrain } from '../../protocol/relay-contract.js';
import { echo, fakeClock, fakeDialer, srv, until } from './fakes.js';

t.test('a tunnel taken over again and again backs off instead of flapping', async (t) => {
  const clock = fakeClock();
  const d = fakeDialer();
  const lines: string[] = [];
  const agent = new RelayAgent({ dial: d.dial, handler: echo, clock, backoff: { random: () => 0.5 }, session: { pingIntervalMs: 0 }, log: (l) => lines.push(l) });
  const run = agent.run();
  for (let i = 0; i < 5; i++) {
    await until(() => d.servers.length === i + 1 && agent.state === 'connected');
    // what the control plane does when another connection of the same relay becomes current
    void (await srv(d, i)).drain({ timeoutMs: 60_000, message: 'replaced by a newer connection' });
  }
  await until(() => d.servers.length === 6 && agent.state === 'connected');
  t.same(clock.sleeps, [500, 1000, 2000, 4000, 8000], 'each takeover in a row doubles the delay (0.5 × 500 × 2^n)');
  t.match(lines.join('\n'), /another svc-relay/, 'the log names the likely cause');
  // a tunnel lost for any other reason starts the backoff over
  d.servers[5]!.close(1011, 'control plane restarting');
  await until(() => d.servers.length === 7 && agent.state === 'connected');
  t.same(clock.sleeps.slice(5), [250], 'back to the first delay');
  await agent.drain();
  t.equal((await run).reason, 'stopped');
});

t.test('a single takeover after a stable tunnel waits at most the second delay', async (t) => {
  const clock = fakeClock();
  const d = fakeDialer();
  const agent = new RelayAgent({ dial: d.dial, handler: echo, clock, backoff: { random: () => 0.5 }, session: { pingIntervalMs: 0 } });
  const run = agent.run();
  await until(() => agent.state === 'connected');
  void (await srv(d, 0)).drain({ message: 'replaced by a newer connection' });
  await until(() => d.servers.length === 2 && agent.state === 'connected');
  t.same(clock.sleeps, [500]);
  await agent.drain();
  t.equal((await run).reason, 'stopped');
});

t.test('a tunnel drained because its certificate lapsed is not a takeover', async (t) => {
  const clock = fakeClock();
  const d = fakeDialer();
  const lines: string[] = [];
  const agent = new RelayAgent({ dial: d.dial, handler: echo, clock, backoff: { random: () => 0.5 }, session: { pingIntervalMs: 0 }, log: (l) => lines.push(l) });
  const run = agent.run();
  for (let i = 0; i < 3; i++) {
    await until(() => d.servers.length === i + 1 && agent.state === 'connected');
    // what the control plane's lease beat does when the tunnel's certificate expired or passed its overlap window
    void (await srv(d, i)).drain({ timeoutMs: 60_000, code: TunnelDrain.CERTIFICATE_LAPSED, message: 'the certificate this tunnel was opened with expired' });
  }
  await until(() => d.servers.length === 4 && agent.state === 'connected');
  // walk-through: the relay logged "tunnel taken over … is another svc-relay running?" and backed off as for a takeover
  t.notMatch(lines.join('\n'), /taken over|another svc-relay/, 'not reported as a takeover');
  t.match(lines.join('\n'), /drained by the control plane: the certificate this tunnel was opened with expired/, 'the log says why');
  t.same(clock.sleeps, [250, 250, 250], 'the first delay each time, not a growing takeover backoff');
  await agent.drain();
  t.equal((await run).reason, 'stopped');
});
