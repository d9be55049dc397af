/**
 * The control plane's CA, kept in the store (certificate in clear, private key sealed with the
 * master key) so every replica sharing the store signs with the same CA. Created on first use;
 * concurrent creators race on one row and all end up with the winner's CA. After a master-key
 * rotation, `resealStoredCa` (run at start-up) moves the key to the current master key, so the
 * previous key can later be dropped.
 */
import { caFromPem, generateCaPem, issueClientCertificate, type Ca } from '../../pki/index.js';
import { isSealedWith, open, seal, type MasterKey, type MasterKeyRing } from '../secrets/index.js';
import type { Store } from '../store/index.js';
import type { RelayCa } from './index.js';

/** The associated data the CA's private key is sealed with (a credential's sealed value does not open as it). */
const CA_KEY_CONTEXT = 'relay-ca-key';

export async function loadOrCreateStoredCa(store: Store, keys: readonly MasterKey[]): Promise<Ca> {
  const read = async (): Promise<Ca | undefined> => {
    const [row] = await store.query<{ cert_pem: string; key_sealed: string }>('SELECT cert_pem, key_sealed FROM ca WHERE id = 1');
    return row ? caFromPem({ certPem: row.cert_pem, keyPem: open(keys, row.key_sealed, CA_KEY_CONTEXT).toString('utf8') }) : undefined;
  };
  const existing = await read();
  if (existing) return existing;
  const key = keys[0];
  if (!key) throw new Error('no master key to seal the CA key with');
  const fresh = generateCaPem();
  await store.query('INSERT INTO ca (id, cert_pem, key_sealed, created_at) VALUES (1, $1, $2, $3) ON CONFLICT (id) DO NOTHING', [
    fresh.certPem,
    seal(key, fresh.keyPem, CA_KEY_CONTEXT),
    new Date().toISOString(),
  ]);
  const ca = await read();
  if (!ca) throw new Error('the CA could not be stored');
  return ca;
}

/**
 * Re-seal the stored CA key with the current master key (after a rotation, or from the v1
 * format); true when it was re-sealed. Loads no key when there is no CA yet. Throws when the key
 * opens with none of the configured master keys.
 */
export async function resealStoredCa(store: Store, keys: () => Promise<MasterKeyRing>): Promise<boolean> {
  const [row] = await store.query<{ key_sealed: string }>('SELECT key_sealed FROM ca WHERE id = 1');
  if (!row) return false;
  const ring = await keys();
  if (isSealedWith(row.key_sealed, ring.current)) return false;
  const resealed = seal(ring.current, open(ring.all, row.key_sealed, CA_KEY_CONTEXT), CA_KEY_CONTEXT);
  const updated = await store.query('UPDATE ca SET key_sealed = $2 WHERE id = 1 AND key_sealed = $1 RETURNING id', [row.key_sealed, resealed]);
  return updated.length > 0;
}

export function relayCa(ca: Ca): RelayCa {
  return {
    certPem: ca.certPem,
    issueRelayCert: (csrPem, identity, validityDays) => {
      const c = issueClientCertificate(ca, csrPem, { relayId: identity.relayId, orgId: identity.orgId, validityDays });
      return { certPem: c.certPem, serial: c.serial, fingerprint: c.fingerprint256, notBefore: c.notBefore, notAfter: c.notAfter };
    },
  };
}
