/**
 * `GET /healthz` answers 200 only once the relay tunnel listener accepts connections too: a
 * balancer or orchestrator that routes relays to a replica when its health check passes (docs/
 * deployment.md) never sends them to a tunnel port that refuses them. The listener's start (its CA
 * read from the store, a server certificate issued) took 0.8 s on a restart and 2.8 s on a first
 * start on the 2-core development VM, with the API already answering 200; a relay dialing then was
 * refused and backed off (CI once waited more than 20 s for a relay to hold its tunnel).
 *
 * The compiled control plane as `npm start` runs it, on fixed free ports; /healthz polled every
 * 10 ms from the start, and the tunnel port connected to right after the first 200.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import t from 'tap';
import { CONTROL_PLANE_JS, dataDirWithDemo, exitOf } from '../helpers/control-plane-process.js';
import { ensureDist } from '../cli/dist.js';
import { freePort } from '../relay-agent/harness.js';

ensureDist();

const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });

t.test('the first 200 of /healthz comes once the tunnel port accepts', async (t) => {
  const dataDir = await dataDirWithDemo(t);
  const [port, tunnelPort] = [await freePort(), await freePort()];
  const child = spawn(process.execPath, ['--liftoff-only', CONTROL_PLANE_JS], {
    env: { ...process.env, SVC_DATA_DIR: dataDir, PORT: String(port), SVC_TUNNEL_PORT: String(tunnelPort), LOG_LEVEL: 'warn', SVC_DEMO_WORKERS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exitOf(child);
  });
  const until = Date.now() + 60_000;
  for (;;) {
    const status = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) break;
    if (child.exitCode !== null || Date.now() > until) throw new Error(`no 200 from /healthz (exit ${child.exitCode}):\n${out}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  t.ok(await accepts(tunnelPort), 'the tunnel port accepted a connection right after the first 200');
});
