/**
 * The tunnel listener: one mutual-TLS WebSocket per relay, on its own port. The TLS handshake
 * accepts only client certificates our CA issued; the upgrade then checks the certificate against
 * the store (revoked, superseded past its overlap, relay deleted) and answers 401/403 with the
 * reason before any WebSocket exists. An accepted relay gets a protocol Session (the control plane
 * opens the streams) and is registered as online once its HELLO arrives; deleting it closes its
 * tunnel at once.
 *
 * The same port answers `POST /v1/relay/renew`: a relay authenticated by its current client
 * certificate (the same checks as the upgrade, same refusal reasons; and it must be the relay's
 * CURRENT certificate: one already replaced by a newer certificate is refused with
 * `certificate_superseded` even inside its overlap window, which exists only so a relay can
 * switch tunnels, never to renew) sends a CSR for a NEW key pair and gets its next certificate
 * (a rotation: the old one stays valid for the overlap window, and is revoked once the new one
 * is seen on a tunnel). The relay then dials a second tunnel with
 * the new certificate; when it is ready it replaces the first, which DRAINS (GOAWAY, its running
 * streams finish) instead of being cut, so a renewal drops no query.
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { WebSocketServer, type WebSocket } from 'ws';
import { issueServerCertificate, tlsServerOptions, verifyClientCertificate, type Ca, type PkiErrorCode } from '../../pki/index.js';
import { DEFAULT_MAX_FRAME_SIZE, Session } from '../../protocol/index.js';
import { lackingRelayFeatures, RELAY_FEATURES, TUNNEL_CLOSES, TunnelDrain, TunnelRefusal, revocationClose, wsTransport, type TunnelRefusalReason, type TunnelRefusalStatus, type TunnelDrainReason, type TunnelRevocationReason } from '../../protocol/relay-contract.js';
import { DEFAULT_TUNNEL_DRAIN_MS } from '../config.js';
import { isApiError } from '../errors.js';
import { relayCa } from '../relays/ca.js';
import { certificateInUse, CertificateNotCurrentError, checkCertificate, reissue, type RelayOptions } from '../relays/index.js';
import type { Store } from '../store/index.js';
import type { TunnelLeases } from './leases.js';
import { FORWARD_PATH, serveForward, type ServeForwarded } from './forward.js';

/** the path on the tunnel port where a relay renews its certificate over mutual TLS */
export const RENEW_PATH = '/v1/relay/renew';

/**
 * The tunnel port is reachable by anyone who can reach a relay's way in, certificate or not: a
 * connection must complete its TLS handshake, and then send its whole request (the upgrade, a
 * renewal, a forward), within this; and a socket that is not (yet) a WebSocket is closed after
 * this long without a byte either way (ws clears the timeout on upgrade: a tunnel has its pings).
 * A relay or replica sends its request at once, and a forward's answer beats every second.
 */
export const TUNNEL_REQUEST_TIMEOUT_MS = 10_000;

export interface LiveTunnel {
  readonly relayId: string;
  readonly orgId: string;
  readonly serial: string;
  readonly session: Session;
  readonly connectedAt: Date;
  version: string | null;
  /** cut the tunnel's socket at once (no close handshake): what a network failure looks like */
  readonly terminate: () => void;
}

export interface TunnelRegistryOptions {
  /** how long a replaced tunnel may drain its running streams before it is closed (default 60 s) */
  readonly drainTimeoutMs?: number;
}

/** Which relays have a live tunnel, and a way to cut one. */
export class TunnelRegistry {
  private readonly live = new Map<string, LiveTunnel>();
  /** replaced tunnels still finishing their streams */
  private readonly draining = new Set<LiveTunnel>();
  readonly drainTimeoutMs: number;

  constructor(o: TunnelRegistryOptions = {}) {
    this.drainTimeoutMs = o.drainTimeoutMs ?? DEFAULT_TUNNEL_DRAIN_MS;
  }

  online(relayId: string): boolean {
    return this.live.has(relayId);
  }

  get(relayId: string): LiveTunnel | undefined {
    return this.live.get(relayId);
  }

  /** the current tunnel of every relay connected here */
  tunnels(): LiveTunnel[] {
    return [...this.live.values()];
  }

  /**
   * The relay's current tunnel drains (no new streams, the running ones finish, closed after
   * drainTimeoutMs at the latest): the relay is now served through another replica.
   */
  yieldTunnel(relayId: string, message: string, why: TunnelDrainReason = TunnelDrain.REPLACED): void {
    const t = this.live.get(relayId);
    if (!t) return;
    this.live.delete(relayId);
    this.drain(t, message, why);
  }

  /** `t` takes no new streams; its running ones finish, then it closes (after drainTimeoutMs at the latest). */
  private drain(t: LiveTunnel, message: string, why: TunnelDrainReason): void {
    this.draining.add(t);
    t.session.closed.then(() => this.draining.delete(t), () => this.draining.delete(t));
    void t.session.drain({ timeoutMs: this.drainTimeoutMs, message, code: why });
  }

  /** tunnels of a relay that were replaced and are still draining */
  drainingOf(relayId: string): LiveTunnel[] {
    return [...this.draining].filter((t) => t.relayId === relayId);
  }

  /**
   * @internal The tunnel becomes the relay's current one. A previous tunnel (the relay switched
   * to a renewed certificate, or reconnected while the old socket lingers) drains: no new streams,
   * the running ones finish, then it closes (at the latest after drainTimeoutMs).
   */
  add(t: LiveTunnel): void {
    const previous = this.live.get(t.relayId);
    this.live.set(t.relayId, t);
    if (!previous || previous === t) return;
    this.drain(previous, 'replaced by a newer connection', TunnelDrain.REPLACED);
  }

  /** @internal */
  remove(t: LiveTunnel): void {
    if (this.live.get(t.relayId) === t) this.live.delete(t.relayId);
    this.draining.delete(t);
  }

  /** Close a relay's tunnels now (deleted or revoked); the reason tells the relay not to come back. */
  disconnect(relayId: string, reason: TunnelRevocationReason): void {
    const t = this.live.get(relayId);
    this.live.delete(relayId);
    const close = revocationClose(reason);
    for (const d of [...(t ? [t] : []), ...this.drainingOf(relayId)]) {
      this.draining.delete(d);
      d.session.close(close.code, close.reason);
    }
  }

  get size(): number {
    return this.live.size;
  }

  /** replaced tunnels still draining */
  get drainingCount(): number {
    return this.draining.size;
  }

  closeAll(): void {
    const close = TUNNEL_CLOSES.shuttingDown;
    for (const t of [...this.live.values(), ...this.draining]) t.session.close(close.code, close.reason);
    this.live.clear();
    this.draining.clear();
  }
}

export interface TunnelOptions {
  readonly host: string;
  readonly port: number;
  /** DNS names and IP addresses the listener's certificate names (what relays dial) */
  readonly dnsNames: readonly string[];
  readonly ipAddresses: readonly string[];
  readonly store: Store;
  readonly ca: Ca;
  /** the registry the API reads (status) and cuts through (delete) */
  readonly registry: TunnelRegistry;
  /** validity and overlap of the certificates `POST /v1/relay/renew` issues */
  readonly relayOptions: RelayOptions;
  readonly log?: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
  /**
   * the store's record of which replica holds each tunnel (leases.ts), made once the listener's
   * port is known; none: this process alone
   */
  readonly leases?: (port: number) => TunnelLeases;
  /** runs relay queries other replicas forward to tunnels held here (forward.ts); none: not served */
  readonly serveForwarded?: ServeForwarded;
}

export interface TunnelListener {
  readonly registry: TunnelRegistry;
  readonly port: number;
  close(): Promise<void>;
}

/** A relay authenticated by its client certificate, or the refusal a relay can act on. */
type Peer = { ok: true; relayId: string; orgId: string; serial: string; current: boolean } | { ok: false; status: TunnelRefusalStatus; reason: TunnelRefusalReason | PkiErrorCode };

/**
 * The full check of the client certificate (issuer signature, validity, usage, our identity, then
 * the store's deny list), shared by the tunnel upgrade and the renewal endpoint so both refuse
 * with the same reasons (e.g. an expired certificate: `certificate_expired: enroll again`).
 */
async function authenticate(store: Store, ca: Ca, socket: TLSSocket): Promise<Peer> {
  const peer = socket.getPeerX509Certificate?.();
  if (!peer) return { ok: false, status: 401, reason: TunnelRefusal.CLIENT_CERTIFICATE_REQUIRED };
  const verdict = verifyClientCertificate(ca, peer, { isRevoked: () => false });
  if (!verdict.ok) return verdict.code === 'PKI_ERR_EXPIRED' ? { ok: false, status: 401, reason: TunnelRefusal.CERTIFICATE_EXPIRED } : { ok: false, status: 403, reason: verdict.code };
  const check = await checkCertificate(store, verdict.identity.serial, verdict.identity.fingerprint256);
  if (!check.ok) {
    const reason = check.reason === 'relay_deleted' ? TunnelRefusal.RELAY_REVOKED : check.reason === 'unknown' ? TunnelRefusal.CERTIFICATE_UNKNOWN : TunnelRefusal.CERTIFICATE_REVOKED;
    return { ok: false, status: 403, reason };
  }
  return { ok: true, relayId: check.relayId, orgId: check.orgId, serial: verdict.identity.serial, current: check.current };
}

function refuse(socket: Duplex, status: TunnelRefusalStatus, reason: string): void {
  const text = status === 401 ? 'Unauthorized' : 'Forbidden';
  socket.end(`HTTP/1.1 ${status} ${text}\r\nconnection: close\r\ncontent-type: text/plain\r\nx-svc-reason: ${reason}\r\ncontent-length: ${reason.length}\r\n\r\n${reason}`);
}

/** a JSON error in the API's shape; `reason` (also in x-svc-reason) is the upgrade's refusal reason */
function sendError(res: ServerResponse, status: number, code: string, message: string, reason?: string, extra: Record<string, string> = {}): void {
  const headers: Record<string, string> = { ...extra, 'content-type': 'application/json', connection: 'close' };
  if (reason !== undefined) headers['x-svc-reason'] = reason;
  res.writeHead(status, headers).end(JSON.stringify({ error: { code, message, ...(reason !== undefined ? { reason } : {}) } }));
}

const MAX_RENEW_BODY = 64 * 1024;

function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_RENEW_BODY) {
        chunks.length = 0; // answered 413; the rest is read and dropped (cut past 16 times the limit)
        if (size > 16 * MAX_RENEW_BODY) req.destroy();
        return resolve(null);
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(size > MAX_RENEW_BODY ? null : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function startTunnelListener(o: TunnelOptions): Promise<TunnelListener> {
  const server = issueServerCertificate(o.ca, { dnsNames: [...o.dnsNames], ipAddresses: [...o.ipAddresses] });
  // The handshake asks for a client certificate but does not end the connection over it: the
  // upgrade handler verifies it fully (issuer signature, validity, usage, our identity, the store's
  // deny list) and answers with a reason a relay can act on (e.g. an expired certificate: enroll again).
  const tlsOptions = { ...tlsServerOptions({ keyPem: server.keyPem, certPem: server.certPem, caCertPem: o.ca.certPem }), rejectUnauthorized: false, handshakeTimeout: TUNNEL_REQUEST_TIMEOUT_MS };
  const timeouts = { headersTimeout: TUNNEL_REQUEST_TIMEOUT_MS, requestTimeout: TUNNEL_REQUEST_TIMEOUT_MS, connectionsCheckingInterval: 2_000 };
  const https_ = https.createServer({ ...tlsOptions, ...timeouts }, (req, res) => {
    const route = (req.url ?? '').split('?')[0];
    if (route === FORWARD_PATH && o.serveForwarded) {
      serveForward(req, res, o.ca, o.serveForwarded).catch((err: unknown) => {
        o.log?.warn({ err: { message: (err as Error).message } }, 'forwarded relay query failed');
        if (!res.headersSent) sendError(res, 500, 'internal_error', 'the forwarded query failed on this replica');
        else if (!res.writableEnded) res.destroy(); // (an answer ended already is left to finish)
      });
      return;
    }
    if (route !== RENEW_PATH) {
      res.writeHead(426, { 'content-type': 'text/plain', upgrade: 'websocket' }).end('the svc tunnel speaks WebSocket only');
      return;
    }
    renew(req, res).catch((err: unknown) => {
      o.log?.warn({ err: { message: (err as Error).message } }, 'relay certificate renewal failed');
      if (!res.headersSent) sendError(res, 500, 'internal_error', 'the renewal failed on our side; retry later');
      else res.destroy();
    });
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: DEFAULT_MAX_FRAME_SIZE + 12 });
  let leases: TunnelLeases | undefined; // set once listening
  const registry = o.registry;
  const ca = relayCa(o.ca);

  const renew = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST');
      return sendError(res, 405, 'method_not_allowed', `${RENEW_PATH} takes POST`);
    }
    const peer = await authenticate(o.store, o.ca, req.socket as TLSSocket);
    if (!peer.ok) {
      const message = peer.reason === TunnelRefusal.CERTIFICATE_EXPIRED
        ? 'the relay certificate expired: it cannot renew itself; enroll again with a new token (svc-relay enroll --force)'
        : `the client certificate is not accepted (${peer.reason})`;
      return sendError(res, peer.status, peer.status === 401 ? 'unauthorized' : 'forbidden', message, peer.reason);
    }
    // only the current certificate renews (checked again in the renewal's transaction)
    if (!peer.current) return refuseSuperseded(res, new CertificateNotCurrentError(peer.serial), peer);
    const raw = await readBody(req);
    if (raw === null) return sendError(res, 413, 'payload_too_large', `the body is over ${MAX_RENEW_BODY} bytes`);
    let csr: unknown;
    try {
      csr = (JSON.parse(raw) as { csr_pem?: unknown } | null)?.csr_pem;
    } catch {
      csr = undefined;
    }
    if (typeof csr !== 'string' || csr.length === 0 || csr.length > 20_000) {
      return sendError(res, 400, 'invalid_request', 'the body must be JSON {"csr_pem": "<PEM CSR for a new key pair>"}');
    }
    try {
      const r = await reissue(o.store, ca, o.relayOptions, peer.orgId, peer.relayId, csr, 'rotate', { presentedSerial: peer.serial });
      o.log?.info({ relay_id: peer.relayId, serial: r.serial, replaces: peer.serial }, 'relay certificate renewed');
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({ relay_id: r.relay_id, certificate_pem: r.certificate_pem, ca_certificate_pem: r.ca_certificate_pem, expires_at: r.expires_at, serial: r.serial }),
      );
    } catch (err) {
      if (isApiError(err)) return sendError(res, err.status, err.code, err.message, undefined, err.headers);
      if (err instanceof CertificateNotCurrentError) return refuseSuperseded(res, err, peer);
      throw err;
    }
  };

  const refuseSuperseded = (res: ServerResponse, err: CertificateNotCurrentError, peer: { relayId: string; serial: string }): void => {
    o.log?.warn({ relay_id: peer.relayId, serial: peer.serial }, 'renewal with a replaced relay certificate refused');
    sendError(res, 403, 'forbidden', err.message, err.reason);
  };

  https_.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    void (async () => {
      const peer = await authenticate(o.store, o.ca, socket as TLSSocket);
      if (!peer.ok) return refuse(socket, peer.status, peer.reason);
      wss.handleUpgrade(req, socket, head, (ws) => attach(ws, peer.relayId, peer.orgId, peer.serial));
    })().catch((err: unknown) => {
      o.log?.warn({ err: { message: (err as Error).message } }, 'tunnel upgrade failed');
      socket.destroy();
    });
  });

  const attach = (ws: WebSocket, relayId: string, orgId: string, serial: string): void => {
    const session = new Session(wsTransport(ws), { role: 'server', features: [...RELAY_FEATURES] });
    const tunnel: LiveTunnel = { relayId, orgId, serial, session, connectedAt: new Date(), version: null, terminate: () => ws.terminate() };
    const seen = (): void => {
      void o.store
        .query('UPDATE relays SET last_seen_at = $2, version = coalesce($3, version), features = coalesce($4, features) WHERE id = $1', [relayId, new Date().toISOString(), tunnel.version, session.negotiated?.features ?? null])
        .catch(() => undefined);
    };
    const failed = (what: string) => (err: unknown) => o.log?.warn({ relay_id: relayId, err: { message: (err as Error).message } }, `tunnel lease ${what} failed`);
    // online (and the tunnel queries are routed to) only once HELLO completed: until then a
    // previous tunnel of this relay keeps serving, so switching tunnels drops nothing
    session.ready.then(
      (n) => {
        if (session.state === 'closed') return;
        tunnel.version = n.peer.agent ?? null;
        const lacking = lackingRelayFeatures(n.features);
        if (lacking.length > 0) {
          // listed online (with upgrade_required), but query/relay.ts runs nothing through it
          o.log?.warn({ relay_id: relayId, version: tunnel.version, lacking }, 'relay connected without a feature svc requires (catalog-search-path: it pins search_path): its queries are refused until svc-relay is upgraded');
        }
        registry.add(tunnel);
        // the certificate's predecessors are revoked only once this tunnel holds the lease, so a
        // replica still holding the old tunnel sees a newer lease (and drains) rather than a revocation
        const claimed = leases ? leases.claim(tunnel).catch(failed('claim')) : (seen(), Promise.resolve());
        void claimed.then(() => certificateInUse(o.store, serial)).catch(() => undefined);
        o.log?.info({ relay_id: relayId, serial }, 'relay connected');
      },
      () => undefined,
    );
    session.onClose(() => {
      registry.remove(tunnel);
      if (leases) void leases.release(tunnel).catch(failed('release'));
      else seen();
    });
  };

  https_.timeout = TUNNEL_REQUEST_TIMEOUT_MS; // no 'timeout' listener: an idle socket is destroyed
  await new Promise<void>((resolve, reject) => {
    https_.once('error', reject);
    https_.listen(o.port, o.host, () => resolve());
  });
  const addr = https_.address();
  const port = typeof addr === 'object' && addr ? addr.port : o.port;
  leases = o.leases?.(port);
  leases?.start();
  return {
    registry,
    port,
    close: async () => {
      await leases?.stop();
      registry.closeAll();
      wss.close();
      https_.closeAllConnections();
      await new Promise<void>((resolve) => https_.close(() => resolve()));
    },
  };
}
