/**
 * The durable outbox: receiver configuration, delivery rows (written in the transaction of what
 * caused them), attempts, replay and the organization's chaos profile. Nothing here sends: the
 * worker (worker.ts) claims due rows and attempts them.
 */
import { newId } from '../accounts/index.js';
import { LIVE_TARGETS } from '../catalogue/index.js';
import { ApiError } from '../errors.js';
import { assertPublicUrl, checkUrl, NetError } from '../net/index.js';
import { open, seal, sealedWithPattern, type MasterKey, type MasterKeyRing } from '../secrets/index.js';
import type { Sql, Store } from '../store/index.js';
import { lifecycleResource, type FhirResource, type LifecycleEvent } from './events.js';
import { generateSecret, SECRET_PATTERN, secretHint, standardWebhooksSecret } from './signing.js';

export type Environment = 'sandbox' | 'live';

export interface EnqueueEvent {
  readonly orgId: string;
  readonly connectionId: string | null;
  readonly event: string;
  readonly environment: Environment;
  readonly resource: FhirResource;
  /** more fields of `data` beside `resource` */
  readonly data?: Readonly<Record<string, unknown>>;
}

export interface Enqueued {
  readonly delivery_id: string;
  readonly event: string;
}

/** Does a receiver exist for this organization (the connection's override, else the default)? */
export async function hasEndpoint(sql: Sql, orgId: string, connectionId: string | null): Promise<boolean> {
  const rows = await sql.query('SELECT 1 FROM webhook_endpoints WHERE org_id = $1 AND connection_id IN ($2, $3) LIMIT 1', [orgId, '', connectionId ?? '']);
  return rows.length > 0;
}

/** the envelope, serialized once: these exact bytes are signed and re-sent on every attempt */
function envelope(id: string, e: EnqueueEvent, now: Date): string {
  return JSON.stringify({ id, event: e.event, connection_id: e.connectionId, environment: e.environment, timestamp: now.toISOString(), data: { ...(e.data ?? {}), resource: e.resource } });
}

/**
 * Write one delivery into the outbox, in the caller's transaction: it commits with its cause or
 * not at all. Without any receiver configured there is nothing to deliver to, and nothing is
 * written (undefined), unless `always` (a mock event, which was asked for: its attempts fail with
 * `no_endpoint` until a receiver is configured, and are retried on the same schedule).
 */
export async function enqueue(sql: Sql, e: EnqueueEvent, o: { readonly always?: boolean } = {}): Promise<Enqueued | undefined> {
  if (!o.always && !(await hasEndpoint(sql, e.orgId, e.connectionId))) return undefined;
  const id = newId('dlv', 15);
  const now = new Date();
  const body = envelope(id, e, now);
  await sql.query(
    `INSERT INTO webhook_deliveries (id, org_id, connection_id, event, body, status, created_at, next_attempt_at)
     VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6)`,
    [id, e.orgId, e.connectionId, e.event, body, now.toISOString()],
  );
  return { delivery_id: id, event: e.event };
}

export function environmentOf(targetId: string): Environment {
  return LIVE_TARGETS.some((t) => t.id === targetId) ? 'live' : 'sandbox';
}

/** how many deliveries {@link enqueueLifecycleMany} writes in one statement */
const ENQUEUE_MANY_CHUNK = 500;

/**
 * The same lifecycle event of many connections of one organization, in the caller's transaction:
 * the receivers looked up once and the deliveries written a few hundred a statement, instead of
 * two statements per connection (a relay deleted with thousands of connections).
 */
export async function enqueueLifecycleMany(sql: Sql, event: LifecycleEvent, orgId: string, cs: readonly { readonly connectionId: string; readonly targetId: string }[], at: Date): Promise<Enqueued[]> {
  if (cs.length === 0) return [];
  const endpoints = new Set((await sql.query<{ connection_id: string }>('SELECT DISTINCT connection_id FROM webhook_endpoints WHERE org_id = $1', [orgId])).map((r) => r.connection_id));
  const wanted = cs.filter((c) => endpoints.has('') || endpoints.has(c.connectionId));
  const out: Enqueued[] = [];
  for (let i = 0; i < wanted.length; i += ENQUEUE_MANY_CHUNK) {
    const rows = wanted.slice(i, i + ENQUEUE_MANY_CHUNK).map((c) => {
      const id = newId('dlv', 15);
      const now = new Date();
      const e: EnqueueEvent = { orgId, connectionId: c.connectionId, event, environment: environmentOf(c.targetId), resource: lifecycleResource(event, { connectionId: c.connectionId, orgId, targetId: c.targetId, at }), data: { target_id: c.targetId } };
      return { id, connectionId: c.connectionId, now: now.toISOString(), body: envelope(id, e, now) };
    });
    await sql.query(
      `INSERT INTO webhook_deliveries (id, org_id, connection_id, event, body, status, created_at, next_attempt_at)
       SELECT u.id, $1, u.conn, $2, u.body, 'pending', u.at::timestamptz, u.at::timestamptz FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS u(id, conn, body, at)`,
      [orgId, event, rows.map((r) => r.id), rows.map((r) => r.connectionId), rows.map((r) => r.body), rows.map((r) => r.now)],
    );
    out.push(...rows.map((r) => ({ delivery_id: r.id, event })));
  }
  return out;
}

/** A connection lifecycle event, in the caller's transaction (connections/index.ts). */
export function enqueueLifecycle(sql: Sql, event: LifecycleEvent, c: { connectionId: string; orgId: string; targetId: string; at?: Date }): Promise<Enqueued | undefined> {
  const at = c.at ?? new Date();
  return enqueue(sql, {
    orgId: c.orgId,
    connectionId: c.connectionId,
    event,
    environment: environmentOf(c.targetId),
    resource: lifecycleResource(event, { ...c, at }),
    data: { target_id: c.targetId },
  });
}

// ---------------------------------------------------------------- configuration

export interface EndpointInput {
  readonly url: string;
  readonly secret?: string | undefined;
  readonly connection_id?: string | undefined;
}

const invalid = (field: string, message: string, reason?: string): ApiError => new ApiError('invalid_request', message, { field, ...(reason ? { reason } : {}) });

/**
 * Checks a receiver URL as configuration time can: syntax, scheme, and that it resolves to public
 * addresses only (with `allowPrivate`, SVC_WEBHOOK_ALLOW_PRIVATE, also loopback and private ones;
 * link-local, metadata and reserved addresses never: see net/ssrf.ts).
 */
export async function checkReceiverUrl(url: string, allowPrivate: boolean): Promise<string> {
  try {
    const guard = { allowPrivate: allowPrivate ? ('private-use' as const) : false };
    const u = checkUrl(url, guard);
    await assertPublicUrl(u, guard).catch((err: unknown) => {
      // a name that does not resolve yet is accepted (it is checked again at every attempt); a forbidden answer is not
      if (err instanceof NetError && err.code === 'NET_ERR_DNS') return;
      throw err;
    });
    return u.href;
  } catch (err) {
    if (err instanceof NetError) throw invalid('url', `url refused: ${err.message}`, err.code);
    throw err;
  }
}

/** Associated data binding a sealed receiver secret to its row: a value copied to another row does not open. */
export const endpointSecretContext = (orgId: string, connectionId: string): string => `webhook-secret\n${orgId}\n${connectionId}`;

export async function setEndpoint(store: Store, key: MasterKey, orgId: string, input: EndpointInput, allowPrivate: boolean): Promise<Record<string, unknown>> {
  const url = await checkReceiverUrl(input.url, allowPrivate);
  if (input.secret !== undefined && !SECRET_PATTERN.test(input.secret)) {
    throw invalid('secret', 'secret must be "svcsec_" followed by 24 to 200 visible ASCII characters (omit it to have one generated)');
  }
  const connectionId = input.connection_id ?? '';
  if (connectionId !== '') {
    const rows = await store.query('SELECT 1 FROM connections WHERE id = $1 AND org_id = $2', [connectionId, orgId]);
    if (rows.length === 0) throw new ApiError('not_found', `connection ${JSON.stringify(connectionId)} not found; list yours with GET /v1/connections`, { field: 'connection_id' });
  }
  const generated = input.secret === undefined;
  const secret = input.secret ?? generateSecret();
  const now = new Date().toISOString();
  await store.query(
    `INSERT INTO webhook_endpoints (org_id, connection_id, url, secret_sealed, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)
     ON CONFLICT (org_id, connection_id) DO UPDATE SET url = EXCLUDED.url, secret_sealed = EXCLUDED.secret_sealed, updated_at = EXCLUDED.updated_at`,
    [orgId, connectionId, url, seal(key, secret, endpointSecretContext(orgId, connectionId)), now],
  );
  return {
    level: connectionId === '' ? 'organization' : 'connection',
    connection_id: connectionId === '' ? null : connectionId,
    url,
    // shown once, when we made it; a secret the caller sent is not echoed back
    ...(generated ? { secret, standard_webhooks_secret: standardWebhooksSecret(secret) } : {}),
    secret_hint: secretHint(secret),
    updated_at: now,
  };
}

/**
 * After a master-key rotation: re-seal every receiver secret sealed with another key than the
 * current one (run at start-up, like the credentials' re-seal). A row changed meanwhile (the
 * secret was set again) is left as it is; one no key opens is left for the attempt to report
 * (secret_unavailable). Returns how many were re-sealed. Loads no key when no receiver is stored.
 */
export async function resealEndpointSecrets(store: Store, keys: () => Promise<MasterKeyRing>): Promise<number> {
  const any = await store.query('SELECT 1 FROM webhook_endpoints LIMIT 1');
  if (any.length === 0) return 0; // no key is loaded (or made) for nothing
  const ring = await keys();
  const rows = await store.query<{ org_id: string; connection_id: string; secret_sealed: string }>(
    'SELECT org_id, connection_id, secret_sealed FROM webhook_endpoints WHERE secret_sealed NOT LIKE $1',
    [sealedWithPattern(ring.current)],
  );
  let n = 0;
  for (const r of rows) {
    let plain: Buffer;
    try {
      plain = open(ring.all, r.secret_sealed, endpointSecretContext(r.org_id, r.connection_id));
    } catch {
      continue;
    }
    const updated = await store.query(
      'UPDATE webhook_endpoints SET secret_sealed = $4 WHERE org_id = $1 AND connection_id = $2 AND secret_sealed = $3 RETURNING org_id',
      [r.org_id, r.connection_id, r.secret_sealed, seal(ring.current, plain, endpointSecretContext(r.org_id, r.connection_id))],
    );
    n += updated.length;
  }
  return n;
}

export async function listEndpoints(store: Store, orgId: string): Promise<Record<string, unknown>> {
  const rows = await store.query<{ connection_id: string; url: string; created_at: Date; updated_at: Date }>(
    'SELECT connection_id, url, created_at, updated_at FROM webhook_endpoints WHERE org_id = $1 ORDER BY connection_id',
    [orgId],
  );
  const view = (r: (typeof rows)[number]): Record<string, unknown> => ({ url: r.url, connection_id: r.connection_id || null, created_at: new Date(r.created_at).toISOString(), updated_at: new Date(r.updated_at).toISOString() });
  const def = rows.find((r) => r.connection_id === '');
  return { default: def ? view(def) : null, overrides: rows.filter((r) => r.connection_id !== '').map(view) };
}

export async function deleteEndpoint(store: Store, orgId: string, connectionId: string | undefined): Promise<void> {
  const rows = await store.query('DELETE FROM webhook_endpoints WHERE org_id = $1 AND connection_id = $2 RETURNING 1', [orgId, connectionId ?? '']);
  if (rows.length === 0) throw new ApiError('not_found', connectionId ? `no webhook override for connection ${JSON.stringify(connectionId)}` : 'no organization default webhook is set');
}

// ---------------------------------------------------------------- deliveries

interface DeliveryRow {
  id: string;
  connection_id: string | null;
  event: string;
  status: string;
  attempts: number;
  created_at: Date;
  next_attempt_at: Date | null;
  completed_at: Date | null;
  held_since: Date | null;
  body?: string;
}

interface AttemptRow {
  delivery_id: string;
  attempt: number;
  kind: string;
  started_at: Date;
  duration_ms: number;
  url: string | null;
  status_code: number | null;
  error_class: string | null;
  error_message: string | null;
  response_excerpt: string | null;
  chaos: string | null;
  retry_after_ms: number | null;
}

const iso = (d: Date | null): string | null => (d ? new Date(d).toISOString() : null);

function attemptView(a: AttemptRow): Record<string, unknown> {
  return {
    attempt: a.attempt,
    kind: a.kind,
    at: iso(a.started_at),
    duration_ms: a.duration_ms,
    url: a.url,
    status_code: a.status_code,
    error_class: a.error_class,
    error: a.error_message,
    response_excerpt: a.response_excerpt,
    chaos: a.chaos,
    retry_after_ms: a.retry_after_ms,
  };
}

function deliveryView(d: DeliveryRow, attempts: AttemptRow[]): Record<string, unknown> {
  return {
    delivery_id: d.id,
    event: d.event,
    connection_id: d.connection_id,
    status: d.status,
    created_at: iso(d.created_at),
    next_attempt_at: d.status === 'pending' ? iso(d.next_attempt_at) : null,
    // the sandbox slow profile is holding the next attempt (it started then; it is sent at next_attempt_at)
    chaos_hold_since: d.status === 'pending' ? iso(d.held_since) : null,
    completed_at: iso(d.completed_at),
    attempt_count: d.attempts,
    attempts: attempts.map(attemptView),
    ...(d.body !== undefined ? { envelope: JSON.parse(d.body) as unknown } : {}),
  };
}

async function attemptsOf(store: Store, ids: readonly string[]): Promise<Map<string, AttemptRow[]>> {
  const out = new Map<string, AttemptRow[]>();
  if (ids.length === 0) return out;
  const rows = await store.query<AttemptRow>('SELECT * FROM webhook_attempts WHERE delivery_id = ANY($1::text[]) ORDER BY delivery_id, id', [ids]);
  for (const r of rows) {
    const list = out.get(r.delivery_id) ?? [];
    list.push(r);
    out.set(r.delivery_id, list);
  }
  return out;
}

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;

export async function listDeliveries(
  store: Store,
  orgId: string,
  o: { connectionId?: string | undefined; status?: string | undefined; event?: string | undefined; limit: number },
): Promise<{ deliveries: Record<string, unknown>[] }> {
  const params: unknown[] = [orgId];
  let where = 'org_id = $1';
  if (o.connectionId !== undefined) {
    const owned = await store.query('SELECT 1 FROM connections WHERE id = $1 AND org_id = $2', [o.connectionId, orgId]);
    if (owned.length === 0) throw new ApiError('not_found', `connection ${JSON.stringify(o.connectionId)} not found; list yours with GET /v1/connections`);
    params.push(o.connectionId);
    where += ` AND connection_id = $${params.length}`;
  }
  if (o.status !== undefined) {
    params.push(o.status);
    where += ` AND status = $${params.length}`;
  }
  if (o.event !== undefined) {
    params.push(o.event);
    where += ` AND event = $${params.length}`;
  }
  params.push(o.limit);
  const rows = await store.query<DeliveryRow>(
    `SELECT id, connection_id, event, status, attempts, created_at, next_attempt_at, completed_at, held_since FROM webhook_deliveries WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
    params,
  );
  const attempts = await attemptsOf(store, rows.map((r) => r.id));
  return { deliveries: rows.map((r) => deliveryView(r, attempts.get(r.id) ?? [])) };
}

export async function getDelivery(store: Store, orgId: string, id: string): Promise<Record<string, unknown>> {
  const [row] = await store.query<DeliveryRow>(
    'SELECT id, connection_id, event, status, attempts, created_at, next_attempt_at, completed_at, held_since, body FROM webhook_deliveries WHERE id = $1 AND org_id = $2',
    [id, orgId],
  );
  if (!row) throw new ApiError('not_found', `delivery ${JSON.stringify(id)} not found; list yours with GET /v1/webhooks/deliveries`);
  const attempts = await attemptsOf(store, [row.id]);
  return deliveryView(row, attempts.get(row.id) ?? []);
}

/**
 * Send a delivery again, same id and same bytes, with a fresh retry budget: it becomes due now.
 * Refused (409) while one of its attempts is in flight. `admit` may refuse it (by throwing) in
 * the same transaction, before it is pending again: the sandbox's bound on pending mock events
 * (claims.ts mockReplayAdmission).
 */
export async function replayDelivery(
  store: Store,
  orgId: string,
  id: string,
  admit?: (sql: Sql, delivery: { readonly event: string; readonly status: string }) => Promise<void>,
): Promise<Record<string, unknown>> {
  return store.tx(async (sql) => {
    const [row] = await sql.query<{ status: string; event: string; lease_until: Date | null }>('SELECT status, event, lease_until FROM webhook_deliveries WHERE id = $1 AND org_id = $2 FOR UPDATE', [id, orgId]);
    if (!row) throw new ApiError('not_found', `delivery ${JSON.stringify(id)} not found; list yours with GET /v1/webhooks/deliveries`);
    if (row.lease_until && new Date(row.lease_until).getTime() > Date.now()) {
      throw new ApiError('conflict', `delivery ${id} has an attempt in flight; replay it when that attempt has finished`);
    }
    await admit?.(sql, row);
    const now = new Date().toISOString();
    await sql.query(
      `UPDATE webhook_deliveries SET status = 'pending', run_attempts = 0, next_attempt_at = $2, completed_at = NULL, held_since = NULL WHERE id = $1`,
      [id, now],
    );
    return { delivery_id: id, status: 'pending', next_attempt_at: now };
  });
}

// ---------------------------------------------------------------- chaos

export const CHAOS_MODES = ['off', 'transient_503', 'slow', 'rate_limit'] as const;
export type ChaosMode = (typeof CHAOS_MODES)[number];

export interface ChaosProfile {
  readonly mode: ChaosMode;
  /** transient_503 / rate_limit: how many attempts of each delivery run are faulted (default 2 / 1) */
  readonly failures: number;
  /** rate_limit: the Retry-After the fault carries, seconds (default 2) */
  readonly retry_after_seconds: number;
  /** slow: how long the receiver's answer is held, ms (default 3000; past the timeout it is a timeout) */
  readonly delay_ms: number;
}

export const CHAOS_OFF: ChaosProfile = { mode: 'off', failures: 0, retry_after_seconds: 0, delay_ms: 0 };

export function chaosProfile(input: { mode: ChaosMode; failures?: number | undefined; retry_after_seconds?: number | undefined; delay_ms?: number | undefined }): ChaosProfile {
  return {
    mode: input.mode,
    failures: input.mode === 'off' || input.mode === 'slow' ? 0 : (input.failures ?? (input.mode === 'transient_503' ? 2 : 1)),
    retry_after_seconds: input.mode === 'rate_limit' ? (input.retry_after_seconds ?? 2) : 0,
    delay_ms: input.mode === 'slow' ? (input.delay_ms ?? 3000) : 0,
  };
}

export async function setChaos(store: Store, orgId: string, p: ChaosProfile): Promise<Record<string, unknown>> {
  const now = new Date().toISOString();
  await store.query(
    `INSERT INTO webhook_chaos (org_id, mode, options, updated_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (org_id) DO UPDATE SET mode = EXCLUDED.mode, options = EXCLUDED.options, updated_at = EXCLUDED.updated_at`,
    [orgId, p.mode, JSON.stringify(p), now],
  );
  return { ...p, updated_at: now };
}

export async function getChaos(sql: Sql, orgId: string): Promise<ChaosProfile> {
  const [row] = await sql.query<{ options: ChaosProfile }>('SELECT options FROM webhook_chaos WHERE org_id = $1', [orgId]);
  return row?.options ?? CHAOS_OFF;
}
