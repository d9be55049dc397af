/**
 * A real svc-relay agent (in this process) enrolled with a test control plane over real mutual
 * TLS, executing against a customer database: enroll with a fresh token, dial the tunnel, wait
 * until GET /v1/relays says online.
 */
import fs from 'node:fs/promises';
import { createExecutor, enroll, loadConfig, RelayAgent, wsDialer, type Executor } from '../../relay-agent/index.js';
import { api, tempDir, type TestServer } from './server.js';

export interface TestRelay {
  readonly relayId: string;
  readonly executor: Executor;
  readonly agent: RelayAgent;
  /** drains the agent, closes the executor and removes its config dir */
  close(): Promise<void>;
}

export async function startRelay(srv: TestServer, key: string, databaseUrl: string, o: { name?: string; applicationName?: string } = {}): Promise<TestRelay> {
  await srv.svc.startTunnel();
  const configDir = await tempDir('svc-relay-');
  const token = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key, body: {} })).body.token;
  const enrolled = await enroll({ controlPlane: srv.url, token, configDir, name: o.name ?? 'test-db' });
  const cfg = await loadConfig(configDir);
  const executor = createExecutor({ databaseUrl, ...(o.applicationName ? { applicationName: o.applicationName } : {}) });
  const agent = new RelayAgent({ dial: wsDialer(cfg), handler: (q) => executor.handle(q), certificateNotAfter: new Date(enrolled.expires_at ?? Date.now() + 86_400_000) });
  const exited = agent.run();
  const relayId = cfg.relay_id;
  const end = Date.now() + 30_000;
  for (;;) {
    const r = await api<{ relays: { relay_id: string; status: string }[] }>(srv.url, 'GET', '/v1/relays', { key });
    if (r.body.relays.find((x) => x.relay_id === relayId)?.status === 'online') break;
    if (Date.now() > end) throw new Error(`relay ${relayId} did not come online`);
    await new Promise((res) => setTimeout(res, 50));
  }
  return {
    relayId,
    executor,
    agent,
    async close() {
      await agent.drain().catch(() => undefined);
      await exited.catch(() => undefined);
      await executor.close();
      await fs.rm(configDir, { recursive: true, force: true });
    },
  };
}
