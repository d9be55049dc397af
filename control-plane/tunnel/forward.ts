/**
 * Relay queries across replicas (issue #14): a replica that does not hold a relay's tunnel finds
 * the holder in the store (leases.ts) and sends it the checked, rewritten statement over mutual
 * TLS: its own replica certificate from our CA (pki issueReplicaCertificate: a SAN URI
 * urn:svc:replica:<id>, never a relay identity) against the holder's tunnel listener, whose
 * server certificate (from the same CA) names the address the holder advertises. The holder runs
 * it on its tunnel exactly as a local query (same caps, never more than its own, same deadline,
 * cancelled when the asking replica gives up: the connection revoked or expired) once it has
 * checked that the connection named is live and reads through that relay, and answers the result,
 * or the error as the API would, which the asking replica passes on. Nothing is forwarded twice:
 * a holder that lost the tunnel meanwhile answers `relay_unavailable`.
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { issueReplicaCertificate, verifyReplicaCertificate, type Ca } from '../../pki/index.js';
import type { ReadQueryResult } from '../results/index.js';
import { API_ERRORS, ApiError, isApiError, type ApiErrorCode } from '../errors.js';
import type { Store } from '../store/index.js';
import type { LeaseHolder } from './leases.js';

/** the path on the tunnel listener where replicas send each other relay queries */
export const FORWARD_PATH = '/v1/internal/relay-query';

export interface ForwardLimits {
  readonly timeoutMs: number;
  readonly maxRows: number;
  readonly maxBytes: number;
}

export interface ForwardRequest {
  readonly relay_id: string;
  /** the svc connection the statement was sent on (the holder checks it is live and reads through this relay) */
  readonly connection_id: string;
  readonly sql: string;
  readonly limits: ForwardLimits;
}

/**
 * runs a forwarded statement on a tunnel held here (never forwards again); `onStart` once it is
 * sent to the relay (query/relay.ts runOnRelay), which the asking replica is told
 */
export type ServeForwarded = (request: ForwardRequest, signal: AbortSignal, onStart: () => void) => Promise<ReadQueryResult>;

// a statement is at most 100,000 bytes (SVC_MAX_STATEMENT_BYTES), up to six times that as JSON
const MAX_REQUEST_BYTES = 1024 * 1024;
/** a certificate with less than this left is replaced before the next forward */
const RENEW_BEFORE_MS = 24 * 3600_000;

/** how long a forward waits for the holder's connection and TLS handshake */
export const FORWARD_CONNECT_MS = 5000;

/**
 * How often a holder shows it is alive while a forwarded statement runs: its answer's headers go
 * at once (status 200, `x-svc-heartbeat-ms`; the answer's own status is in its JSON body), then a
 * space every this often until the JSON (which leading spaces do not change). The asking replica
 * gives a holder that falls silent for {@link silentAfterMs} up (a frozen holder's kernel still
 * keeps the connection open), instead of waiting for the statement's deadline.
 */
export const FORWARD_HEARTBEAT_MS = 1000;

/**
 * The holder tells the asking replica when the statement was sent to the relay: a newline in its
 * answer before the JSON (which JSON text never holds outside a string, where it is escaped, and
 * which leading whitespace does not change), announced by this header. Until then an agent that
 * leaves is not charged: the holder may still refuse the statement (the connection gone, an
 * outdated relay, the tunnel lost). A holder without the header (a version before it) is taken
 * to have started it when its answer begins.
 */
export const FORWARD_START_HEADER = 'x-svc-start-signal';
/**
 * how long a holder that said it beats every `heartbeatMs` may be silent before it is given up
 * (at most 5 minutes: a larger wait would overflow the timer, which then fires at once)
 */
export function silentAfterMs(heartbeatMs: number): number {
  return Math.min(300_000, Math.max(1000, heartbeatMs * 5));
}

function unavailable(relayId: string, why: string): ApiError {
  return new ApiError('relay_unavailable', `relay ${relayId}'s tunnel is held by another replica, which ${why}; retry shortly`, { relay_id: relayId, reason: 'replica_unreachable', retry_after_seconds: 1 }, { 'Retry-After': '1' });
}

/** The asking side: finds the holder of a relay's tunnel and sends it the statement. */
export class RelayForwarder {
  private identity: { agent: https.Agent; notAfter: number; caPem: string } | undefined;
  /** the certificate being issued: one for every caller waiting (key generation blocks the thread) */
  private issuing: Promise<{ agent: https.Agent; notAfter: number; caPem: string }> | undefined;

  constructor(
    private readonly store: Store,
    readonly replicaId: string,
    private readonly ca: () => Promise<Ca>,
    /** told how each forward ended (metrics) */
    private readonly onForward?: (outcome: 'ok' | 'error') => void,
  ) {}

  /**
   * The replica holding `relayId`'s tunnel under a live lease, if it is not this one; `deleted`
   * when the relay was deleted (through any replica).
   */
  async holder(relayId: string): Promise<LeaseHolder | 'deleted' | undefined> {
    const [row] = await this.store.query<{ tunnel_replica: string | null; tunnel_address: string | null; live: boolean; deleted: boolean }>(
      'SELECT tunnel_replica, tunnel_address, coalesce(tunnel_until > now(), false) AS live, revoked_at IS NOT NULL AS deleted FROM relays WHERE id = $1',
      [relayId],
    );
    if (row?.deleted) return 'deleted';
    if (!row?.live || !row.tunnel_replica || !row.tunnel_address || row.tunnel_replica === this.replicaId) return undefined;
    return { replicaId: row.tunnel_replica, address: row.tunnel_address };
  }

  /**
   * Runs the statement on the holder's tunnel; errors come back as the holder's API errors.
   * `onStart` is called once, when the holder says it sent the statement to the relay.
   */
  async run(holder: LeaseHolder, request: ForwardRequest, signal?: AbortSignal, onStart?: () => void): Promise<ReadQueryResult> {
    try {
      const result = await this.send(holder, request, signal, onStart);
      this.onForward?.('ok');
      return result;
    } catch (err) {
      this.onForward?.('error');
      throw err;
    }
  }

  private async send(holder: LeaseHolder, request: ForwardRequest, signal?: AbortSignal, onStart?: () => void): Promise<ReadQueryResult> {
    const { relay_id: relayId, limits } = request;
    const { agent, caPem } = await this.agent();
    const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(holder.address);
    if (!m) throw unavailable(relayId, `advertises an unusable address (${holder.address})`);
    const host = m[1] as string;
    const body = JSON.stringify(request);
    const maxResponse = limits.maxBytes * 2 + 1024 * 1024;
    // stopped before it was sent (its agent left, a revocation): nothing to ask the holder
    if (signal?.aborted) throw new Error('aborted');
    return new Promise<ReadQueryResult>((resolve, reject) => {
      let settled = false;
      let silent: NodeJS.Timeout | undefined;
      const done = (err: Error | undefined, value?: ReadQueryResult): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(silent);
        signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve(value as ReadQueryResult);
      };
      const req = https.request({
        host,
        port: Number(m[2]),
        path: FORWARD_PATH,
        method: 'POST',
        agent,
        ca: caPem,
        ...(/^[\d.]+$|:/.test(host) ? {} : { servername: host }),
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      });
      // before anything can destroy it: a destroyed request emits 'error', and one with no listener
      // ends the process (an agent leaving just as its statement was forwarded did)
      req.on('error', (err) => done(unavailable(relayId, `could not be reached (${(err as NodeJS.ErrnoException).code ?? err.message})`)));
      // a holder that stopped (frozen, cut off by the network) still has its kernel accept the
      // connection: one that does not finish the TLS handshake in time is not waited for until the
      // deadline (a keep-alive socket already open has nothing to wait for)
      req.on('socket', (socket) => {
        if (!socket.connecting && (socket as { encrypted?: boolean; authorized?: boolean }).authorized === true) return;
        const handshake = setTimeout(() => {
          req.destroy();
          done(unavailable(relayId, `did not complete the connection within ${FORWARD_CONNECT_MS / 1000} s`));
        }, FORWARD_CONNECT_MS);
        socket.once('secureConnect', () => clearTimeout(handshake));
        socket.once('close', () => clearTimeout(handshake));
      });
      // the holder answers query_timeout at the deadline; past it with some slack the holder is gone
      const timer = setTimeout(() => {
        req.destroy();
        done(unavailable(relayId, 'did not answer in time'));
      }, limits.timeoutMs + 5000);
      const onAbort = (): void => {
        req.destroy(); // the holder sees the asker gone and cancels the statement at the relay
        done(new Error('aborted'));
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        // a holder that beats (FORWARD_HEARTBEAT_MS) and falls silent is gone (an older one does not beat)
        const beat = Number(res.headers['x-svc-heartbeat-ms']);
        const alive = (): void => {
          if (!(Number.isSafeInteger(beat) && beat > 0) || settled) return;
          clearTimeout(silent);
          silent = setTimeout(() => {
            req.destroy();
            done(unavailable(relayId, `stopped answering (nothing for ${silentAfterMs(beat) / 1000} s while the statement ran)`));
          }, silentAfterMs(beat));
        };
        alive();
        let started = false;
        const start = (): void => {
          if (started || settled) return;
          started = true;
          onStart?.();
        };
        // an older holder: as soon as it answers 200 (its refusals before running, 4xx, never ran it)
        if (res.statusCode === 200 && res.headers[FORWARD_START_HEADER] !== '1') start();
        res.on('data', (c: Buffer) => {
          alive();
          if (!started && c.includes(0x0a)) start();
          size += c.length;
          if (size > maxResponse) {
            req.destroy();
            done(unavailable(relayId, 'answered more than the result may hold'));
            return;
          }
          chunks.push(c);
        });
        res.on('error', (err) => done(unavailable(relayId, `broke off its answer (${err.message})`)));
        res.on('end', () => {
          let parsed: unknown;
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            return done(unavailable(relayId, 'answered something unreadable'));
          }
          if (res.statusCode === 200 && isResult(parsed)) return done(undefined, parsed);
          done(errorFrom(parsed, relayId));
        });
      });
      req.end(body);
    });
  }

  close(): void {
    this.identity?.agent.destroy();
    this.identity = undefined;
  }

  /** A keep-alive agent presenting this replica's certificate, issued anew (once, for every caller) before it runs out. */
  private agent(): Promise<{ agent: https.Agent; caPem: string }> {
    if (this.identity && this.identity.notAfter - Date.now() > RENEW_BEFORE_MS) return Promise.resolve(this.identity);
    this.issuing ??= (async () => {
      try {
        const ca = await this.ca();
        const cert = issueReplicaCertificate(ca, { replicaId: this.replicaId });
        const agent = new https.Agent({ keepAlive: true, maxSockets: 64, cert: cert.certPem, key: cert.keyPem, ca: ca.certPem });
        this.identity?.agent.destroy(); // the previous certificate's sockets
        this.identity = { agent, notAfter: cert.notAfter.getTime(), caPem: ca.certPem };
        return this.identity;
      } finally {
        this.issuing = undefined;
      }
    })();
    return this.issuing;
  }
}

function isResult(v: unknown): v is ReadQueryResult {
  const r = v as Partial<ReadQueryResult> | null;
  return typeof r === 'object' && r !== null && Array.isArray(r.columns) && Array.isArray(r.rows) && typeof r.truncated === 'boolean' && typeof r.bytes === 'number';
}

/** The holder's answer as the API error it was (an unknown code is the holder failing). */
function errorFrom(body: unknown, relayId: string): ApiError {
  const e = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
  if (typeof e?.code === 'string' && e.code in API_ERRORS && typeof e.message === 'string') {
    const details = typeof e.details === 'object' && e.details !== null ? (e.details as Record<string, unknown>) : undefined;
    const retry = details?.['retry_after_seconds'];
    return new ApiError(e.code as ApiErrorCode, e.message, details, typeof retry === 'number' ? { 'Retry-After': String(retry) } : undefined);
  }
  return unavailable(relayId, 'failed to run it');
}

// ------------------------------------------------------------------ the holder's side

/**
 * The holder's answer to forwarded statements: the connection named must be live (not revoked,
 * not expired) and read through this relay in the relay's organization, and the caps and
 * deadline are never more than the holder's own (a replica certificate is trusted to have
 * checked the statement, not to raise the limits or read through a relay for someone else).
 */
export function servingForwards(
  store: Store,
  own: ForwardLimits,
  run: (relayId: string, sql: string, limits: ForwardLimits, signal: AbortSignal, onStart: () => void) => Promise<ReadQueryResult>,
): ServeForwarded {
  return async (request, signal, onStart) => {
    const [ok] = await store.query(
      `SELECT 1 FROM connections c JOIN relays r ON r.id = $2 AND r.org_id = c.org_id AND r.revoked_at IS NULL
        WHERE c.id = $1 AND c.revoked_at IS NULL AND c.expires_at > now() AND c.target_id = 'postgres-relay' AND c.scopes ? ('relay:' || $2)`,
      [request.connection_id, request.relay_id],
    );
    if (!ok) throw new ApiError('connection_revoked', `connection ${request.connection_id} cannot read through relay ${request.relay_id} any more (revoked, expired, or the relay deleted); nothing ran`, { relay_id: request.relay_id });
    const limits: ForwardLimits = {
      timeoutMs: Math.min(request.limits.timeoutMs, own.timeoutMs),
      maxRows: Math.min(request.limits.maxRows, own.maxRows),
      maxBytes: Math.min(request.limits.maxBytes, own.maxBytes),
    };
    return run(request.relay_id, request.sql, limits, signal, onStart);
  };
}

function send(res: ServerResponse, status: number, body: unknown, close = false): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...(close ? { connection: 'close' } : {}) }).end(text);
  // a refused caller's connection is not kept (nor the rest of its body read)
  if (close) res.once('finish', () => res.req.socket.destroy());
}

function errorBody(err: ApiError): unknown {
  return { error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) } };
}

const boundedInt = (v: unknown, max: number): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0 && v <= max;

function parseRequest(raw: string): ForwardRequest | undefined {
  const id = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 200;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return undefined;
  }
  const r = v as Partial<ForwardRequest> | null;
  const l = r?.limits as Partial<ForwardLimits> | undefined;
  if (!id(r?.relay_id) || !id(r.connection_id)) return undefined;
  if (typeof r.sql !== 'string' || r.sql.length === 0 || r.sql.length > MAX_REQUEST_BYTES) return undefined;
  if (!l || !boundedInt(l.timeoutMs, 3_600_000) || !boundedInt(l.maxRows, 100_000_000) || !boundedInt(l.maxBytes, 4 * 1024 ** 3)) return undefined;
  return { relay_id: r.relay_id, connection_id: r.connection_id, sql: r.sql, limits: { timeoutMs: l.timeoutMs, maxRows: l.maxRows, maxBytes: l.maxBytes } };
}

/**
 * `POST /v1/internal/relay-query` on the tunnel listener: only a replica's certificate from our
 * CA is accepted (a relay's is refused); the statement runs on a tunnel held here, cancelled when
 * the asking replica goes away.
 */
export async function serveForward(req: IncomingMessage, res: ServerResponse, ca: Ca, serve: ServeForwarded, heartbeatMs = FORWARD_HEARTBEAT_MS): Promise<void> {
  const peer = (req.socket as TLSSocket).getPeerX509Certificate?.();
  const verdict = peer ? verifyReplicaCertificate(ca, peer) : undefined;
  if (!verdict?.ok) return send(res, 403, { error: { code: 'forbidden', message: 'only a control-plane replica of this deployment may forward relay queries' } }, true);
  if (req.method !== 'POST') {
    res.setHeader('allow', 'POST');
    return send(res, 405, { error: { code: 'method_not_allowed', message: `${FORWARD_PATH} takes POST` } }, true);
  }
  const declared = Number(req.headers['content-length'] ?? 0);
  const chunks: Buffer[] = [];
  let size = 0;
  if (declared <= MAX_REQUEST_BYTES) {
    for await (const c of req as AsyncIterable<Buffer>) {
      size += c.length;
      if (size > MAX_REQUEST_BYTES) break;
      chunks.push(c);
    }
  }
  if (declared > MAX_REQUEST_BYTES || size > MAX_REQUEST_BYTES) {
    return send(res, 413, { error: { code: 'payload_too_large', message: `a forwarded relay query is at most ${MAX_REQUEST_BYTES} bytes` } }, true);
  }
  const fwd = parseRequest(Buffer.concat(chunks).toString('utf8'));
  if (!fwd) return send(res, 400, { error: { code: 'invalid_request', message: 'not a forwarded relay query' } }, true);
  const ac = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) ac.abort(); // the asking replica gave up (the connection revoked or expired, or the asker itself gone)
  });
  // the headers at once, then a space every heartbeatMs while it runs: the asker knows this holder lives
  res.writeHead(200, { 'content-type': 'application/json', 'x-svc-heartbeat-ms': String(heartbeatMs), [FORWARD_START_HEADER]: '1' });
  res.flushHeaders();
  const beats = setInterval(() => {
    if (!res.destroyed && !res.writableEnded) res.write(' ');
  }, heartbeatMs);
  res.once('close', () => clearInterval(beats));
  try {
    const onStart = (): void => {
      if (!res.destroyed && !res.writableEnded) res.write('\n');
    };
    res.end(JSON.stringify(await serve(fwd, ac.signal, onStart)));
  } catch (err) {
    // a failure of ours (not an API error) is answered as one, a 500 the asker passes on, not a
    // cut answer it would take for an unreachable holder (a retryable 503); thrown on to be logged
    res.end(JSON.stringify(errorBody(isApiError(err) ? err : new ApiError('internal_error', 'the forwarded query failed on the replica holding the tunnel'))));
    if (!isApiError(err)) throw err;
  } finally {
    clearInterval(beats);
  }
}
