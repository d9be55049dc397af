/**
 * The relay lifecycle (docs/relay.md, docs/api.md): single-use enrollment tokens (hashed at
 * rest), registration of a relay from a token and a CSR (the key never leaves the relay's
 * machine), renewal and rotation with an overlap window, deletion (every certificate revoked),
 * and the revocation check the tunnel listener runs at every handshake. Every lifecycle event is
 * recorded in `relay_events`.
 */
import { createHash, randomBytes, X509Certificate } from 'node:crypto';
import { lackingRelayFeatures, TunnelRefusal } from '../../protocol/relay-contract.js';
import { newId } from '../accounts/index.js';
import { revokeRelayConnections } from '../connections/index.js';
import { ApiError } from '../errors.js';
import type { Sql, Store } from '../store/index.js';

export const ENROLL_TOKEN_PREFIX = 'svc_enroll_';
const TOKEN_RE = /^svc_enroll_[A-Za-z0-9_-]{43}$/;

/** What the control plane's CA does for relays (bound to pki/ in ./ca.ts). */
export interface RelayCa {
  readonly certPem: string;
  /** Issue a client certificate for `identity` from a CSR; throws a coded error for a bad CSR. */
  issueRelayCert(csrPem: string, identity: { relayId: string; orgId: string }, validityDays: number): IssuedCert;
}

export interface IssuedCert {
  readonly certPem: string;
  /** lower-case hex, no colons */
  readonly serial: string;
  /** SHA-256 of the DER, lower-case hex, no colons */
  readonly fingerprint: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
}

export interface RelayOptions {
  readonly tunnelUrl: string;
  readonly certValidityDays: number;
  /** how long a replaced certificate stays valid, so a relay can switch without dropping queries */
  readonly overlapMs: number;
  readonly tokenTtlSeconds: number;
  /** told of each certificate issued, once its transaction has committed (GET /metrics counts them) */
  readonly issued?: (event: CertificateEvent) => void;
}

/** the relay event that records a certificate's issue (GET /v1/relays/{relay_id} lists them) */
export type CertificateEvent = 'relay.registered' | 'certificate.renewed' | 'certificate.rotated';

export const RELAY_DEFAULTS = { certValidityDays: 30, overlapMs: 24 * 3600_000, tokenTtlSeconds: 3600 } as const;

/**
 * Most renewals a relay may make itself (POST /v1/relay/renew) within one certificate lifetime.
 * It renews at about half the lifetime, so it needs two or three; every certificate is signed in
 * the control plane's process (a few milliseconds of its event loop) and kept, so a hostile relay
 * renewing in a loop would take the control plane's time and grow its list without end. Operators'
 * renew and rotate-cert are counted apart (MAX_OPERATOR_REISSUES_PER_DAY).
 */
export const MAX_RENEWALS_PER_LIFETIME = 4;
/**
 * Most certificates operators may have issued for one relay in a day through the agent-key
 * endpoints (POST /v1/relays/{id}/renew, /rotate-cert). Each is signed and kept, and the API's
 * per-key rate alone let one key add a hundred a second to one relay's list.
 */
export const MAX_OPERATOR_REISSUES_PER_DAY = 24;
const DAY_MS = 86_400_000;

function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

function keyFingerprint(certPem: string): string {
  const spki = new X509Certificate(certPem).publicKey.export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(spki).digest('hex');
}

async function event(sql: Sql, orgId: string, relayId: string | null, kind: string, detail: Record<string, unknown> = {}): Promise<void> {
  await sql.query('INSERT INTO relay_events (relay_id, org_id, kind, at, detail) VALUES ($1, $2, $3, $4, $5)', [relayId, orgId, kind, new Date().toISOString(), JSON.stringify(detail)]);
}

export async function createEnrollToken(store: Store, orgId: string, o: { ttlSeconds: number; name?: string | undefined }): Promise<{ token: string; expires_at: string }> {
  const token = ENROLL_TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const now = new Date();
  const expires = new Date(now.getTime() + o.ttlSeconds * 1000);
  await store.tx(async (sql) => {
    await sql.query('INSERT INTO relay_enroll_tokens (token_hash, org_id, name, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)', [
      hashToken(token),
      orgId,
      o.name ?? null,
      now.toISOString(),
      expires.toISOString(),
    ]);
    await event(sql, orgId, null, 'enroll_token.created', { expires_at: expires.toISOString() });
  });
  return { token, expires_at: expires.toISOString() };
}

interface CertRow {
  serial: string;
  fingerprint: string;
  key_fingerprint: string;
  not_before: Date;
  not_after: Date;
  issued_at: Date;
  superseded_at: Date | null;
  overlap_until: Date | null;
  revoked_at: Date | null;
}

interface RelayRow {
  id: string;
  org_id: string;
  name: string;
  created_at: Date;
  revoked_at: Date | null;
  last_seen_at: Date | null;
  version: string | null;
  /** the features its last tunnel negotiated (null: none recorded yet) */
  features: string[] | null;
  /** a replica holds its tunnel under a live lease (tunnel/leases.ts) */
  tunnel_live?: boolean;
}

/** whether a replica sharing the store holds the relay's tunnel under a live lease */
const TUNNEL_LIVE = '(r.tunnel_until IS NOT NULL AND r.tunnel_until > now()) AS tunnel_live';

async function insertCert(sql: Sql, relayId: string, cert: IssuedCert): Promise<void> {
  await sql.query(
    'INSERT INTO relay_certificates (serial, fingerprint, key_fingerprint, relay_id, not_before, not_after, issued_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [cert.serial, cert.fingerprint, keyFingerprint(cert.certPem), relayId, cert.notBefore.toISOString(), cert.notAfter.toISOString(), new Date().toISOString()],
  );
}

function issue(ca: RelayCa, csrPem: string, relayId: string, orgId: string, days: number): IssuedCert {
  try {
    return ca.issueRelayCert(csrPem, { relayId, orgId }, days);
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown };
    throw new ApiError('invalid_request', `csr_pem: ${typeof e.message === 'string' ? e.message : 'not a valid certificate signing request'}`, {
      field: 'csr_pem',
      ...(typeof e.code === 'string' ? { reason: e.code } : {}),
    });
  }
}

export interface Registered {
  readonly relay_id: string;
  readonly name: string;
  readonly certificate_pem: string;
  readonly ca_certificate_pem: string;
  readonly tunnel_url: string;
  readonly expires_at: string;
  readonly serial: string;
}

/**
 * Register a relay: the token is claimed atomically (of two registrations racing with one
 * token, exactly one wins), in one transaction with the certificate and the relay; a bad CSR
 * rolls it all back and leaves the token usable.
 */
export async function register(store: Store, ca: RelayCa, o: RelayOptions, req: { enroll_token: string; csr_pem: string; name?: string | undefined }): Promise<Registered> {
  if (!TOKEN_RE.test(req.enroll_token)) {
    throw new ApiError('unauthorized', 'unknown enrollment token; get one with POST /v1/relays/enroll-token (agent key)', { field: 'enroll_token' });
  }
  const hash = hashToken(req.enroll_token);
  const registered = await store.tx(async (sql) => {
    const now = new Date();
    const claimed = await sql.query<{ org_id: string; name: string | null }>(
      'UPDATE relay_enroll_tokens SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 RETURNING org_id, name',
      [hash, now.toISOString()],
    );
    const token = claimed[0];
    if (!token) {
      const [row] = await sql.query<{ used_at: Date | null; expires_at: Date }>('SELECT used_at, expires_at FROM relay_enroll_tokens WHERE token_hash = $1', [hash]);
      if (!row) throw new ApiError('unauthorized', 'unknown enrollment token; get one with POST /v1/relays/enroll-token (agent key)', { field: 'enroll_token' });
      if (row.used_at) {
        throw new ApiError('conflict', `this enrollment token was already used at ${new Date(row.used_at).toISOString()}; tokens are single-use: get a new one with POST /v1/relays/enroll-token`, { field: 'enroll_token' });
      }
      throw new ApiError('unauthorized', `this enrollment token expired at ${new Date(row.expires_at).toISOString()}; get a new one with POST /v1/relays/enroll-token`, { field: 'enroll_token' });
    }
    const relayId = newId('rly');
    const name = req.name ?? token.name ?? relayId;
    const cert = issue(ca, req.csr_pem, relayId, token.org_id, o.certValidityDays);
    await sql.query('INSERT INTO relays (id, org_id, name, created_at) VALUES ($1, $2, $3, $4)', [relayId, token.org_id, name, now.toISOString()]);
    await insertCert(sql, relayId, cert);
    await sql.query('UPDATE relay_enroll_tokens SET relay_id = $2 WHERE token_hash = $1', [hash, relayId]);
    await event(sql, token.org_id, relayId, 'relay.registered', { serial: cert.serial, not_after: cert.notAfter.toISOString() });
    return {
      relay_id: relayId,
      name,
      certificate_pem: cert.certPem,
      ca_certificate_pem: ca.certPem,
      tunnel_url: o.tunnelUrl,
      expires_at: cert.notAfter.toISOString(),
      serial: cert.serial,
    };
  });
  o.issued?.('relay.registered');
  return registered;
}

async function relayOf(sql: Sql | Store, orgId: string, relayId: string): Promise<RelayRow> {
  const [r] = await sql.query<RelayRow>(`SELECT r.*, ${TUNNEL_LIVE} FROM relays r WHERE r.id = $1 AND r.org_id = $2`, [relayId, orgId]);
  if (!r) throw new ApiError('not_found', `relay ${JSON.stringify(relayId)} not found; list yours with GET /v1/relays`);
  return r;
}

export type RelayStatus = 'online' | 'offline' | 'revoked';

export interface RelayRecord {
  readonly relay_id: string;
  readonly name: string;
  readonly status: RelayStatus;
  readonly created_at: string;
  readonly last_seen_at: string | null;
  readonly certificate_expires_at: string | null;
  readonly version: string | null;
  /**
   * its last tunnel lacked a feature the control plane requires (protocol/relay-contract.ts
   * REQUIRED_RELAY_FEATURES): online or not, nothing runs through it until svc-relay is upgraded
   */
  readonly upgrade_required: boolean;
  readonly revoked_at: string | null;
}

/**
 * `online(relayId)`: whether this replica holds the relay's tunnel; a relay is online too while
 * any replica sharing the store holds it under a live lease.
 */
export async function listRelays(store: Store, orgId: string, online: (relayId: string) => boolean = () => false): Promise<RelayRecord[]> {
  const rows = await store.query<RelayRow & { cert_expires: Date | null }>(
    `SELECT r.*, ${TUNNEL_LIVE}, (SELECT max(c.not_after) FROM relay_certificates c WHERE c.relay_id = r.id AND c.revoked_at IS NULL AND c.superseded_at IS NULL) AS cert_expires
       FROM relays r WHERE r.org_id = $1 ORDER BY r.created_at, r.id`,
    [orgId],
  );
  return rows.map((r) => record(r, r.cert_expires, online));
}

function record(r: RelayRow, certExpires: Date | null, online: (relayId: string) => boolean): RelayRecord {
  const iso = (d: Date | null): string | null => (d ? new Date(d).toISOString() : null);
  return {
    relay_id: r.id,
    name: r.name,
    status: r.revoked_at ? 'revoked' : online(r.id) || r.tunnel_live === true ? 'online' : 'offline',
    created_at: new Date(r.created_at).toISOString(),
    last_seen_at: iso(r.last_seen_at),
    certificate_expires_at: iso(certExpires),
    version: r.version,
    upgrade_required: r.features != null && lackingRelayFeatures(r.features).length > 0,
    revoked_at: iso(r.revoked_at),
  };
}

export async function getRelay(store: Store, orgId: string, relayId: string, online: (relayId: string) => boolean = () => false): Promise<RelayRecord & { certificates: unknown[]; events: unknown[] }> {
  const r = await relayOf(store, orgId, relayId);
  const certs = await store.query<CertRow>('SELECT * FROM relay_certificates WHERE relay_id = $1 ORDER BY issued_at', [relayId]);
  const events = await store.query<{ kind: string; at: Date; detail: unknown }>('SELECT kind, at, detail FROM relay_events WHERE relay_id = $1 ORDER BY id', [relayId]);
  const current = certs.filter((c) => !c.revoked_at && !c.superseded_at).map((c) => c.not_after);
  const now = Date.now();
  // a replaced certificate past its overlap window is refused everywhere (checkCertificate): revoked
  const state = (c: CertRow): string =>
    c.revoked_at || (c.superseded_at && c.overlap_until && new Date(c.overlap_until).getTime() <= now) ? 'revoked' : c.superseded_at ? 'superseded' : 'active';
  return {
    ...record(r, current.length ? (current[current.length - 1] as Date) : null, online),
    certificates: certs.map((c) => ({
      serial: c.serial,
      fingerprint: c.fingerprint,
      not_before: new Date(c.not_before).toISOString(),
      not_after: new Date(c.not_after).toISOString(),
      state: state(c),
      // a certificate revoked inside its overlap window stopped being accepted when it was revoked
      overlap_until: c.overlap_until
        ? new Date(c.revoked_at && new Date(c.revoked_at).getTime() < new Date(c.overlap_until).getTime() ? c.revoked_at : c.overlap_until).toISOString()
        : null,
    })),
    events: events.map((e) => ({ kind: e.kind, at: new Date(e.at).toISOString(), detail: e.detail })),
  };
}

/**
 * A renewal authenticated by a certificate that is no longer the relay's current one (replaced by
 * a newer certificate, maybe inside its overlap window): refused, so a key stolen before a
 * rotation cannot obtain a fresh certificate and evict the real relay.
 */
export class CertificateNotCurrentError extends Error {
  readonly reason = TunnelRefusal.CERTIFICATE_SUPERSEDED;
  constructor(serial: string) {
    super(
      `certificate ${serial} was replaced by a newer certificate: only the relay's current certificate can renew (a replaced one still opens the tunnel until its overlap window ends). If this relay did not renew itself, delete it and enroll again`,
    );
    this.name = 'CertificateNotCurrentError';
  }
}

/**
 * Issue a new certificate for a relay. `rotate` requires a new key pair (the CSR's key must differ
 * from every key the relay has used); `renew` may keep the key. The replaced certificates stay
 * valid for the overlap window (or until the new one is seen on the tunnel), then are revoked.
 * `presentedSerial` (the relay renewing itself with its client certificate): that certificate
 * must be the relay's current one at the moment of the renewal, checked in the same transaction
 * that supersedes it (of two renewals racing with one certificate, one wins), else
 * CertificateNotCurrentError.
 */
export async function reissue(
  store: Store,
  ca: RelayCa,
  o: RelayOptions,
  orgId: string,
  relayId: string,
  csrPem: string,
  kind: 'renew' | 'rotate',
  opts: { presentedSerial?: string } = {},
): Promise<Registered> {
  const issuedAs: CertificateEvent = kind === 'renew' ? 'certificate.renewed' : 'certificate.rotated';
  const reissued = await store.tx(async (sql) => {
    const r = await relayOf(sql, orgId, relayId);
    if (r.revoked_at) throw new ApiError('conflict', `relay ${relayId} was deleted; enroll a new relay with a new token`);
    const now = new Date();
    const byRelay = opts.presentedSerial !== undefined;
    if (byRelay) await renewalsAllowed(sql, relayId, o.certValidityDays * DAY_MS, now);
    else await operatorReissuesAllowed(sql, relayId, now);
    const overlapUntil = new Date(now.getTime() + o.overlapMs).toISOString();
    const superseded = await sql.query<{ serial: string }>(
      'UPDATE relay_certificates SET superseded_at = $2, overlap_until = $3 WHERE relay_id = $1 AND revoked_at IS NULL AND superseded_at IS NULL RETURNING serial',
      [relayId, now.toISOString(), overlapUntil],
    );
    if (opts.presentedSerial !== undefined && !superseded.some((c) => c.serial === opts.presentedSerial)) throw new CertificateNotCurrentError(opts.presentedSerial);
    const cert = issue(ca, csrPem, relayId, orgId, o.certValidityDays);
    if (kind === 'rotate') {
      const used = await sql.query('SELECT 1 FROM relay_certificates WHERE relay_id = $1 AND key_fingerprint = $2', [relayId, keyFingerprint(cert.certPem)]);
      if (used.length > 0) {
        throw new ApiError(
          'invalid_request',
          opts.presentedSerial !== undefined
            ? 'a renewal needs a CSR for a new key pair; this key was used before by this relay'
            : 'rotate-cert needs a CSR for a new key pair; this key was used before (use renew to keep the key)',
          { field: 'csr_pem' },
        );
      }
    }
    await insertCert(sql, relayId, cert);
    await event(sql, orgId, relayId, issuedAs, {
      serial: cert.serial,
      not_after: cert.notAfter.toISOString(),
      overlap_until: overlapUntil,
      ...(byRelay ? { by: 'relay' } : {}),
    });
    return {
      relay_id: relayId,
      name: r.name,
      certificate_pem: cert.certPem,
      ca_certificate_pem: ca.certPem,
      tunnel_url: o.tunnelUrl,
      expires_at: cert.notAfter.toISOString(),
      serial: cert.serial,
    };
  });
  o.issued?.(issuedAs);
  return reissued;
}

/** Refuses (429, Retry-After) a relay's own renewal past MAX_RENEWALS_PER_LIFETIME within the last `lifetimeMs`. */
async function renewalsAllowed(sql: Sql, relayId: string, lifetimeMs: number, now: Date): Promise<void> {
  const over = await reissuedPast(sql, relayId, "kind = 'certificate.rotated' AND detail->>'by' = 'relay'", lifetimeMs, MAX_RENEWALS_PER_LIFETIME, now);
  if (over === null) return;
  throw tooManyReissues(
    relayId,
    `relay ${relayId} renewed its certificate ${over.n} times within one certificate lifetime, more than it needs (it renews at about half the lifetime); retry in ${over.seconds} s. If this relay did not renew itself, its key may have leaked: delete the relay and enroll a new one`,
    over.seconds,
  );
}

/**
 * Refuses (429, Retry-After) an operator's renew or rotate-cert past MAX_OPERATOR_REISSUES_PER_DAY
 * for this relay. The relay's row is locked first, so renewals sent at once are counted one after
 * another (a relay's own are already: only its current certificate may renew).
 */
async function operatorReissuesAllowed(sql: Sql, relayId: string, now: Date): Promise<void> {
  // NO KEY UPDATE: conflicts with itself, not with the KEY SHARE a relay's own renewal takes here
  // for its new certificate's foreign key (FOR UPDATE deadlocked with it: test/store/relay-reissue-lock)
  await sql.query('SELECT 1 FROM relays WHERE id = $1 FOR NO KEY UPDATE', [relayId]);
  const over = await reissuedPast(sql, relayId, "kind IN ('certificate.renewed', 'certificate.rotated') AND detail->>'by' IS DISTINCT FROM 'relay'", DAY_MS, MAX_OPERATOR_REISSUES_PER_DAY, now);
  if (over === null) return;
  throw tooManyReissues(
    relayId,
    `relay ${relayId}'s certificate was renewed or rotated ${over.n} times through the API in the last 24 hours, the most allowed; retry in ${over.seconds} s`,
    over.seconds,
  );
}

/** How many of the relay's events matching `which` happened within `windowMs`, and when the oldest leaves it, when `max` or more did; else null. */
async function reissuedPast(sql: Sql, relayId: string, which: string, windowMs: number, max: number, now: Date): Promise<{ n: number; seconds: number } | null> {
  const [row] = await sql.query<{ n: number; oldest: Date | null }>(`SELECT count(*)::int AS n, min(at) AS oldest FROM relay_events WHERE relay_id = $1 AND ${which} AND at > $2`, [
    relayId,
    new Date(now.getTime() - windowMs).toISOString(),
  ]);
  if (!row || row.n < max || !row.oldest) return null;
  return { n: row.n, seconds: Math.max(1, Math.ceil((new Date(row.oldest).getTime() + windowMs - now.getTime()) / 1000)) };
}

function tooManyReissues(relayId: string, message: string, seconds: number): ApiError {
  return new ApiError('rate_limited', message, { relay_id: relayId, retry_after_seconds: seconds }, { 'Retry-After': String(seconds) });
}

/**
 * Delete a relay: every certificate of it is revoked at once, and so is every connection through
 * it that is still active (connections/index.ts revokeRelayConnections: revoked_at, reason
 * `relay_deleted`, `connection.revoked` in its audit chain and to webhooks), all in one
 * transaction, so no replica sharing the store ever shows such a connection active. Returns the
 * connections revoked now (none when the relay was deleted already); `by` is the agent key that
 * deleted it.
 */
export async function deleteRelay(store: Store, orgId: string, relayId: string, by?: string): Promise<{ revokedConnections: string[] }> {
  return store.tx(async (sql) => {
    await relayOf(sql, orgId, relayId);
    const at = new Date();
    const now = at.toISOString();
    // of two deletions racing, one marks the relay (the other waits for its row lock, then finds it deleted)
    const marked = await sql.query('UPDATE relays SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING id', [relayId, now]);
    if (marked.length === 0) return { revokedConnections: [] };
    const revoked = await sql.query<{ serial: string }>("UPDATE relay_certificates SET revoked_at = $2, revoked_reason = 'relay deleted' WHERE relay_id = $1 AND revoked_at IS NULL RETURNING serial", [relayId, now]);
    const connections = await revokeRelayConnections(sql, orgId, relayId, by, at);
    await event(sql, orgId, relayId, 'relay.deleted', { revoked_serials: revoked.map((c) => c.serial), revoked_connections: connections });
    return { revokedConnections: connections };
  });
}

/** `current`: not replaced by a newer certificate (only the current one may renew; a replaced one inside its overlap window may still open a tunnel) */
export type CertificateVerdict = { ok: true; relayId: string; orgId: string; current: boolean } | { ok: false; reason: 'unknown' | 'revoked' | 'superseded' | 'relay_deleted' };

/**
 * The deny-list check the tunnel listener runs at every handshake: a certificate is accepted only
 * if we issued it, it is not revoked, its relay is not deleted, and (if replaced) its overlap
 * window has not passed. The renewal endpoint further requires `current`.
 */
export async function checkCertificate(store: Store, serial: string, fingerprint: string, now = new Date()): Promise<CertificateVerdict> {
  const [c] = await store.query<CertRow & { relay_id: string; org_id: string; relay_revoked_at: Date | null }>(
    `SELECT c.*, r.org_id, r.revoked_at AS relay_revoked_at FROM relay_certificates c JOIN relays r ON r.id = c.relay_id WHERE c.serial = $1 AND c.fingerprint = $2`,
    [serial, fingerprint],
  );
  if (!c) return { ok: false, reason: 'unknown' };
  if (c.relay_revoked_at) return { ok: false, reason: 'relay_deleted' };
  if (c.revoked_at) return { ok: false, reason: 'revoked' };
  if (c.overlap_until && new Date(c.overlap_until).getTime() <= now.getTime()) return { ok: false, reason: 'superseded' };
  return { ok: true, relayId: c.relay_id, orgId: c.org_id, current: c.superseded_at === null };
}

/**
 * The tunnel saw `serial` in use: the certificates it replaced are revoked now (the overlap
 * window exists only until the new certificate is in use).
 */
export async function certificateInUse(store: Store, serial: string): Promise<number> {
  return store.tx(async (sql) => {
    const [c] = await sql.query<{ relay_id: string; org_id: string }>('SELECT c.relay_id, r.org_id FROM relay_certificates c JOIN relays r ON r.id = c.relay_id WHERE c.serial = $1', [serial]);
    if (!c) return 0;
    const now = new Date().toISOString();
    const revoked = await sql.query<{ serial: string }>(
      "UPDATE relay_certificates SET revoked_at = $3, revoked_reason = 'replaced' WHERE relay_id = $1 AND serial <> $2 AND superseded_at IS NOT NULL AND revoked_at IS NULL RETURNING serial",
      [c.relay_id, serial, now],
    );
    if (revoked.length > 0) await event(sql, c.org_id, c.relay_id, 'certificate.replaced', { in_use: serial, revoked_serials: revoked.map((r) => r.serial) });
    return revoked.length;
  });
}
