/**
 * The tunnel listener: one mutual-TLS WebSocket per relay, on its own port. The TLS handshake
 * accepts only client certificates our CA issued; the upgrade then checks the certificate against
 * the store (revoked, superseded past its overlap, relay deleted) and answers 403 with the reason
 * before any WebSocket exists. An accepted relay gets a protocol Session (the control plane opens
 * the streams) and is registered as online; deleting it closes its tunnel at once.
 */
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { WebSocketServer, type WebSocket } from 'ws';
import { issueServerCertificate, tlsServerOptions, verifyClientCertificate, type Ca } from '../../pki/index.js';
import { CloseCode, DEFAULT_MAX_FRAME_SIZE, Session, webSocketTransport, type Transport } from '../../protocol/index.js';
import { certificateInUse, checkCertificate } from '../relays/index.js';
import type { Store } from '../store/index.js';

/** Close reasons a relay must treat as permanent (do not reconnect). */
export const PERMANENT_REASONS = ['relay_revoked', 'certificate_revoked'] as const;

export interface LiveTunnel {
  readonly relayId: string;
  readonly orgId: string;
  readonly serial: string;
  readonly session: Session;
  readonly connectedAt: Date;
  version: string | null;
}

/** Which relays have a live tunnel, and a way to cut one. */
export class TunnelRegistry {
  private readonly live = new Map<string, LiveTunnel>();

  online(relayId: string): boolean {
    return this.live.has(relayId);
  }

  get(relayId: string): LiveTunnel | undefined {
    return this.live.get(relayId);
  }

  /** @internal */
  add(t: LiveTunnel): void {
    const previous = this.live.get(t.relayId);
    this.live.set(t.relayId, t);
    previous?.session.close(CloseCode.NORMAL, 'replaced by a newer connection');
  }

  /** @internal */
  remove(t: LiveTunnel): void {
    if (this.live.get(t.relayId) === t) this.live.delete(t.relayId);
  }

  /** Close a relay's tunnel now (deleted or revoked); the reason tells the relay not to come back. */
  disconnect(relayId: string, reason: (typeof PERMANENT_REASONS)[number]): void {
    const t = this.live.get(relayId);
    if (!t) return;
    this.live.delete(relayId);
    t.session.close(1008, reason); // WebSocket policy violation
  }

  get size(): number {
    return this.live.size;
  }

  closeAll(): void {
    for (const t of this.live.values()) t.session.close(1001, 'control plane shutting down'); // WebSocket going away
    this.live.clear();
  }
}

/** The relay's WebSocket as the protocol transport (one frame per binary message). */
export const wsTransport = (ws: WebSocket): Transport => webSocketTransport(ws);

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
  readonly log?: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
}

export interface TunnelListener {
  readonly registry: TunnelRegistry;
  readonly port: number;
  close(): Promise<void>;
}

function refuse(socket: Duplex, status: 401 | 403, reason: string): void {
  const text = status === 401 ? 'Unauthorized' : 'Forbidden';
  socket.end(`HTTP/1.1 ${status} ${text}\r\nconnection: close\r\ncontent-type: text/plain\r\nx-svc-reason: ${reason}\r\ncontent-length: ${reason.length}\r\n\r\n${reason}`);
}

export async function startTunnelListener(o: TunnelOptions): Promise<TunnelListener> {
  const server = issueServerCertificate(o.ca, { dnsNames: [...o.dnsNames], ipAddresses: [...o.ipAddresses] });
  // The handshake asks for a client certificate but does not end the connection over it: the
  // upgrade handler verifies it fully (issuer signature, validity, usage, our identity, the store's
  // deny list) and answers with a reason a relay can act on (e.g. an expired certificate: enroll again).
  const tlsOptions = { ...tlsServerOptions({ keyPem: server.keyPem, certPem: server.certPem, caCertPem: o.ca.certPem }), rejectUnauthorized: false };
  const https_ = https.createServer(tlsOptions, (_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain', upgrade: 'websocket' }).end('the svc tunnel speaks WebSocket only');
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: DEFAULT_MAX_FRAME_SIZE + 12 });
  const registry = o.registry;

  https_.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    void (async () => {
      const tls = socket as TLSSocket;
      const peer = tls.getPeerX509Certificate?.();
      if (!peer) return refuse(socket, 401, 'client_certificate_required');
      const verdict = verifyClientCertificate(o.ca, peer, { isRevoked: () => false });
      if (!verdict.ok) return refuse(socket, verdict.code === 'PKI_ERR_EXPIRED' ? 401 : 403, verdict.code === 'PKI_ERR_EXPIRED' ? 'certificate_expired: enroll again' : verdict.code);
      const check = await checkCertificate(o.store, verdict.identity.serial, verdict.identity.fingerprint256);
      if (!check.ok) return refuse(socket, 403, check.reason === 'relay_deleted' ? 'relay_revoked' : check.reason === 'unknown' ? 'certificate_unknown' : 'certificate_revoked');
      wss.handleUpgrade(req, socket, head, (ws) => attach(ws, check.relayId, check.orgId, verdict.identity.serial));
    })().catch((err: unknown) => {
      o.log?.warn({ err: { message: (err as Error).message } }, 'tunnel upgrade failed');
      socket.destroy();
    });
  });

  const attach = (ws: WebSocket, relayId: string, orgId: string, serial: string): void => {
    const session = new Session(wsTransport(ws), { role: 'server' });
    const tunnel: LiveTunnel = { relayId, orgId, serial, session, connectedAt: new Date(), version: null };
    registry.add(tunnel);
    const seen = (): void => {
      void o.store.query('UPDATE relays SET last_seen_at = $2, version = coalesce($3, version) WHERE id = $1', [relayId, new Date().toISOString(), tunnel.version]).catch(() => undefined);
    };
    session.ready.then(
      (n) => {
        tunnel.version = n.peer.agent ?? null;
        seen();
        void certificateInUse(o.store, serial).catch(() => undefined);
        o.log?.info({ relay_id: relayId }, 'relay connected');
      },
      () => undefined,
    );
    session.onClose(() => {
      registry.remove(tunnel);
      seen();
    });
  };

  await new Promise<void>((resolve, reject) => {
    https_.once('error', reject);
    https_.listen(o.port, o.host, () => resolve());
  });
  const addr = https_.address();
  return {
    registry,
    port: typeof addr === 'object' && addr ? addr.port : o.port,
    close: async () => {
      registry.closeAll();
      wss.close();
      await new Promise<void>((resolve) => https_.close(() => resolve()));
    },
  };
}
