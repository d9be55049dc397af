/**
 * An ES module script run by a Node.js process of its own (`node --input-type=module -e`), with
 * `--liftoff-only` as every process the tests start: for what holds once per process (a compiled
 * engine, an image made once), so each case starts from nothing. Its exit code and everything it
 * wrote (stdout and stderr).
 */
import { spawn } from 'node:child_process';

export async function runModuleScript(script: string): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ['--liftoff-only', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, out };
}
