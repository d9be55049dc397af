/**
 * Which replica holds a relay's tunnel, kept in the store so every replica sharing it gives one
 * answer (issue #14's "status is one truth") and can find the replica to forward a relay query
 * to. The replica whose tunnel completed HELLO last holds the lease (`relays.tunnel_replica`,
 * `tunnel_address`, `tunnel_until`); it renews the lease and `last_seen_at` every
 * {@link HEARTBEAT_MS} while the tunnel lives, and gives it up when the tunnel closes. A replica
 * that dies stops renewing: its leases lapse after {@link LEASE_MS} and the relay shows offline
 * until it reconnects through another replica.
 *
 * The same beat carries decisions made elsewhere to the tunnels held here, within a beat: a relay
 * deleted through another replica, or a certificate revoked there, closes its tunnel (the relay is
 * told not to come back); a certificate that expired, or was replaced and is past its overlap
 * window, drains its tunnel (the handshake would refuse it now); a lease taken by another replica
 * (the relay connected again through the balancer, e.g. with a renewed certificate) lets this
 * replica's tunnel drain its running streams.
 */
import { TunnelDrain, TunnelRevocation } from '../../protocol/relay-contract.js';
import type { Store } from '../store/index.js';
import type { LiveTunnel, TunnelRegistry } from './index.js';

/** how long a lease lasts without renewal */
export const LEASE_MS = 5000;
/** how often the holder renews its leases (and reads what other replicas decided) */
export const HEARTBEAT_MS = 500;

export interface LeaseLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/** The replica holding a relay's tunnel, as the store says. */
export interface LeaseHolder {
  readonly replicaId: string;
  /** host:port where that replica's tunnel listener answers other replicas */
  readonly address: string;
}

const BEAT = `WITH t(id, serial) AS (SELECT * FROM unnest($1::text[], $2::text[])),
  kept AS (
    UPDATE relays r SET tunnel_until = now() + make_interval(secs => $4), last_seen_at = now()
      FROM t WHERE r.id = t.id AND r.tunnel_replica = $3 AND r.revoked_at IS NULL
      RETURNING r.id)
  SELECT t.id, t.serial, r.revoked_at IS NOT NULL OR r.id IS NULL AS relay_gone, r.tunnel_replica AS holder,
         coalesce(r.tunnel_until > now(), false) AS holder_live, r.tunnel_since AS holder_since,
         (SELECT c.revoked_at IS NOT NULL AND c.revoked_reason IS DISTINCT FROM 'replaced' FROM relay_certificates c WHERE c.serial = t.serial) AS cert_revoked,
         (SELECT c.not_after <= $5::timestamptz OR (c.superseded_at IS NOT NULL AND c.overlap_until <= $5::timestamptz)
            FROM relay_certificates c WHERE c.serial = t.serial) AS cert_lapsed,
         t.id IN (SELECT id FROM kept) AS kept
    FROM t LEFT JOIN relays r ON r.id = t.id`;

/** The default address other replicas dial: HOST (its loopback when it listens on every address) and the tunnel port. */
export function replicaAddressOf(host: string, port: number): string {
  const h = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return h.includes(':') ? `[${h}]:${port}` : `${h}:${port}`;
}

export class TunnelLeases {
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private stopped = false;
  /** when the store recorded each tunnel's claim (the store's clock); absent: not claimed (yet, or it failed) */
  private readonly since = new WeakMap<LiveTunnel, number>();
  /** tunnels whose claim is on its way to the store */
  private readonly claiming = new WeakSet<LiveTunnel>();

  constructor(
    private readonly store: Store,
    /** this replica's id (random per process) */
    readonly replicaId: string,
    /** where other replicas reach this replica's tunnel listener */
    readonly address: string,
    private readonly registry: TunnelRegistry,
    private readonly log?: LeaseLog,
    /**
     * this process's clock, which the handshake checks a certificate against (pki
     * verifyClientCertificate, relays checkCertificate): whether a tunnel's certificate lapsed is
     * read on it, not on the store's, so the two never disagree
     */
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * The tunnel completed HELLO here: this replica holds the relay's lease from now on (the newest
   * tunnel holds it: a replica whose older tunnel sees a newer claim elsewhere drains its own).
   */
  async claim(t: LiveTunnel, o: { onlyIfHeld?: boolean } = {}): Promise<void> {
    if (this.stopped) return;
    this.claiming.add(t);
    try {
      // onlyIfHeld: a retry for a lease this replica already names, never taken from a newer claim elsewhere meanwhile
      const held = o.onlyIfHeld === true ? ' AND tunnel_replica = $2' : '';
      const [row] = await this.store.query<{ since: Date }>(
        `UPDATE relays SET tunnel_replica = $2, tunnel_address = $3, tunnel_since = clock_timestamp(), tunnel_until = now() + make_interval(secs => $4), last_seen_at = now(), version = coalesce($5, version), features = coalesce($6, features) WHERE id = $1 AND revoked_at IS NULL${held} RETURNING tunnel_since AS since`,
        [t.relayId, this.replicaId, this.address, LEASE_MS / 1000, t.version, t.session.negotiated?.features ?? null],
      );
      if (row) this.since.set(t, new Date(row.since).getTime());
    } finally {
      this.claiming.delete(t);
    }
  }

  /** A tunnel closed here: the lease ends, unless this replica has a newer tunnel of the relay or another replica took it. */
  async release(t: LiveTunnel): Promise<void> {
    if (this.stopped || this.registry.get(t.relayId)) return; // at shutdown stop() gave every lease up at once
    await this.store.query('UPDATE relays SET tunnel_until = NULL, last_seen_at = now() WHERE id = $1 AND tunnel_replica = $2', [t.relayId, this.replicaId]);
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.beating) return; // the store is slow: one beat at a time
      this.beating = this.beat()
        .catch((err: unknown) => this.log?.warn({ err: { message: (err as Error).message } }, 'tunnel lease renewal failed'))
        .finally(() => (this.beating = undefined));
    }, HEARTBEAT_MS);
    this.timer.unref();
  }

  /** Stops renewing and gives up every lease this replica holds (shutdown: its tunnels close next). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.stopped = true;
    await this.beating;
    await this.store
      .query('UPDATE relays SET tunnel_until = NULL, last_seen_at = now() WHERE tunnel_replica = $1 AND tunnel_until IS NOT NULL', [this.replicaId])
      .catch((err: unknown) => this.log?.warn({ err: { message: (err as Error).message } }, 'giving up the tunnel leases failed (they lapse on their own)'));
  }

  /** Renews this replica's leases and applies what the store says about its tunnels. */
  async beat(): Promise<void> {
    const tunnels = this.registry.tunnels();
    if (tunnels.length === 0) return;
    const rows = await this.store.query<{ id: string; serial: string; relay_gone: boolean; holder: string | null; holder_live: boolean; holder_since: Date | null; cert_revoked: boolean | null; cert_lapsed: boolean | null; kept: boolean }>(BEAT, [
      tunnels.map((t) => t.relayId),
      tunnels.map((t) => t.serial),
      this.replicaId,
      LEASE_MS / 1000,
      this.now().toISOString(),
    ]);
    for (const row of rows) {
      const t = tunnels.find((x) => x.relayId === row.id && x.serial === row.serial);
      if (!t || this.registry.get(row.id) !== t || this.stopped) continue; // replaced or closed meanwhile
      if (row.relay_gone) {
        this.log?.info({ relay_id: row.id }, 'relay deleted on another replica: tunnel closed');
        this.registry.disconnect(row.id, TunnelRevocation.RELAY_REVOKED);
        continue;
      }
      if (row.cert_revoked === true) {
        // revoked by an operator (a certificate replaced by a renewal is not: its tunnel drains once the new one holds the lease)
        this.log?.info({ relay_id: row.id, serial: row.serial }, 'relay certificate revoked: tunnel closed');
        this.registry.disconnect(row.id, TunnelRevocation.CERTIFICATE_REVOKED);
        continue;
      }
      if (row.cert_lapsed === true) {
        // the handshake would refuse this certificate now (expired, or replaced and past its overlap
        // window, whether or not its successor was seen on a tunnel and revoked it as 'replaced'):
        // the tunnel does not outlive it. It drains (not closed for good: a relay that renewed
        // itself reconnects with its new certificate; one that cannot is refused at the handshake)
        this.log?.info({ relay_id: row.id, serial: row.serial }, 'relay certificate expired or past its overlap window: tunnel drained');
        this.registry.yieldTunnel(row.id, 'the certificate this tunnel was opened with expired, or was replaced and its overlap window ended: reconnect with the current certificate', TunnelDrain.CERTIFICATE_LAPSED);
        continue;
      }
      if (this.claiming.has(t)) continue;
      if (row.kept) {
        // the lease names this replica, but maybe for an earlier tunnel of the relay: this one's
        // claim failed, so what it negotiated (version, features: upgrade_required) was never
        // written. Claim again (only while the lease is still ours: a newer tunnel elsewhere may
        // have claimed since the renewal); the renewal alone would keep the old tunnel's until a reconnect
        if (!this.since.has(t)) await this.claim(t, { onlyIfHeld: true });
        continue;
      }
      const mine = this.since.get(t);
      const newerElsewhere = row.holder !== null && row.holder !== this.replicaId && row.holder_live && row.holder_since !== null && (mine === undefined || new Date(row.holder_since).getTime() > mine);
      if (newerElsewhere && mine !== undefined) {
        // the relay connected again through another replica (a renewal, or a reconnect): ours finishes its streams
        this.log?.info({ relay_id: row.id, holder: row.holder }, 'relay tunnel now held by another replica: draining this one');
        this.registry.yieldTunnel(row.id, 'the relay connected through another replica');
      } else {
        // the lease lapsed, was given up, is older than this tunnel, or our claim failed: this live tunnel takes it
        await this.claim(t);
      }
    }
  }
}
