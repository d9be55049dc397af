/**
 * Identifiers (request, event, reservation, record ids): `prefix_` + random bytes in base64url,
 * drawn from a pool filled 4 KiB at a time by the CSPRNG (as `crypto.randomUUID` does), since a
 * call to `randomBytes` per id costs microseconds on every request. Never for secrets: an agent
 * key takes its own `randomBytes` (accounts).
 */
import { randomBytes } from 'node:crypto';

const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

export function randomId(prefix: string, bytes = 12): string {
  if (offset + bytes > pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  const id = pool.toString('base64url', offset, offset + bytes);
  offset += bytes;
  return `${prefix}_${id}`;
}
