import fs from 'node:fs/promises';
import { EmbeddedPostgres } from '../../control-plane/embedded/index.js';

/** A small, valid PGlite image (one table holding `tag`): distinct tags give distinct images. */
export async function smallImage(tag: string): Promise<Uint8Array> {
  const db = await EmbeddedPostgres.start();
  try {
    await db.exec(`CREATE TABLE marker (tag text); INSERT INTO marker VALUES ('${tag}')`);
    return await db.dump();
  } finally {
    await db.terminate();
  }
}

export function exists(p: string): Promise<boolean> {
  return fs.access(p).then(
    () => true,
    () => false,
  );
}

export async function entries(dir: string): Promise<string[]> {
  return (await fs.readdir(dir).catch(() => [] as string[])).sort();
}
