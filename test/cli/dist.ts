/**
 * The compiled CLI, brought up to date the way `npm ci` builds it (incremental tsc: quick when
 * nothing changed). Type errors elsewhere in the tree do not stop tsc from emitting; they are
 * shown, and the run goes on with what was emitted.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SVC_JS = path.join(ROOT, 'dist/cli/svc.js');

let built = false;
export function ensureDist(): void {
  if (built) return;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.json')], { stdio: 'pipe' });
  } catch (err) {
    process.stderr.write(`tsc reported errors (dist was still emitted):\n${String((err as { stdout?: Buffer }).stdout ?? '')}\n`);
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
