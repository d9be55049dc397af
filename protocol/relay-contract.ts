/**
 * What svc-relay (relay-agent/) and the control plane's tunnel listener (control-plane/tunnel/)
 * agree on beyond the frames themselves, written once and imported by both sides:
 *
 *  - how the control plane ends a live tunnel: the close codes and reasons it sends, and which of
 *    them are permanent (the relay stops instead of reconnecting);
 *  - how it refuses a tunnel upgrade (or a certificate renewal): HTTP 401/403 with a reason, all
 *    permanent for the relay;
 *  - the `RELAY_ERR_*` codes a relay ends a stream with (its ERROR frames), which the control
 *    plane turns into API errors (control-plane/query/relay.ts);
 *  - the tunnel's WebSocket as the session's transport.
 *
 * Like the rest of protocol/ it imports only protocol/ (and so nothing from control-plane/): the
 * relay's package compiles what cli/svc-relay.ts imports.
 */
import { CloseCode } from './errors.js';
import type { Transport } from './transport.js';
import { webSocketTransport, type WebSocketLike } from './websocket.js';

// ------------------------------------------------------------------ closing a live tunnel

/** WebSocket close codes on a tunnel: the session's own (CloseCode) and the two the control plane adds. */
export const TunnelCloseCode = {
  ...CloseCode,
  /** the control plane is shutting down (WebSocket "going away"): the relay reconnects */
  GOING_AWAY: 1001,
  /** the relay may not come back (WebSocket "policy violation"); the reason is a {@link TunnelRevocation} */
  REVOKED: 1008,
} as const;

/** The reasons the control plane closes a live tunnel with (code {@link TunnelCloseCode.REVOKED}) when the relay must not come back. */
export const TunnelRevocation = {
  /** the relay was deleted (every certificate of it revoked) */
  RELAY_REVOKED: 'relay_revoked',
  /** an operator revoked the certificate the tunnel was opened with */
  CERTIFICATE_REVOKED: 'certificate_revoked',
} as const;
export type TunnelRevocationReason = (typeof TunnelRevocation)[keyof typeof TunnelRevocation];

/** A close the control plane sends on a relay's tunnel. */
export interface TunnelClose {
  readonly code: number;
  readonly reason: string;
  /** true: the relay stops (exits) instead of reconnecting */
  readonly permanent: boolean;
}

/**
 * Every close the control plane itself sends on a tunnel (control-plane/tunnel/), and whether the
 * relay must treat it as permanent. The session's own closes (drained, a drain's timeout, a
 * protocol error: PROTO_ERR_* reasons with 1002/1011/4000) are never permanent.
 */
export const TUNNEL_CLOSES = {
  /** the relay was deleted (through this replica or, seen on the lease beat, another) */
  relayRevoked: { code: TunnelCloseCode.REVOKED, reason: TunnelRevocation.RELAY_REVOKED, permanent: true },
  /** an operator revoked the tunnel's certificate */
  certificateRevoked: { code: TunnelCloseCode.REVOKED, reason: TunnelRevocation.CERTIFICATE_REVOKED, permanent: true },
  /** the control plane is stopping */
  shuttingDown: { code: TunnelCloseCode.GOING_AWAY, reason: 'control plane shutting down', permanent: false },
} as const satisfies Record<string, TunnelClose>;

/** The close of a tunnel for a revocation reason (the relay must not come back). */
export function revocationClose(reason: TunnelRevocationReason): TunnelClose {
  return reason === TunnelRevocation.RELAY_REVOKED ? TUNNEL_CLOSES.relayRevoked : TUNNEL_CLOSES.certificateRevoked;
}

/**
 * Why the control plane drains a relay's tunnel (the `code` of its GOAWAY; the relay reconnects
 * after each). A relay that knows none of them reads the GOAWAY as a takeover.
 */
export const TunnelDrain = {
  /** a newer connection of this relay became current (on this replica or another): another svc-relay with the same configuration, or this one's own reconnect */
  REPLACED: 'tunnel_replaced',
  /** the certificate the tunnel was opened with expired, or was replaced and its overlap window ended */
  CERTIFICATE_LAPSED: 'certificate_lapsed',
} as const;
export type TunnelDrainReason = (typeof TunnelDrain)[keyof typeof TunnelDrain];

/** The closes after which reconnecting is pointless: exactly those the control plane sends as permanent. */
export const PERMANENT_TUNNEL_CLOSES: readonly TunnelClose[] = Object.values(TUNNEL_CLOSES).filter((c: TunnelClose) => c.permanent);

/**
 * Whether a tunnel's close means the relay must stop: it is one the control plane sends as
 * permanent (code and reason). Every other close is transient: the relay reconnects.
 */
export function isPermanentClose(code: number, reason: string): boolean {
  return PERMANENT_TUNNEL_CLOSES.some((c) => c.code === code && c.reason === reason);
}

// ------------------------------------------------------------------ refusing an upgrade or a renewal

/**
 * Why the tunnel listener refuses a client certificate, on the upgrade (before any WebSocket) and
 * on `POST /v1/relay/renew`, in the `x-svc-reason` header (and the body). A certificate that fails
 * the CA's own checks is refused with the pki verification code (`PKI_ERR_*`) instead.
 */
export const TunnelRefusal = {
  /** 401: no client certificate was presented */
  CLIENT_CERTIFICATE_REQUIRED: 'client_certificate_required',
  /** 401: the certificate expired; it cannot renew itself */
  CERTIFICATE_EXPIRED: 'certificate_expired: enroll again',
  /** 403: not a certificate the store knows */
  CERTIFICATE_UNKNOWN: 'certificate_unknown',
  /** 403: the relay was deleted */
  RELAY_REVOKED: TunnelRevocation.RELAY_REVOKED,
  /** 403: the certificate was revoked, or replaced and past its overlap window */
  CERTIFICATE_REVOKED: TunnelRevocation.CERTIFICATE_REVOKED,
  /** 403 (renewal only): a certificate already replaced by a newer one cannot renew */
  CERTIFICATE_SUPERSEDED: 'certificate_superseded',
} as const;
export type TunnelRefusalReason = (typeof TunnelRefusal)[keyof typeof TunnelRefusal];

/** The statuses the tunnel listener refuses a certificate with. */
export type TunnelRefusalStatus = 401 | 403;

/** Whether an HTTP answer to the tunnel upgrade means the relay must stop: 401 and 403 (every refusal the listener sends). */
export function isPermanentRefusal(status: number): status is TunnelRefusalStatus {
  return status === 401 || status === 403;
}

// ------------------------------------------------------------------ what a relay says it does

/**
 * HELLO features of a tunnel session (the session uses those both sides offer). svc-relay offers
 * every one it implements, and the control plane offers the same, so a current relay's tunnel
 * negotiates them all; a relay built before one was introduced offers none of it.
 */
export const RelayFeature = {
  /**
   * The relay runs every statement with `SET LOCAL search_path = pg_catalog` (pg-read
   * PIN_SEARCH_PATH), so a function or operator of the customer's named like the catalog's is
   * never chosen for an agent. Required: the control plane runs nothing through a tunnel without it.
   */
  CATALOG_SEARCH_PATH: 'catalog-search-path',
} as const;
export type RelayFeatureName = (typeof RelayFeature)[keyof typeof RelayFeature];
/** every feature, as both sides offer them in HELLO */
export const RELAY_FEATURES: readonly RelayFeatureName[] = Object.values(RelayFeature);
/** the features without which the control plane runs no statement through a relay's tunnel */
export const REQUIRED_RELAY_FEATURES: readonly RelayFeatureName[] = [RelayFeature.CATALOG_SEARCH_PATH];
/** the required features a tunnel's negotiated `features` lack (empty: the control plane may use it) */
export function lackingRelayFeatures(features: readonly string[]): RelayFeatureName[] {
  return REQUIRED_RELAY_FEATURES.filter((f) => !features.includes(f));
}

// ------------------------------------------------------------------ a relay's stream errors

/**
 * The codes a relay ends a stream with (ERROR frames), with the database's SQLSTATE in
 * `detail.sqlstate` when the database answered; control-plane/query/relay.ts maps each to an API
 * error.
 */
export const RelayStreamError = {
  /** the database rejected the statement (`detail.sqlstate`), or the relay refused it (empty, not supported) */
  QUERY: 'RELAY_ERR_QUERY',
  /** the database refused a write in the read-only transaction (SQLSTATE 25006) */
  READ_ONLY: 'RELAY_ERR_READ_ONLY',
  /** more than one statement */
  MULTI_STATEMENT: 'RELAY_ERR_MULTI_STATEMENT',
  /** cancelled at the database by the deadline or a statement timeout (57014) */
  TIMEOUT: 'RELAY_ERR_TIMEOUT',
  /** the relay cannot reach its database (`retryable: true`) */
  DATABASE_UNAVAILABLE: 'RELAY_ERR_DATABASE_UNAVAILABLE',
  /** a row larger than what the query may still return, or than a frame; it was not read */
  ROW_TOO_LARGE: 'RELAY_ERR_ROW_TOO_LARGE',
  /** a value of the result the relay cannot encode for the tunnel (a JSON value nested too deeply): the statement ran */
  VALUE_UNSENDABLE: 'RELAY_ERR_VALUE_UNSENDABLE',
  /** every connection of the relay's pool stayed busy until just before the deadline: nothing ran (`retryable: true`) */
  POOL_BUSY: 'RELAY_ERR_POOL_BUSY',
} as const;
export type RelayStreamErrorCode = (typeof RelayStreamError)[keyof typeof RelayStreamError];
export const RELAY_STREAM_ERRORS: readonly RelayStreamErrorCode[] = Object.values(RelayStreamError);

export function isRelayStreamErrorCode(code: unknown): code is RelayStreamErrorCode {
  return typeof code === 'string' && (RELAY_STREAM_ERRORS as readonly string[]).includes(code);
}

// ------------------------------------------------------------------ the transport

/** The tunnel's WebSocket (a `ws` WebSocket, on either side) as the protocol transport: one frame per binary message. */
export const wsTransport = (ws: WebSocketLike): Transport => webSocketTransport(ws);
