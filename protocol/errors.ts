/**
 * One registry of the protocol's coded errors (`PROTO_ERR_*`). Every code is documented in
 * protocol/README.md; a test checks that each is unique and documented there.
 *
 * `fatal: true` codes are session errors: the session that detects them sends an ERROR frame on
 * stream 0 and closes the transport with `closeCode`. The others end one stream, or are thrown
 * locally to the caller, and leave the session up.
 */

/** WebSocket-compatible close codes the session uses on its transport. */
export const CloseCode = {
  /** graceful close or drained */
  NORMAL: 1000,
  /** the peer broke the protocol (the reason is the PROTO_ERR_* code) */
  PROTOCOL_ERROR: 1002,
  /** this side failed unexpectedly */
  INTERNAL: 1011,
  /** the peer stopped answering (hello or ping timeout): adapters should drop the socket, not handshake */
  UNRESPONSIVE: 4000,
} as const;

interface ErrorSpec {
  readonly message: string;
  /** true: the whole session is closed */
  readonly fatal: boolean;
  /** the transport close code used when this error closes the session */
  readonly closeCode?: number;
}

export const PROTO_ERRORS = {
  // --- framing (the decoder) ---
  PROTO_ERR_BAD_VERSION: { message: 'frame header carries an unsupported version', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_UNKNOWN_TYPE: { message: 'frame type is unknown', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_FRAME_TOO_LARGE: { message: 'frame payload length exceeds the maximum frame size', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_TRUNCATED: { message: 'input ended inside a frame', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_BAD_PAYLOAD: { message: 'frame payload is malformed', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_UNEXPECTED_FRAME: { message: 'frame type is not allowed on this stream, in this direction or in this state', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  // --- session rules ---
  PROTO_ERR_STREAM_ID: { message: 'stream id is reused, out of order, of the wrong parity, or was never opened', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_STREAM_CLOSED: { message: 'frame received on a stream that is already closed', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_WINDOW_EXCEEDED: { message: 'peer sent more flow-controlled bytes than its credit allowed', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_WINDOW_OVERFLOW: { message: 'credit update raised a window above its advertised size, or was zero', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_FLOOD: { message: 'peer sent too many control frames in a short time', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_BAD_HELLO: { message: 'HELLO missing, repeated or invalid', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_VERSION_MISMATCH: { message: 'no protocol version in common with the peer', fatal: true, closeCode: CloseCode.PROTOCOL_ERROR },
  PROTO_ERR_HELLO_TIMEOUT: { message: 'peer did not complete HELLO in time', fatal: true, closeCode: CloseCode.UNRESPONSIVE },
  PROTO_ERR_PEER_DEAD: { message: 'peer missed too many pings', fatal: true, closeCode: CloseCode.UNRESPONSIVE },
  PROTO_ERR_SESSION_CLOSED: { message: 'session is closed', fatal: true, closeCode: CloseCode.NORMAL },
  PROTO_ERR_TRANSPORT_CLOSED: { message: 'transport closed underneath the session, or refused a send', fatal: true },
  PROTO_ERR_INTERNAL: { message: 'unexpected exception while handling a frame (a bug on this side)', fatal: true, closeCode: CloseCode.INTERNAL },
  // --- one stream (or a local call) ---
  PROTO_ERR_NOT_READY: { message: 'session has not completed HELLO yet', fatal: false },
  PROTO_ERR_STREAM_LIMIT: { message: 'too many concurrent streams', fatal: false },
  PROTO_ERR_GOAWAY: { message: 'session is draining: no new streams (safe to retry elsewhere)', fatal: false },
  PROTO_ERR_CANCELLED: { message: 'stream was cancelled', fatal: false },
  PROTO_ERR_DEADLINE: { message: 'stream ran past its deadline', fatal: false },
  PROTO_ERR_QUEUE_FULL: { message: 'too many bytes queued waiting for credit', fatal: false },
  PROTO_ERR_ROW_TOO_LARGE: { message: 'one row does not fit in a frame', fatal: false },
  PROTO_ERR_STREAM_STATE: { message: 'operation not valid in the stream\'s current state', fatal: false },
  PROTO_ERR_NO_HANDLER: { message: 'no stream handler is registered', fatal: false },
  PROTO_ERR_HANDLER: { message: 'stream handler failed or returned without ending the stream', fatal: false },
  PROTO_ERR_INVALID_ARGUMENT: { message: 'invalid option or value', fatal: false },
} as const satisfies Record<string, ErrorSpec>;

export type ProtoErrorCode = keyof typeof PROTO_ERRORS;

export function isProtoErrorCode(code: unknown): code is ProtoErrorCode {
  return typeof code === 'string' && Object.prototype.hasOwnProperty.call(PROTO_ERRORS, code);
}

/**
 * An error with a code. `code` is a `PROTO_ERR_*` code for errors this module raises; errors a
 * peer reports in an ERROR frame keep the peer's code (any string) and have `remote: true`.
 */
export class ProtocolError extends Error {
  readonly code: string;
  readonly remote: boolean;
  readonly retryable: boolean;
  readonly detail: unknown;

  constructor(code: string, message?: string, opts: { remote?: boolean; retryable?: boolean; detail?: unknown; cause?: unknown } = {}) {
    const fallback = isProtoErrorCode(code) ? PROTO_ERRORS[code].message : code;
    super(message ?? fallback, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'ProtocolError';
    this.code = code;
    this.remote = opts.remote ?? false;
    this.retryable = opts.retryable ?? code === 'PROTO_ERR_GOAWAY';
    this.detail = opts.detail;
  }

  /** whether this error, raised locally, closes the whole session */
  get fatal(): boolean {
    return isProtoErrorCode(this.code) && PROTO_ERRORS[this.code].fatal;
  }
}

export function protoError(code: ProtoErrorCode, message?: string, opts?: { remote?: boolean; retryable?: boolean; detail?: unknown; cause?: unknown }): ProtocolError {
  return new ProtocolError(code, message, opts);
}

export function closeCodeFor(code: string): number {
  if (isProtoErrorCode(code)) {
    const spec: ErrorSpec = PROTO_ERRORS[code];
    return spec.closeCode ?? CloseCode.PROTOCOL_ERROR;
  }
  return CloseCode.PROTOCOL_ERROR;
}
