/**
 * A control-plane restart with relays connected: the compiled control plane as a real process on
 * fixed ports (found free first) and a data dir, three real relays (RelayAgent, real mutual TLS)
 * and a real customer database. SIGTERM the control plane, start it again on the same ports and
 * data dir: all three relays come back online by themselves, with different (jittered) reconnect
 * delays, and their queries answer.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { createExecutor, loadConfig, RelayAgent, wsDialer, type Executor } from '../../relay-agent/index.js';
import { demoImage, openConnection, tempDir, CACHE } from '../helpers/server.js';
import { buildDist, controlPlaneBin, enrollRelay, freePort, fundedAgent, ordersDatabase, queryFn, relayView, rmDir, spawnNode, until, type Proc } from '../relay-agent/harness.js';

t.test('control plane restart: three relays come back online with jittered reconnects', async (t) => {
  buildDist();
  const db = await ordersDatabase('svc_relay_restart');
  const dataDir = await tempDir();
  // not a first start: the demo image is there already (as the shared test image)
  await demoImage();
  await fs.cp(path.join(CACHE, 'demo'), path.join(dataDir, 'demo'), { recursive: true });
  const env = { SVC_DATA_DIR: dataDir, PORT: String(await freePort()), SVC_TUNNEL_PORT: String(await freePort()), LOG_LEVEL: 'info', SVC_RATE_LIMIT: '100000' };
  const start = async (): Promise<{ proc: Proc; url: string }> => {
    const proc = spawnNode(controlPlaneBin, [], env);
    const m = await proc.waitFor(/"listening":"(http:\/\/[^"]+)"/, 60_000);
    return { proc, url: m[1] as string };
  };
  let cp = await start();
  const agents: { agent: RelayAgent; exited: Promise<unknown>; logs: string[]; executor: Executor; relayId: string; dir: string }[] = [];
  t.teardown(async () => {
    for (const r of agents) {
      await r.agent.drain();
      await r.exited;
      await r.executor.close();
      await rmDir(path.dirname(r.dir));
    }
    await cp.proc.kill('SIGTERM');
    await db.drop();
    await rmDir(dataDir);
  });

  const a = await fundedAgent(cp.url);
  for (const name of ['east', 'west', 'north']) {
    const enrolled = await enrollRelay(cp.url, a.key, name);
    t.equal(enrolled.tunnel_url, `wss://127.0.0.1:${env.SVC_TUNNEL_PORT}`, 'relays dial the fixed tunnel port');
    const executor = createExecutor({ databaseUrl: db.url, poolSize: 2 });
    const logs: string[] = [];
    const agent = new RelayAgent({ dial: wsDialer(loadConfig(enrolled.configDir)), handler: executor.handle, log: (l) => logs.push(l) });
    agents.push({ agent, exited: agent.run(), logs, executor, relayId: enrolled.relay_id, dir: enrolled.configDir });
  }
  const allOnline = (url: string) =>
    until('all three relays online', async () => {
      const views = await Promise.all(agents.map((r) => relayView(url, a.key, r.relayId)));
      return views.every((v) => v.status === 'online');
    });
  await allOnline(cp.url);
  const conns = await Promise.all(agents.map((r) => openConnection(cp.url, a.key, 'postgres-relay', [`relay:${r.relayId}`, 'read:public.orders'])));

  cp.proc.child.kill('SIGTERM');
  t.equal(await cp.proc.exited, 0, 'the control plane drains and exits 0');
  await until('every relay noticed', async () => agents.every((r) => r.agent.state === 'connecting'));

  cp = await start();
  await allOnline(cp.url);
  t.pass('all three relays are online again after the restart');
  for (const [i, r] of agents.entries()) {
    t.equal(r.agent.state, 'connected');
    t.ok(r.agent.reconnects >= 1, `relay ${i} reconnected by itself (${r.agent.reconnects} attempts)`);
    const res = await queryFn(cp.url, a.key, conns[i] as string)('SELECT count(*) AS n FROM orders WHERE tenant_id = 1');
    t.same(res.body.rows, [{ n: 1000 }], `relay ${i} answers queries again`);
  }
  const delays = agents.map((r) => r.logs.flatMap((l) => /^reconnecting in (\d+) ms$/.exec(l)?.slice(1) ?? []).map(Number));
  t.ok(
    delays.every((d) => d.length >= 1),
    `each relay waited before redialing: ${JSON.stringify(delays)}`,
  );
  t.equal(new Set(delays.map((d) => JSON.stringify(d))).size, 3, 'their reconnect delays differ (full jitter): no thundering herd');
  t.notMatch(cp.proc.output(), new RegExp(a.key.slice(9)), 'the agent key never appears in the logs');
});
