/**
 * An `svc-relay` for the benchmarks, as a customer runs it: the compiled CLI
 * (`dist/cli/svc-relay.js`) enrolled with a real token from the in-process control plane, then
 * `svc-relay run` in a child process (so its memory and CPU are its own), waited for until its
 * tunnel is open.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { SvcApp } from '../control-plane/app.js';
import { loadConfig as loadRelayConfig } from '../relay-agent/index.js';

const DEFAULT_RELAY_CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../cli/svc-relay.js');

export interface RelayProcess {
  readonly relayId: string;
  readonly child: ChildProcess;
  /** SIGTERM (the relay drains), SIGKILL after 10 s; removes its config dir */
  stop(): Promise<void>;
}

export async function startRelay(opts: {
  readonly svc: SvcApp;
  /** the control plane's HTTP origin */
  readonly base: URL;
  /** an agent key of the organization the relay enrolls into */
  readonly key: string;
  readonly databaseUrl: string;
  /** more `svc-relay run` options */
  readonly args?: readonly string[];
  /** node options for the relay process (e.g. --cpu-prof) */
  readonly nodeArgs?: readonly string[];
  /** the compiled svc-relay CLI (default: dist/cli/svc-relay.js beside this compiled file) */
  readonly cli?: string;
}): Promise<RelayProcess> {
  const { svc, base, key } = opts;
  const RELAY_CLI = opts.cli ?? DEFAULT_RELAY_CLI;
  const tok = await svc.app.inject({ method: 'POST', url: '/v1/relays/enroll-token', payload: {}, headers: { authorization: `Bearer ${key}` } });
  if (tok.statusCode !== 201 && tok.statusCode !== 200) throw new Error(`enroll token refused: ${tok.statusCode} ${tok.body}`);
  const token = (JSON.parse(tok.body) as { token: string }).token;
  const configDir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-relay-cfg-'));
  await promisify(execFile)(process.execPath, [RELAY_CLI, 'enroll', '--control-plane', base.origin, '--token', token, '--config-dir', configDir, '--name', 'bench', '--force']);
  const relayId = loadRelayConfig(configDir).relay_id;
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), RELAY_CLI, 'run', '--config-dir', configDir, '--database-url', opts.databaseUrl, '--health-port', '0', ...(opts.args ?? [])], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString('utf8')).slice(-4000);
  });
  child.on('exit', (code) => {
    if (code !== 0 && code !== null) process.stderr.write(`svc-relay exited ${code}: ${stderr}\n`);
  });
  const stop = async (): Promise<void> => {
    const exited = new Promise((res) => child.once('exit', res));
    if (child.exitCode === null) child.kill('SIGTERM'); // drains; --cpu-prof writes its profile on exit
    await Promise.race([exited, new Promise((res) => setTimeout(res, 10_000))]);
    if (child.exitCode === null) child.kill('SIGKILL');
    await fs.rm(configDir, { recursive: true, force: true });
  };
  const end = Date.now() + 20_000;
  while (svc.services.tunnels.get(relayId)?.session.state !== 'open') {
    if (child.exitCode !== null || Date.now() > end) {
      await stop();
      throw new Error(child.exitCode !== null ? `svc-relay exited ${child.exitCode}: ${stderr}` : 'timed out waiting for the relay tunnel');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { relayId, child, stop };
}
