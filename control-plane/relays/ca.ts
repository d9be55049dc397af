/**
 * The control plane's CA, kept in the store (certificate in clear, private key sealed with the
 * master key) so every replica sharing the store signs with the same CA. Created on first use;
 * concurrent creators race on one row and all end up with the winner's CA.
 */
import { caFromPem, generateCaPem, issueClientCertificate, type Ca } from '../../pki/index.js';
import { open, seal, type MasterKey } from '../secrets/index.js';
import type { Store } from '../store/index.js';
import type { RelayCa } from './index.js';

export async function loadOrCreateStoredCa(store: Store, keys: readonly MasterKey[]): Promise<Ca> {
  const read = async (): Promise<Ca | undefined> => {
    const [row] = await store.query<{ cert_pem: string; key_sealed: string }>('SELECT cert_pem, key_sealed FROM ca WHERE id = 1');
    return row ? caFromPem({ certPem: row.cert_pem, keyPem: open(keys, row.key_sealed).toString('utf8') }) : undefined;
  };
  const existing = await read();
  if (existing) return existing;
  const key = keys[0];
  if (!key) throw new Error('no master key to seal the CA key with');
  const fresh = generateCaPem();
  await store.query('INSERT INTO ca (id, cert_pem, key_sealed, created_at) VALUES (1, $1, $2, $3) ON CONFLICT (id) DO NOTHING', [
    fresh.certPem,
    seal(key, fresh.keyPem),
    new Date().toISOString(),
  ]);
  const ca = await read();
  if (!ca) throw new Error('the CA could not be stored');
  return ca;
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
