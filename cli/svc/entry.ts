import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** True when the module at `moduleUrl` is the script node was started with (also through a bin symlink). */
export function isEntryPoint(moduleUrl: string): boolean {
  const arg = process.argv[1];
  if (!arg) return false;
  try {
    return realpathSync(arg) === realpathSync(fileURLToPath(moduleUrl));
  } catch {
    return false;
  }
}
