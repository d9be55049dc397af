/**
 * The compiled control plane (`dist/control-plane/main.js`, brought up to date first) as a real
 * child process, for tests that kill and restart it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ensureDist, ROOT } from '../cli/dist.js';
import { CACHE, demoImage, tempDir } from './server.js';
import type { TapTest } from './tap.js';

export const CONTROL_PLANE_JS = path.join(ROOT, 'dist/control-plane/main.js');

export interface ControlPlaneProcess {
  readonly child: ChildProcess;
  /** the API base URL it logged when listening */
  readonly url: string;
  /** everything it wrote so far (stdout and stderr) */
  readonly output: () => string;
}

/**
 * What a test's child control plane usually starts with: its data dir, ports chosen by the
 * system, logs at info (the listening address is read from them), the rate limits out of the
 * way and one demo worker.
 */
export function childEnv(dataDir: string): Record<string, string> {
  return { SVC_DATA_DIR: dataDir, PORT: '0', SVC_TUNNEL_PORT: '0', LOG_LEVEL: 'info', SVC_RATE_LIMIT: '100000', SVC_SIGNUP_RATE_LIMIT: '100000', SVC_DEMO_WORKERS: '1' };
}

/**
 * Starts it with `env` on top of this process's environment, with npm start's allocator options
 * (package.json "start": MALLOC_ARENA_MAX=2 unless set, --max-semi-space-size=4); resolves once it
 * listens. With `--liftoff-only` too, as the test processes themselves (package.json "tap"): the
 * engines' WebAssembly is not compiled a second time by V8's optimizing tier, which a process that
 * lives seconds never earns back (about a fifth of a test file's CPU). Nothing the process does
 * changes.
 */
export function startControlPlane(env: Record<string, string>): Promise<ControlPlaneProcess> {
  ensureDist();
  const child = spawn(process.execPath, ['--liftoff-only', '--max-semi-space-size=4', CONTROL_PLANE_JS], {
    env: { ...process.env, MALLOC_ARENA_MAX: process.env['MALLOC_ARENA_MAX'] || '2', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    const onData = (): void => {
      const m = /"listening":"(http:\/\/[^"]+)"/.exec(out);
      if (m?.[1]) {
        child.stdout?.off('data', onData);
        resolve({ child, url: m[1], output: () => out });
      }
    };
    child.stdout?.on('data', onData);
    child.on('exit', (code) => reject(new Error(`exited ${code} before ready:\n${out}`)));
  });
}

/** The exit code once it has exited (at once if it already has). */
export function exitOf(child: ChildProcess): Promise<number | null> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve(child.exitCode) : new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/**
 * A new data dir holding the demo image as a first start leaves it (copied from the test cache,
 * so the process does not build it), removed when `t` ends.
 */
export async function dataDirWithDemo(t: TapTest): Promise<string> {
  const dataDir = await tempDir();
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  await demoImage();
  await fs.cp(path.join(CACHE, 'demo'), path.join(dataDir, 'demo'), { recursive: true });
  return dataDir;
}
