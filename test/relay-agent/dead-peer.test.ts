/**
 * A control plane that stops answering without closing the tunnel (a replica frozen, or cut off by
 * the network: its kernel keeps the connection) is given up by the relay within 10 to 15 s of
 * silence, and the relay dials again (through the balancer, another replica). Found in review:
 * with the protocol's default ping (15 s, two misses) the relay stayed on a frozen replica for
 * 30 to 45 s, offline everywhere once the replica's lease lapsed.
 */
import t from 'tap';
import { ManualClock } from '../../protocol/clock.js';
import { RelayAgent, RELAY_PING_INTERVAL_MS } from '../../relay-agent/agent.js';
import { echo, fakeClock, fakeDialer, until } from './fakes.js';

t.test('a control plane that goes silent is given up within 15 s and dialled again', async (t) => {
  const clock = new ManualClock();
  const d = fakeDialer();
  const agent = new RelayAgent({ dial: d.dial, handler: echo, clock: fakeClock(), backoff: { random: () => 0.5 }, session: { clock } });
  const run = agent.run();
  await until(() => d.servers.length === 1 && agent.state === 'connected');
  // the control plane's end stops sending anything (its pongs included); the connection stays open
  const end = d.ends[0]!;
  end.send = () => undefined;
  clock.advance(15_000);
  await until(() => d.dials === 2 && agent.state === 'connected');
  t.pass(`the silent tunnel was given up within 15 s (pings every ${RELAY_PING_INTERVAL_MS} ms, two misses) and the relay dialled again`);
  await agent.drain();
  t.equal((await run).reason, 'stopped');
});
