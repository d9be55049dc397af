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

/** Resolve a bearer key to its organization; undefined when malformed, unknown or revoked. */
export async function authenticate(store: Store, key: string): Promise<Principal | undefined> {
  if (!KEY_RE.test(key)) return undefined;
  // the lookup is by hash of a 256-bit secret: nothing to learn from its timing
  const rows = await store.query<{ id: string; org_id: string; agent_name: string; revoked_at: Date | null; last_used_at: Date | null }>(
    'SELECT id, org_id, agent_name, revoked_at, last_used_at FROM agent_keys WHERE key_hash = $1',
    [hashKey(key)],
  );
  const row = rows[0];
  if (!row || row.revoked_at) return undefined;
  // last_used_at at minute granularity keeps the hot path free of writes
  if (!row.last_used_at || Date.now() - new Date(row.last_used_at).getTime() > 60_000) {
    void store.query('UPDATE agent_keys SET last_used_at = $2 WHERE id = $1', [row.id, new Date().toISOString()]).catch(() => undefined);
  }
  return { orgId: row.org_id, keyId: row.id, agentName: row.agent_name };
}
