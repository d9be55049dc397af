/**
 * The agent's renewal schedule and tunnel switch over in-memory tunnels: renewAt is half the
 * lifetime counted from when the certificate was obtained (the CA back-dates notBefore), plus
 * jitter; a relay offline at renewAt renews once connected; a failed renewal is retried; after a
 * renewal the agent dials a second tunnel and follows it, and the first one's drain is not a
 * lost tunnel.
 */
import t from 'tap';
import { RelayAgent, realAgentClock, renderMetrics, type CertificateValidity } from '../../relay-agent/index.js';
import { echo, fakeDialer, srv, until } from './fakes.js';

const cert = (obtainedMsAgo: number, lifeMs: number, serial = 'aa'): CertificateValidity => {
  const now = Date.now();
  return { serial, notBefore: new Date(now - obtainedMsAgo - 300_000), notAfter: new Date(now - obtainedMsAgo + lifeMs), obtainedAt: new Date(now - obtainedMsAgo) };
};

t.test('renewAt: half the lifetime from when it was obtained, plus at most the jitter', async (t) => {
  const c = cert(0, 40_000);
  const noJitter = new RelayAgent({ dial: fakeDialer().dial, handler: echo, renewal: { certificate: c, renew: async () => c, jitter: 0 } });
  t.equal(noJitter.renewAt(), c.obtainedAt.getTime() + 20_000, 'not counted from the back-dated notBefore');
  const jittered = new RelayAgent({ dial: fakeDialer().dial, handler: echo, backoff: { random: () => 0.5 }, renewal: { certificate: c, renew: async () => c, fraction: 0.6, jitter: 0.1 } });
  t.equal(jittered.renewAt(), c.obtainedAt.getTime() + 24_000 + 2_000);
  t.throws(() => new RelayAgent({ dial: fakeDialer().dial, handler: echo, renewal: { certificate: c, renew: async () => c, fraction: 1 } }), /fraction/);
  t.throws(() => new RelayAgent({ dial: fakeDialer().dial, handler: echo, renewal: { certificate: c, renew: async () => c, fraction: 0.9, jitter: 0.2 } }), /jitter/);
  await t.rejects(new RelayAgent({ dial: fakeDialer().dial, handler: echo }).renewNow(), /no renewal configured/);
});

t.test('offline at renewAt: renews once connected, retries a failure, switches tunnels without losing the session', async (t) => {
  // due already; the first two dials fail, the first renewal attempt fails
  const d = fakeDialer((n) => (n < 2 ? new Error('ECONNREFUSED') : 'ok'));
  const calls: string[] = [];
  let attempt = 0;
  const logs: string[] = [];
  const agent = new RelayAgent({
    dial: d.dial,
    handler: echo,
    clock: realAgentClock,
    backoff: { baseDelayMs: 5 },
    session: { pingIntervalMs: 0 },
    log: (l) => logs.push(l),
    renewal: {
      certificate: cert(30_000, 40_000), // due 10 s ago, expires in 10 s
      retry: { baseDelayMs: 5, maxDelayMs: 10 },
      renew: async () => {
        calls.push(agent.state);
        if (attempt++ === 0) throw new Error('control plane busy');
        return cert(0, 3_600_000, 'bb');
      },
    },
  });
  const run = agent.run();
  await until(() => agent.renewals === 1, 5000);
  t.same(calls, ['connected', 'connected'], 'renewal waited for the tunnel, then was retried after a failure');
  t.ok(logs.some((l) => /certificate renewal failed \(attempt 1\): control plane busy; retrying/.test(l)));
  t.equal(agent.certificate?.serial, 'bb');
  t.ok((agent.renewAt() as number) > Date.now() + 1_000_000, 'the next renewal is scheduled from the new certificate');
  // the switch dialed a second tunnel; the control plane drains the first
  await until(() => d.servers.length === 2, 2000);
  const second = await srv(d, 1);
  await until(() => logs.some((l) => /switched to the tunnel/.test(l)), 2000);
  await d.servers[0]!.drain({ message: 'replaced by a newer connection' });
  await new Promise((r) => setTimeout(r, 20));
  t.equal(agent.state, 'connected', 'the drained tunnel is not a lost one');
  t.equal(agent.reconnects, 2, 'only the two failed dials counted as reconnects');
  const r = await second.openStream({ statement: 'via the new tunnel' }).collect();
  t.same(r.rows, [['via the new tunnel']]);
  t.match(renderMetrics(agent), /svc_relay_certificate_renewals_total 1\n/);
  // losing the new tunnel is a lost tunnel again
  second.close(1011, 'gone');
  await until(() => d.servers.length === 3 && agent.state === 'connected', 2000);
  t.ok(logs.some((l) => /tunnel lost/.test(l)));
  await agent.drain();
  t.equal((await run).reason, 'stopped');
});
