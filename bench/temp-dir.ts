/** A bench's working directory under the system's temporary directory, removed when the bench ends. */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** `fn` with a new directory named `prefix…`, removed afterwards whether `fn` succeeded or failed. */
export async function inTempDir<T>(prefix: string, fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  try {
    return await fn(dir);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
