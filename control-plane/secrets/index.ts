/**
 * The master key and sealed secrets. The master key (32 bytes) comes from SVC_MASTER_KEY, or is
 * generated once into `<data dir>/master.key` (mode 0600). Secrets are sealed with AES-256-GCM
 * (16-byte tag, pinned on both sides so a truncated tag never verifies) as
 * `<version>.<key id>.<iv>.<tag>.<ciphertext>` (base64url parts); the key id (first 8 hex
 * characters of SHA-256 of the key) is kept with every ciphertext so the master key can be
 * rotated: open() accepts any key it is given, and loadMasterKeyRing gives it the current key plus
 * the previous ones (SVC_MASTER_KEY_PREVIOUS).
 *
 * Versions: `v2` binds the ciphertext to its context (associated data, e.g. the organization and
 * kind of a credential), so a sealed value copied into another row does not open; `v1` (no
 * associated data) is what earlier releases wrote and is still opened. `isSealedWith` tells
 * whether a stored value is already v2 under a given key, so start-up can re-seal the rest.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

export class SecretsError extends Error {
  readonly code: 'SECRETS_ERR_KEY' | 'SECRETS_ERR_SEALED' | 'SECRETS_ERR_UNKNOWN_KEY';
  constructor(code: SecretsError['code'], message: string) {
    super(message);
    this.name = 'SecretsError';
    this.code = code;
  }
}

export interface MasterKey {
  readonly id: string;
  readonly key: Buffer;
}

export function masterKeyFrom(text: string): MasterKey {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, t.includes('-') || t.includes('_') ? 'base64url' : 'base64');
  if (key.length !== 32) throw new SecretsError('SECRETS_ERR_KEY', 'the master key must be 32 bytes (64 hex characters or base64)');
  return { id: createHash('sha256').update(key).digest('hex').slice(0, 8), key };
}

/**
 * SVC_MASTER_KEY when given; else the key in `<dataDir>/master.key`, created (0600) on first use.
 * A new key is written whole under a name of its own and then linked to `master.key` (which
 * fails when another process made it first), so a process killed while writing it never leaves
 * a part of a key there. An empty `master.key` is what an earlier version left when killed between
 * creating the file and writing it: nothing can have been sealed with it, and it is replaced.
 */
export async function loadMasterKey(configured: string | undefined, dataDir: string): Promise<MasterKey> {
  if (configured) return masterKeyFrom(configured);
  const file = path.join(dataDir, 'master.key');
  for (let tries = 0; ; tries++) {
    let text: string | undefined;
    try {
      text = await fs.readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (text !== undefined && (text.trim() !== '' || tries >= 3)) {
      try {
        return masterKeyFrom(text);
      } catch (err) {
        throw new SecretsError('SECRETS_ERR_KEY', `${file}: ${(err as Error).message}`);
      }
    }
    await fs.mkdir(dataDir, { recursive: true });
    if (text !== undefined) await setAsideEmpty(file);
    const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      await fs.writeFile(tmp, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
      await fs.link(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; // another process made it first: read
    } finally {
      await fs.rm(tmp, { force: true });
    }
  }
}

/**
 * Moves an empty `file` out of the way (renamed, so two processes never both remove it). What was
 * moved is put back if it was not empty after all: another process's new key, linked meanwhile.
 */
async function setAsideEmpty(file: string): Promise<void> {
  const aside = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.empty`;
  try {
    await fs.rename(file, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // another process moved it
    throw err;
  }
  try {
    if ((await fs.stat(aside)).size > 0) {
      await fs.link(aside, file).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
    }
  } finally {
    await fs.rm(aside, { force: true });
  }
}

/** The master keys in use: `current` seals new secrets; `all` (current first) open stored ones. */
export interface MasterKeyRing {
  readonly current: MasterKey;
  readonly all: readonly MasterKey[];
}

/**
 * Rotation: the current key (as loadMasterKey finds it) plus the previous keys that must still
 * open what they sealed: SVC_MASTER_KEY_PREVIOUS (comma list) and, when SVC_MASTER_KEY is set,
 * the key generated earlier into `<dataDir>/master.key` if there is one (so moving from the
 * generated key to a configured one keeps every stored secret readable). Never creates a file
 * when SVC_MASTER_KEY is set.
 */
export async function loadMasterKeyRing(configured: string | undefined, previous: readonly string[], dataDir: string): Promise<MasterKeyRing> {
  const current = await loadMasterKey(configured, dataDir);
  const all: MasterKey[] = [current];
  const add = (k: MasterKey): void => {
    if (!all.some((x) => x.id === k.id)) all.push(k);
  };
  for (const text of previous) add(masterKeyFrom(text));
  if (configured) {
    try {
      add(masterKeyFrom(await fs.readFile(path.join(dataDir, 'master.key'), 'utf8')));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && !(err instanceof SecretsError)) throw err;
    }
  }
  return { current, all };
}

const TAG_BYTES = 16;

/**
 * Seal `plaintext` with `key`. With `context` (associated data naming where the value belongs,
 * e.g. `credential\n<org>\n<kind>`) the result is v2 and opens only with that same context;
 * without it, v1 (kept for callers that have no context yet).
 */
export function seal(key: MasterKey, plaintext: string | Buffer, context?: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key.key, iv, { authTagLength: TAG_BYTES });
  if (context !== undefined) cipher.setAAD(Buffer.from(context, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return [context !== undefined ? 'v2' : 'v1', key.id, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
}

/**
 * Open a sealed secret with whichever of `keys` sealed it. A v2 value opens only with the
 * `context` it was sealed with; a v1 value (no context) opens whatever `context` is given.
 */
export function open(keys: readonly MasterKey[], sealed: string, context?: string): Buffer {
  const parts = sealed.split('.');
  const version = parts[0];
  if (parts.length !== 5 || (version !== 'v1' && version !== 'v2')) throw new SecretsError('SECRETS_ERR_SEALED', 'not a sealed secret');
  const [, id, iv, tag, body] = parts as [string, string, string, string, string];
  const key = keys.find((k) => k.id === id);
  if (!key) throw new SecretsError('SECRETS_ERR_UNKNOWN_KEY', `sealed with master key ${id}, which is not configured`);
  try {
    const tagBytes = Buffer.from(tag, 'base64url');
    if (tagBytes.length !== TAG_BYTES) throw new Error('tag length');
    const decipher = createDecipheriv('aes-256-gcm', key.key, Buffer.from(iv, 'base64url'), { authTagLength: TAG_BYTES });
    if (version === 'v2') decipher.setAAD(Buffer.from(context ?? '', 'utf8'));
    decipher.setAuthTag(tagBytes);
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]);
  } catch {
    throw new SecretsError('SECRETS_ERR_SEALED', 'the sealed secret does not open (tampered, another key, or another row)');
  }
}

/** Whether `sealed` is already in the current format (v2, bound to its context) under `key`: else start-up re-seals it. */
export function isSealedWith(sealed: string, key: MasterKey): boolean {
  return sealed.startsWith(`v2.${key.id}.`);
}

/** The LIKE pattern of values that `isSealedWith(…, key)` (for SQL that selects what to re-seal). */
export const sealedWithPattern = (key: MasterKey): string => `v2.${key.id}.%`;
