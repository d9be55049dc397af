/**
 * Accounts and agent keys. A key is `svc_conn_` + 32 random bytes (base64url); only its SHA-256
 * is stored, and it is shown once, in the signup response.
 */
import { createHash, randomBytes } from 'node:crypto';
import { TRIAL } from '../billing/index.js';
import type { Store } from '../store/index.js';
import { randomId } from '../ids.js';

export const KEY_PREFIX = 'svc_conn_';
const KEY_RE = /^svc_conn_[A-Za-z0-9_-]{43}$/;

export interface Principal {
  readonly orgId: string;
  readonly keyId: string;
  readonly agentName: string;
}

export function hashKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export function newId(prefix: string, bytes = 12): string {
  return randomId(prefix, bytes);
}

export interface SignupResult {
  readonly apiKey: string;
  readonly orgId: string;
  readonly agentId: string;
  readonly trialExpiresAt: string;
}

export async function signup(store: Store, orgName: string, agentName: string): Promise<SignupResult> {
  const orgId = newId('org');
  const keyId = newId('key');
  const apiKey = KEY_PREFIX + randomBytes(32).toString('base64url');
  const now = new Date();
  const expires = new Date(now.getTime() + TRIAL.days * 86_400_000);
  await store.tx(async (sql) => {
    await sql.query('INSERT INTO orgs (id, name, created_at, trial_expires_at) VALUES ($1, $2, $3, $4)', [orgId, orgName, now.toISOString(), expires.toISOString()]);
    await sql.query('INSERT INTO agent_keys (id, org_id, agent_name, key_hash, created_at) VALUES ($1, $2, $3, $4, $5)', [keyId, orgId, agentName, hashKey(apiKey), now.toISOString()]);
  });
  return { apiKey, orgId, agentId: keyId, trialExpiresAt: expires.toISOString() };
}

interface KeyRow {
  readonly principal: Principal;
  /** when last_used_at was last written (or read), ms */
  usedAt: number;
}

// the lookup is by hash of a 256-bit secret: nothing to learn from its timing
async function lookup(store: Store, hash: string): Promise<KeyRow | undefined> {
  const rows = await store.query<{ id: string; org_id: string; agent_name: string; revoked_at: Date | null; last_used_at: Date | null }>(
    'SELECT id, org_id, agent_name, revoked_at, last_used_at FROM agent_keys WHERE key_hash = $1',
    [hash],
  );
  const row = rows[0];
  if (!row || row.revoked_at) return undefined;
  const key: KeyRow = { principal: { orgId: row.org_id, keyId: row.id, agentName: row.agent_name }, usedAt: row.last_used_at ? new Date(row.last_used_at).getTime() : 0 };
  touch(store, key);
  return key;
}

/**
 * last_used_at at minute granularity keeps the hot path free of writes. Never on a key revoked in
 * the store meanwhile (one used from the cache): a revoked key is not used, as when read fresh.
 */
function touch(store: Store, key: KeyRow): void {
  const now = Date.now();
  if (now - key.usedAt <= 60_000) return;
  key.usedAt = now;
  void store.query('UPDATE agent_keys SET last_used_at = $2 WHERE id = $1 AND revoked_at IS NULL', [key.principal.keyId, new Date(now).toISOString()]).catch(() => undefined);
}

/** The most keys a {@link KeyCache} holds (least recently used forgotten first). */
export const KEY_CACHE_MAX = 10_000;
/** How long a key read from the store is used before it is read again. */
export const KEY_CACHE_MS = 60_000;

/**
 * Agent keys as one app has read them, by hash. Only callers that read the key's revocation fresh
 * from the store before anything acts on their behalf use it (`recent`): the query path, whose
 * reservation refuses a revoked key and whose settlement checks it again under the connection's
 * row lock (billing `reserve`, `settleQuery`). Every other request reads the key from the store
 * (`fresh`), which also refreshes or drops its entry here. So a cached key saves the query path one
 * store round trip and never outlives a revocation: a revoked key runs and is charged nothing.
 */
export class KeyCache {
  private readonly byHash = new Map<string, KeyRow & { readonly at: number }>();
  private hits = 0;
  private misses = 0;

  constructor(private readonly store: Store) {}

  /** The key read from the store now (and remembered when valid). */
  async fresh(key: string): Promise<Principal | undefined> {
    if (!KEY_RE.test(key)) return undefined;
    const hash = hashKey(key);
    this.misses++;
    const row = await lookup(this.store, hash);
    this.byHash.delete(hash);
    if (!row) return undefined;
    this.byHash.set(hash, { ...row, at: Date.now() });
    if (this.byHash.size > KEY_CACHE_MAX) this.byHash.delete(this.byHash.keys().next().value as string);
    return row.principal;
  }

  /**
   * The key as read at most KEY_CACHE_MS ago, or fresh: `cached` says which. For callers that read
   * its revocation from the store before acting (see the class); `forget` it when they find it revoked.
   */
  async recent(key: string): Promise<{ readonly principal: Principal; readonly cached: boolean } | undefined> {
    if (!KEY_RE.test(key)) return undefined;
    const hash = hashKey(key);
    const hit = this.byHash.get(hash);
    if (hit && Date.now() - hit.at < KEY_CACHE_MS) {
      this.hits++;
      this.byHash.delete(hash);
      this.byHash.set(hash, hit);
      touch(this.store, hit);
      return { principal: hit.principal, cached: true };
    }
    const principal = await this.fresh(key);
    return principal ? { principal, cached: false } : undefined;
  }

  /** Whether agent key `keyId` is revoked or gone, read from the store now; if so it is forgotten here. */
  async revoked(keyId: string): Promise<boolean> {
    const revoked = await keyRevoked(this.store, keyId);
    if (revoked) this.forget(keyId);
    return revoked;
  }

  /** The key was found revoked (or gone): read it from the store from now on. */
  forget(keyId: string): void {
    for (const [hash, row] of this.byHash) if (row.principal.keyId === keyId) this.byHash.delete(hash);
  }

  /** Lookups answered from memory and from the store (metrics, tests). */
  stats(): { readonly hits: number; readonly misses: number; readonly size: number } {
    return { hits: this.hits, misses: this.misses, size: this.byHash.size };
  }
}

/** Whether agent key `keyId` is revoked or gone, read from the store now. */
export async function keyRevoked(store: Store, keyId: string): Promise<boolean> {
  const rows = await store.query<{ revoked: boolean }>('SELECT revoked_at IS NOT NULL AS revoked FROM agent_keys WHERE id = $1', [keyId]);
  return rows[0]?.revoked !== false;
}
