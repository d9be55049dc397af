/**
 * The compiled CLI, brought up to date the way `npm ci` builds it (incremental tsc: quick when
 * nothing changed). Type errors elsewhere in the tree do not stop tsc from emitting; they are
 * shown, and the run goes on with what was emitted.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ROOT } from '../helpers/root.js';

export { ROOT };
export const SVC_JS = path.join(ROOT, 'dist/cli/svc.js');

let built = false;
/**
 * Brings dist/ up to date once per process (nothing to do under `npm test`, which built it before
 * any test started). Test files run in parallel, and two tsc runs writing the same files could let
 * one file's child process load a half-written module: a lock directory makes them take turns (a
 * lock older than two minutes is a crashed run's and is taken over).
 */
export function ensureDist(): void {
  // npm test (scripts/test.mjs) built it before any test started
  if (built || process.env['TEST_DIST_BUILT'] === '1') return;
  const lock = path.join(ROOT, 'dist', '.build-lock');
  mkdirSync(path.dirname(lock), { recursive: true });
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > 120_000) rmSync(lock, { recursive: true, force: true });
      } catch {
        /* released meanwhile */
      }
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    }
  }
  try {
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    execFileSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.json')], { stdio: 'pipe' });
  } catch (err) {
    process.stderr.write(`tsc reported errors (dist was still emitted):\n${String((err as { stdout?: Buffer }).stdout ?? '')}\n`);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
  built = true;
}

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run `svc` as a real child process. */
export function runSvc(args: readonly string[], env: Record<string, string | undefined>, stdin?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SVC_JS, ...args], { env: env as NodeJS.ProcessEnv, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin ?? '');
  });
}
