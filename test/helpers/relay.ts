/**
 * A real svc-relay agent (in this process) enrolled with a test control plane over real mutual
 * TLS, executing against a customer database: enroll with a fresh token, dial the tunnel, wait
 * until GET /v1/relays says online.
 */
import fs from 'node:fs/promises';
import type { SessionOptions } from '../../protocol/index.js';
import { createExecutor, enroll, loadConfig, RelayAgent, wsDialer, type Executor } from '../../relay-agent/index.js';
import { api, tempDir, type TestServer } from './server.js';

export interface TestRelay {
  readonly relayId: string;
  readonly executor: Executor;
  readonly agent: RelayAgent;
  /** streams (statements) the control plane opened on this relay so far */
  streams(): number;
  /** drains the agent, closes the executor and removes its config dir */
  close(): Promise<void>;
}

export async function startRelay(
  srv: TestServer,
  key: string,
  databaseUrl: string,
  /** `session`: the tunnel session's options (e.g. the HELLO of an older relay) */
  o: { name?: string; applicationName?: string; session?: Omit<SessionOptions, 'role'> } = {},
): Promise<TestRelay> {
  await srv.svc.startTunnel();
  const configDir = await tempDir('svc-relay-');
  const token = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key, body: {} })).body.token;
  const enrolled = await enroll({ controlPlane: srv.url, token, configDir, name: o.name ?? 'test-db' });
  const cfg = await loadConfig(configDir);
  let streams = 0;
  const executor = createExecutor({ databaseUrl, ...(o.applicationName ? { applicationName: o.applicationName } : {}) });
  const agent = new RelayAgent({
    dial: wsDialer(cfg),
    handler: (q) => {
      streams++;
      return executor.handle(q);
    },
    certificateNotAfter: new Date(enrolled.expires_at ?? Date.now() + 86_400_000),
    ...(o.session ? { session: o.session } : {}),
  });
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
    streams: () => streams,
    async close() {
      await agent.drain().catch(() => undefined);
      await exited.catch(() => undefined);
      await executor.close();
      await fs.rm(configDir, { recursive: true, force: true });
    },
  };
}
