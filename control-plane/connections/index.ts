/**
 * Connections: a target, scopes of its grammar, a tier and a TTL, each with its own audit chain.
 * Another organization's connection is reported as not found, never as forbidden.
 */
import { newId } from '../accounts/index.js';
import { appendEvent, appendPendingMany, genesisHash, PendingEvent } from '../audit/index.js';
import { parseScopes, type Catalogue, type ParsedScopes, type Target } from '../catalogue/index.js';
import { hasCredential, registerHint } from '../credentials/index.js';
import { ApiError } from '../errors.js';
import type { Sql, Store } from '../store/index.js';
import { enqueueLifecycle, enqueueLifecycleMany } from '../webhooks/index.js';

export const TTL_MIN = 1;
export const TTL_MAX = 604_800;
export const TTL_DEFAULT = 3600;

export interface ConnectionRow {
  id: string;
  org_id: string;
  target_id: string;
  scopes: string[];
  tier: string;
  ttl_seconds: number;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  /** why it was revoked (set with revoked_at): see {@link RevokedReason} */
  revoked_reason: RevokedReason | null;
  genesis_hash: string;
  head_hash: string;
  head_seq: number;
  queries: number;
  bytes_egressed: number;
  last_query_at: Date | null;
}

export type ConnectionStatus = 'active' | 'expired' | 'revoked';

/**
 * `revoked`: by POST /v1/connections/{id}/revoke (or the MCP tool); `relay_deleted`: its relay was
 * deleted (DELETE /v1/relays/{id} revokes the relay's live connections in the same transaction).
 */
export type RevokedReason = 'revoked' | 'relay_deleted';

export function statusOf(c: ConnectionRow, now = Date.now()): ConnectionStatus {
  if (c.revoked_at) return 'revoked';
  if (new Date(c.expires_at).getTime() <= now) return 'expired';
  return 'active';
}

const iso = (d: Date | null): string | null => (d ? new Date(d).toISOString() : null);

export function connectionRecord(c: ConnectionRow): Record<string, unknown> {
  return {
    connectionId: c.id,
    connection_id: c.id,
    org_id: c.org_id,
    target_id: c.target_id,
    scopes: c.scopes,
    tier: c.tier,
    ttl_seconds: c.ttl_seconds,
    status: statusOf(c),
    created_at: iso(c.created_at),
    expires_at: iso(c.expires_at),
    revoked_at: iso(c.revoked_at),
    revoked_reason: c.revoked_at ? (c.revoked_reason ?? 'revoked') : null,
    audit_genesis_hash: c.genesis_hash,
    audit_head_hash: c.head_hash,
    audit_events: c.head_seq,
    queries: c.queries,
    bytes_egressed: c.bytes_egressed,
    last_query_at: iso(c.last_query_at),
  };
}

export interface CreateConnection {
  readonly target_id: string;
  readonly scopes: readonly string[];
  readonly tier?: string | undefined;
  readonly ttl_seconds?: number | undefined;
}

export function resolveTarget(catalogue: Catalogue, targetId: string): Target {
  const target = catalogue.target(targetId);
  if (!target) {
    throw new ApiError('not_found', `unknown target ${JSON.stringify(targetId)}; list targets with GET /v1/connections/targets`, {
      field: 'target_id',
      targets: catalogue.targets.map((t) => t.id),
    });
  }
  return target;
}

export async function createConnection(store: Store, catalogue: Catalogue, orgId: string, req: CreateConnection): Promise<ConnectionRow> {
  const target = resolveTarget(catalogue, req.target_id);
  const parsed: ParsedScopes = parseScopes(target, req.scopes);
  const tier = req.tier ?? target.tiers[0] ?? 'container';
  if (!target.tiers.includes(tier)) {
    throw new ApiError('invalid_request', `tier ${JSON.stringify(tier)} is not offered by ${target.id}; its tiers: ${target.tiers.join(', ')}`, {
      field: 'tier',
      allowed: target.tiers,
      tiers: target.tiers,
    });
  }
  const ttl = req.ttl_seconds ?? TTL_DEFAULT;
  if (!Number.isInteger(ttl) || ttl < TTL_MIN || ttl > TTL_MAX) {
    throw new ApiError('invalid_request', `ttl_seconds must be a whole number from ${TTL_MIN} to ${TTL_MAX} (7 days); default ${TTL_DEFAULT}`, { field: 'ttl_seconds' });
  }
  if (parsed.relay !== undefined) {
    const [relay] = await store.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM relays WHERE id = $1 AND org_id = $2', [parsed.relay, orgId]);
    if (!relay) throw new ApiError('not_found', `relay ${JSON.stringify(parsed.relay)} not found; list yours with GET /v1/relays`, { field: 'scopes' });
    if (relay.revoked_at) throw new ApiError('invalid_scope', `relay ${parsed.relay} was deleted; enroll a new one`, { field: 'scopes' });
  }
  if (target.live?.database && parsed.read === 'all') {
    throw new ApiError('invalid_scope', `a ${target.id} connection names its tables: read:<table> or read:<schema>.<table> (read:* is not available on databases)`, { field: 'scopes' });
  }
  if (target.credential_kind && !(await hasCredential(store, orgId, target.credential_kind))) {
    throw new ApiError('invalid_request', `the target ${target.id} needs a ${target.credential_kind} credential, and this organization has none; ${registerHint(target.credential_kind)}`, {
      field: 'target_id',
      reason: 'credential_missing',
      connector_kind: target.credential_kind,
    });
  }
  const id = newId('conn');
  const created = new Date();
  const createdAt = created.toISOString();
  const expiresAt = new Date(created.getTime() + ttl * 1000).toISOString();
  const scopes = [...parsed.normalized];
  const genesis = genesisHash({ connection_id: id, org_id: orgId, target_id: target.id, scopes, created_at: createdAt });
  // the connection and its connection.created webhook commit together
  await store.tx(async (sql) => {
    if (parsed.relay !== undefined) {
      // read again under a share lock on the relay's row: a deletion committed since the check above
      // is seen here, and one that comes after waits for this insert, then revokes the connection with
      // the others (relays/index.ts deleteRelay); without it, a connection created while its relay
      // was deleted stayed active
      const [relay] = await sql.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM relays WHERE id = $1 AND org_id = $2 FOR SHARE', [parsed.relay, orgId]);
      if (!relay || relay.revoked_at) throw new ApiError('invalid_scope', `relay ${parsed.relay} was deleted; enroll a new one`, { field: 'scopes' });
    }
    await sql.query(
      `INSERT INTO connections (id, org_id, target_id, scopes, tier, ttl_seconds, created_at, expires_at, genesis_hash, head_hash)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
      [id, orgId, target.id, JSON.stringify(scopes), tier, ttl, createdAt, expiresAt, genesis],
    );
    await enqueueLifecycle(sql, 'connection.created', { connectionId: id, orgId, targetId: target.id, at: created });
  });
  return getConnection(store, orgId, id);
}

export const QUERY_CACHE_MAX = 10_000;

/**
 * Connections as the query path needs them, by id (one app's, made by buildApp; least recently
 * used past `QUERY_CACHE_MAX`): what it reads of a connection (target, scopes, expiry,
 * organization) never changes, so only its revocation can be stale here. A revocation made through
 * this app drops the entry; every query's reservation reads revocation fresh in the store (billing
 * `reserve`) and its settlement again under the connection's row lock, so a connection revoked
 * anywhere runs nothing more and answers no rows.
 */
export class ConnectionCache {
  private readonly rows = new Map<string, ConnectionRow>();

  constructor(private readonly store: Store) {}

  /** The connection for a query: `cached` when read from this cache (its revocation may be stale). */
  async forQuery(orgId: string, id: string): Promise<{ readonly row: ConnectionRow; readonly cached: boolean }> {
    const hit = this.rows.get(id);
    if (hit && hit.org_id === orgId) {
      this.rows.delete(id);
      this.rows.set(id, hit);
      return { row: hit, cached: true };
    }
    const row = await getConnection(this.store, orgId, id);
    if (!row.revoked_at) {
      this.rows.set(id, row);
      if (this.rows.size > QUERY_CACHE_MAX) this.rows.delete(this.rows.keys().next().value as string);
    }
    return { row, cached: false };
  }

  /** The connection is being revoked: read it fresh from now on. */
  drop(id: string): void {
    this.rows.delete(id);
  }
}

export async function getConnection(store: Store, orgId: string, id: string): Promise<ConnectionRow> {
  const rows = await store.query<ConnectionRow>('SELECT * FROM connections WHERE id = $1 AND org_id = $2', [id, orgId]);
  const row = rows[0];
  if (!row) throw new ApiError('not_found', `connection ${JSON.stringify(id)} not found; list yours with GET /v1/connections`);
  return row;
}

export interface ListOptions {
  readonly status?: ConnectionStatus | undefined;
  readonly limit: number;
  /**
   * connections created before this cursor (exclusive), for paging: a `next_cursor` of this list,
   * the id of one of the organization's connections; anything else is refused (400), not read as
   * the end of the list
   */
  readonly before?: string | undefined;
}

export async function listConnections(store: Store, orgId: string, o: ListOptions): Promise<{ connections: ConnectionRow[]; next_cursor: string | null }> {
  const now = new Date().toISOString();
  const params: unknown[] = [orgId];
  let where = 'org_id = $1';
  if (o.before !== undefined) {
    const known = await store.query('SELECT 1 FROM connections WHERE id = $1 AND org_id = $2', [o.before, orgId]);
    if (known.length === 0) {
      const problem = 'is not a next_cursor of this list';
      throw new ApiError('invalid_request', `query parameter "cursor" ${problem}; send the next_cursor of the previous page, or leave it out for the first page`, { field: 'cursor', problem, in: 'query' });
    }
    params.push(o.before);
    where += ` AND (created_at, id) < (SELECT created_at, id FROM connections WHERE id = $${params.length} AND org_id = $1)`;
  }
  if (o.status === 'active') where += ` AND revoked_at IS NULL AND expires_at > '${now}'`;
  if (o.status === 'expired') where += ` AND revoked_at IS NULL AND expires_at <= '${now}'`;
  if (o.status === 'revoked') where += ' AND revoked_at IS NOT NULL';
  params.push(o.limit + 1);
  const rows = await store.query<ConnectionRow>(`SELECT * FROM connections WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`, params);
  const more = rows.length > o.limit;
  const page = rows.slice(0, o.limit);
  return { connections: page, next_cursor: more ? (page[page.length - 1]?.id ?? null) : null };
}

export async function revokeConnection(store: Store, cache: ConnectionCache, orgId: string, id: string, by: string): Promise<ConnectionRow> {
  cache.drop(id);
  await store.tx(async (sql) => {
    const rows = await sql.query<{ revoked_at: Date | null; target_id: string }>('SELECT revoked_at, target_id FROM connections WHERE id = $1 AND org_id = $2 FOR UPDATE', [id, orgId]);
    const row = rows[0];
    if (!row) throw new ApiError('not_found', `connection ${JSON.stringify(id)} not found; list yours with GET /v1/connections`);
    if (row.revoked_at) return; // revoking twice changes nothing
    const at = new Date().toISOString();
    await sql.query("UPDATE connections SET revoked_at = $2, revoked_reason = 'revoked' WHERE id = $1", [id, at]);
    await appendEvent(sql, id, { type: 'connection.revoked', org_id: orgId, by });
    await enqueueLifecycle(sql, 'connection.revoked', { connectionId: id, orgId, targetId: row.target_id, at: new Date(at) });
  });
  cache.drop(id); // again: a query may have cached it while the revocation committed
  return getConnection(store, orgId, id);
}

/**
 * Its relay is being deleted, in the caller's transaction (relays/index.ts deleteRelay): every
 * connection through relay `relayId` that is still active is revoked at `at`, as a revocation
 * does (revoked_at, a `connection.revoked` audit event and webhook), with the reason
 * `relay_deleted`. Connections already revoked or expired stay as they are. Returns the ids
 * revoked; the caller drops them from its ConnectionCache once committed.
 */
export async function revokeRelayConnections(sql: Sql, orgId: string, relayId: string, by: string | undefined, at: Date): Promise<string[]> {
  // locked in id order, so two transactions that each lock several of them cannot deadlock (a settlement locks one)
  const rows = await sql.query<{ id: string; target_id: string }>(
    `SELECT id, target_id FROM connections
      WHERE org_id = $1 AND target_id = 'postgres-relay' AND scopes @> jsonb_build_array('relay:' || $2::text) AND revoked_at IS NULL AND expires_at > $3
      ORDER BY id FOR UPDATE`,
    [orgId, relayId, at.toISOString()],
  );
  // a few statements whatever their number (one each held the store for seconds with thousands)
  const ids = rows.map((c) => c.id);
  if (ids.length === 0) return ids;
  await sql.query("UPDATE connections SET revoked_at = $2, revoked_reason = 'relay_deleted' WHERE id = ANY($1::text[])", [ids, at.toISOString()]);
  await appendPendingMany(
    sql,
    ids.map((id) => new PendingEvent(id, { type: 'connection.revoked', org_id: orgId, ...(by ? { by } : {}), reason: 'relay_deleted', relay_id: relayId })),
  );
  await enqueueLifecycleMany(sql, 'connection.revoked', orgId, rows.map((c) => ({ connectionId: c.id, targetId: c.target_id })), at);
  return ids;
}

/** Throws 410 for a connection that can no longer be used. */
export function assertUsable(c: ConnectionRow): void {
  const status = statusOf(c);
  if (status === 'revoked' && c.revoked_reason === 'relay_deleted') {
    const relay = c.scopes.find((s) => s.startsWith('relay:'))?.slice('relay:'.length);
    throw new ApiError(
      'connection_revoked',
      `connection ${c.id} was revoked at ${iso(c.revoked_at)}: its relay ${relay ?? ''} was deleted; enroll a relay and open a new connection with POST /v1/connections`,
      { cause: 'relay_deleted', ...(relay ? { relay_id: relay } : {}) },
    );
  }
  if (status === 'revoked') {
    throw new ApiError('connection_revoked', `connection ${c.id} was revoked at ${iso(c.revoked_at)}; open a new one with POST /v1/connections`);
  }
  if (status === 'expired') {
    throw new ApiError('connection_expired', `connection ${c.id} expired at ${iso(c.expires_at)} (ttl_seconds ${c.ttl_seconds}); open a new one with POST /v1/connections`);
  }
}
