/**
 * Images (gzip tarballs from `EmbeddedPostgres.dump()`) kept in files under the data directory, so
 * a restart starts its engines from the file instead of building the image again: the demo
 * datasets (demo/engine.ts) and the empty engine of the API and file targets (live/rest/engine.ts).
 * A file is named `<stem>-<fingerprint>.tar.gz`; a new fingerprint (another generator version,
 * PGlite version or setup) is a new file, and saving it removes the older ones.
 */
import fs from 'node:fs/promises';
import path from 'node:path';

/** `<dir>/<stem>-<fingerprint>.tar.gz` */
export function imageFilePath(dir: string, stem: string, fingerprint: string): string {
  return path.join(dir, `${stem}-${fingerprint}.tar.gz`);
}

/** how long a save takes at most: a temporary file older than this was left by a crash */
const STALE_TEMPORARY_MS = 10 * 60_000;

/** whether `f` (a file name) is one of `stem`'s images (`suffix` '') or their temporary files */
function ofStem(stem: string, f: string, suffix: string): boolean {
  return f.startsWith(`${stem}-`) && new RegExp(`^[0-9a-f]+\\.tar\\.gz${suffix}$`).test(f.slice(stem.length + 1));
}

function stemOf(file: string): string | undefined {
  return /^(.+)-[0-9a-f]+\.tar\.gz$/.exec(path.basename(file))?.[1];
}

/** temporary files of `stem` in `dir` that a save cut short by a crash left (older than any save takes) */
async function removeStaleTemporaries(dir: string, stem: string): Promise<void> {
  for (const f of await fs.readdir(dir)) {
    if (!ofStem(stem, f, '\\.\\d+\\.\\d+\\.tmp')) continue;
    const stale = await fs.stat(path.join(dir, f)).then((st) => Date.now() - st.mtimeMs > STALE_TEMPORARY_MS, () => false);
    if (stale) await fs.rm(path.join(dir, f), { force: true });
  }
}

/**
 * The saved image, or undefined when there is none (or it cannot be read). Read, it also removes
 * the temporary files a crash left beside it: a start that reads its image never saves one, which
 * was what removed them.
 */
export async function readImageFile(file: string): Promise<Uint8Array | undefined> {
  let image: Uint8Array;
  try {
    image = new Uint8Array(await fs.readFile(file));
  } catch {
    return undefined;
  }
  const stem = stemOf(file);
  if (stem) await removeStaleTemporaries(path.dirname(file), stem).catch(() => undefined);
  return image;
}

/**
 * Writes the image atomically (a temporary file renamed) and removes the images of other
 * fingerprints with the same stem, and temporary files a crash left (older than any save takes).
 */
export async function saveImageFile(file: string, image: Uint8Array): Promise<void> {
  const dir = path.dirname(file);
  const name = path.basename(file);
  const stem = stemOf(file);
  if (!stem) throw new TypeError(`saveImageFile: ${file} is not named <stem>-<fingerprint>.tar.gz`);
  await fs.mkdir(dir, { recursive: true });
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  try {
    await fs.writeFile(tmp, image);
    await fs.rename(tmp, file);
  } catch (err) {
    // a write cut short (a full disk, a quota) must not keep its part: nothing else removes it soon
    await fs.rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
  for (const f of await fs.readdir(dir)) {
    // compared by name: `file` need not be in normal form (`a/./b`)
    if (ofStem(stem, f, '') && f !== name) await fs.rm(path.join(dir, f), { force: true });
  }
  await removeStaleTemporaries(dir, stem);
}
