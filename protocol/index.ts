/**
 * protocol/ — the relay tunnel's wire format and session: frame codec, stream multiplexing,
 * credit-based flow control, ping, cancel, goaway. Imports only `node:` built-ins (and uses
 * globals such as TextDecoder, AbortController and performance). See protocol/README.md.
 */
export { CloseCode, PROTO_ERRORS, ProtocolError, closeCodeFor, isProtoErrorCode, protoError, type ProtoErrorCode } from './errors.js';
export {
  FIXED_PAYLOAD,
  FLOW_CONTROLLED,
  FRAME_TYPE_NAMES,
  FRAME_VERSION,
  FrameType,
  HEADER_SIZE,
  MAX_MAX_FRAME_SIZE,
  MAX_STREAM_ID,
  MAX_WINDOW,
  MIN_MAX_FRAME_SIZE,
  PROTOCOL_VERSION,
  STREAM_NONZERO_ONLY,
  STREAM_ZERO_ONLY,
  SUPPORTED_VERSIONS,
  type CancelFrame,
  type Column,
  type ColumnsFrame,
  type CreditFrame,
  type DecodedFrame,
  type EndFrame,
  type EndInfo,
  type ErrorFrame,
  type ErrorInfo,
  type Frame,
  type FrameTypeName,
  type GoawayFrame,
  type GoawayInfo,
  type Hello,
  type HelloFrame,
  type JsonObject,
  type JsonValue,
  type OpenFrame,
  type PingFrame,
  type PongFrame,
  type QueryLimits,
  type QueryOpen,
  type Role,
  type Row,
  type RowsFrame,
  type Value,
} from './frames.js';
export { ByteReader, ByteWriter, ValueTag, varintSize } from './values.js';
export { DEFAULT_MAX_FRAME_SIZE, FrameDecoder, decodePayload, encodeFrame, encodeRowsFrames, type DecoderOptions, type RowsEncodeOptions } from './codec.js';
export { ManualClock, realClock, type Clock, type TimerHandle } from './clock.js';
export { memoryTransportPair, type MemoryTransport, type Transport } from './transport.js';
export { Session, type SessionCloseInfo, type SessionStats } from './session.js';
export type { Negotiated, SessionOptions } from './session-options.js';
export type { StreamHandler } from './streams.js';
/** the opener's side of a stream (reads), and the acceptor's (writes); each in one `StreamState` */
export { QueryStream, type StreamEvent, type StreamResult } from './stream-read.js';
export { IncomingQuery } from './stream-write.js';
export { StreamState } from './stream-state.js';
export type { QueryStream as Stream } from './stream-read.js';
export { webSocketTransport, type WebSocketLike } from './websocket.js';
