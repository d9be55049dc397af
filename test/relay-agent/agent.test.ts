import t from 'tap';
import { DialError, RelayAgent, backoffDelay, canTransition, renderMetrics, startHealthServer, type AgentClock, type TunnelState } from '../../relay-agent/index.js';
import { TUNNEL_CLOSES } from '../../protocol/relay-contract.js';
import { echo, fakeClock, fakeDialer, srv, until } from './fakes.js';

t.test('transitions are checked', async (t) => {
  t.ok(canTransition('connecting', 'connected'));
  t.ok(canTransition('connected', 'connecting'));
  t.ok(canTransition('connected', 'draining'));
  t.ok(canTransition('draining', 'closed'));
  t.ok(canTransition('connecting', 'closed'));
  t.notOk(canTransition('closed', 'connecting'));
  t.notOk(canTransition('draining', 'connected'));
  t.notOk(canTransition('connecting', 'draining'));
});

t.test('full-jitter backoff', async (t) => {
  t.equal(backoffDelay(0, { random: () => 0 }), 0);
  t.equal(backoffDelay(0, { random: () => 0.5 }), 250);
  t.equal(backoffDelay(3, { random: () => 0.5 }), 2000);
  t.equal(backoffDelay(30, { random: () => 0.5 }), 30_000, 'capped at maxDelay');
  t.equal(backoffDelay(2, { random: () => 0.5, baseDelayMs: 100, maxDelayMs: 300 }), 150);
  for (let i = 0; i < 50; i++) {
    const d = backoffDelay(4);
    t.ok(d >= 0 && d < 8000);
  }
});

t.test('connects, answers streams, reconnects with backoff after a lost tunnel', async (t) => {
  const clock = fakeClock();
  const d = fakeDialer((n) => (n === 1 || n === 2 ? new Error('ECONNREFUSED') : 'ok'));
  const states: TunnelState[] = [];
  const agent = new RelayAgent({ dial: d.dial, handler: echo, clock, backoff: { random: () => 0.5 }, session: { pingIntervalMs: 0 } });
  agent.onState((s) => states.push(s));
  t.equal(agent.state, 'connecting');
  const run = agent.run();
  await until(() => agent.state === 'connected');
  const s0 = await srv(d, 0);
  const r = await s0.openStream({ statement: 'hello' }).collect();
  t.same(r.rows, [['hello']]);
  // the tunnel drops: two failed dials, then back
  s0.close(1011, 'control plane restarting');
  await until(() => d.servers.length === 2 && agent.state === 'connected');
  t.same(clock.sleeps, [250, 500, 1000], 'delays grow: 0.5 × 500 × 2^attempt');
  t.equal(agent.reconnects, 3);
  const r2 = await (await srv(d, 1)).openStream({ statement: 'again' }).collect();
  t.same(r2.rows, [['again']]);
  // once connected the attempt counter resets
  d.servers[1]!.close(1011, 'x');
  await until(() => d.servers.length === 3 && agent.state === 'connected');
  t.same(clock.sleeps, [250, 500, 1000, 250]);
  const exit = await agent.drain();
  t.equal(exit.reason, 'stopped');
  t.equal(agent.state, 'closed');
  t.same(await run, exit);
  t.same(states, ['connected', 'connecting', 'connected', 'connecting', 'connected', 'draining', 'closed']);
});

t.test('permanent refusals stop the loop', async (t) => {
  t.test('HTTP 401/403 on the upgrade', async (t) => {
    const d = fakeDialer(() => new DialError('tunnel upgrade refused with HTTP 403: relay_revoked', { status: 403, permanent: true }));
    const agent = new RelayAgent({ dial: d.dial, handler: echo, clock: fakeClock() });
    const exit = await agent.run();
    t.equal(exit.reason, 'permanent');
    t.match(exit.message, /HTTP 403/);
    t.equal(d.dials, 1);
    t.equal(agent.state, 'closed');
  });
  // exactly the closes the control plane sends as permanent (protocol/relay-contract.ts)
  for (const { code, reason } of [TUNNEL_CLOSES.relayRevoked, TUNNEL_CLOSES.certificateRevoked]) {
    t.test(`close ${code} ${reason}`, async (t) => {
      const clock = fakeClock();
      const d = fakeDialer();
      const agent = new RelayAgent({ dial: d.dial, handler: echo, clock });
      const run = agent.run();
      await until(() => agent.state === 'connected');
      d.ends[0]!.close(code, reason);
      const exit = await run;
      t.equal(exit.reason, 'permanent');
      t.match(exit.message, /re-enroll/);
      t.equal(d.dials, 1, 'no reconnect');
      t.same(clock.sleeps, []);
      t.equal(agent.state, 'closed');
    });
  }
  t.test('an expired certificate is not even dialed', async (t) => {
    const clock = fakeClock();
    const d = fakeDialer();
    const agent = new RelayAgent({ dial: d.dial, handler: echo, clock, certificateNotAfter: new Date(clock.t - 1000) });
    const exit = await agent.run();
    t.equal(exit.reason, 'permanent');
    t.match(exit.message, /expired.*re-enroll/);
    t.equal(d.dials, 0);
  });
  t.test('a transient close keeps reconnecting', async (t) => {
    const clock = fakeClock();
    const d = fakeDialer();
    const agent = new RelayAgent({ dial: d.dial, handler: echo, clock, backoff: { random: () => 0 } });
    const run = agent.run();
    await until(() => agent.state === 'connected');
    d.ends[0]!.close(1006, '');
    await until(() => d.dials === 2 && agent.state === 'connected');
    await agent.drain();
    t.equal((await run).reason, 'stopped');
  });
  // closes the control plane never sends as permanent (the relay once stopped on these)
  for (const [code, reason] of [
    [4403, 'relay_revoked'],
    [1008, 'relay_deleted'],
    [4401, 'whatever'],
    [TUNNEL_CLOSES.shuttingDown.code, TUNNEL_CLOSES.shuttingDown.reason],
  ] as const) {
    t.test(`close ${code} ${reason} is transient: reconnects`, async (t) => {
      const clock = fakeClock();
      const d = fakeDialer();
      const agent = new RelayAgent({ dial: d.dial, handler: echo, clock, backoff: { random: () => 0 } });
      const run = agent.run();
      await until(() => agent.state === 'connected');
      d.ends[0]!.close(code, reason);
      await until(() => d.dials === 2 && agent.state === 'connected');
      t.same(clock.sleeps, [0], 'one backoff, then reconnected');
      await agent.drain();
      t.equal((await run).reason, 'stopped');
    });
  }
});

t.test('SIGTERM-style drain: GOAWAY, running queries finish, then closed', async (t) => {
  const d = fakeDialer();
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const agent = new RelayAgent({
    dial: d.dial,
    clock: fakeClock(),
    handler: async (q) => {
      await q.sendColumns([{ name: 'x' }]);
      await gate;
      await q.sendRows([[1]]);
      await q.end();
    },
  });
  const run = agent.run();
  await until(() => agent.state === 'connected');
  const s = await srv(d, 0);
  let goaway = false;
  s.onGoaway(() => (goaway = true));
  const p = s.openStream({ statement: 'slow' }).collect();
  await until(() => agent.inflight === 1);
  const drained = agent.drain();
  await until(() => goaway);
  t.equal(agent.state, 'draining');
  t.equal(agent.inflight, 1);
  release();
  const r = await p;
  t.same(r.rows, [[1]], 'the running query finished');
  t.equal((await drained).reason, 'stopped');
  t.equal(agent.state, 'closed');
  await run;
  t.equal(d.dials, 1, 'no reconnect after a drain');
});

t.test('drain while connecting stops the loop', async (t) => {
  const d = fakeDialer(() => new Error('down'));
  const clock: AgentClock = { now: () => Date.now(), sleep: (ms, signal) => new Promise((r) => { const tm = setTimeout(r, ms); signal.addEventListener('abort', () => { clearTimeout(tm); r(); }); }) };
  const agent = new RelayAgent({ dial: d.dial, handler: echo, clock, backoff: { random: () => 0.999, baseDelayMs: 60_000 } });
  const run = agent.run();
  await until(() => d.dials === 1);
  const exit = await agent.drain();
  t.equal(exit.reason, 'stopped');
  t.equal(agent.state, 'closed');
  await run;
});

t.test('/healthz and /metrics', async (t) => {
  const clock = fakeClock();
  const d = fakeDialer((n) => (n === 0 ? new Error('first fails') : 'ok'));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const agent = new RelayAgent({
    dial: d.dial,
    clock,
    certificateNotAfter: new Date(clock.t + 3600_000),
    backoff: { random: () => 0 },
    handler: async (q) => {
      await gate;
      await echo(q);
    },
  });
  const h = await startHealthServer(agent, 0);
  t.teardown(() => h.close());
  const base = `http://127.0.0.1:${h.port}`;
  let res = await fetch(`${base}/healthz`);
  t.equal(res.status, 503, 'not ready before the tunnel is up');
  await res.text();
  const run = agent.run();
  await until(() => agent.state === 'connected');
  res = await fetch(`${base}/healthz`);
  t.equal(res.status, 200);
  t.same(await res.json(), { status: 'ok', state: 'connected' });
  const p = (await srv(d, 0)).openStream({ statement: 'm' }).collect();
  await until(() => agent.inflight === 1);
  res = await fetch(`${base}/metrics`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /text\/plain/);
  const text = await res.text();
  t.match(text, /^svc_relay_tunnel_state\{state="connected"\} 1$/m);
  t.match(text, /^svc_relay_tunnel_state\{state="connecting"\} 0$/m);
  t.match(text, /^svc_relay_reconnects_total 1$/m);
  t.match(text, /^svc_relay_inflight_streams 1$/m);
  t.match(text, /^# TYPE svc_relay_reconnects_total counter$/m);
  const exp = /^svc_relay_certificate_expiry_seconds (\d+)$/m.exec(text);
  t.ok(exp && Math.abs(Number(exp[1]) - 3600) <= 1, 'expiry seconds');
  release();
  await p;
  t.match(renderMetrics(agent), /svc_relay_inflight_streams 0/);
  t.equal((await fetch(`${base}/nope`)).status, 404);
  await agent.drain();
  await run;
  res = await fetch(`${base}/healthz`);
  t.equal(res.status, 503, 'not ready once closed');
  t.same(await res.json(), { status: 'unavailable', state: 'closed' });
});
