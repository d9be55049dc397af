/**
 * Frame types and payload shapes of the tunnel protocol (wire format in protocol/README.md).
 */

/** version byte of every frame header this implementation writes */
export const FRAME_VERSION = 1;
/** session protocol versions this implementation speaks (negotiated in HELLO) */
export const PROTOCOL_VERSION = 1;
export const SUPPORTED_VERSIONS: readonly number[] = [1];
/** header: u8 version, u8 type, u16 flags, u32 stream id, u32 payload length (big-endian) */
export const HEADER_SIZE = 12;
export const MAX_STREAM_ID = 0xffff_ffff;
/** largest value of a u32 header or payload field */
export const MAX_U32 = 0xffff_ffff;
/** largest window either side may advertise (and largest a window may ever grow to) */
export const MAX_WINDOW = 0x7fff_ffff;
/** bounds on the maximum frame size a side may advertise */
export const MIN_MAX_FRAME_SIZE = 1024;
export const MAX_MAX_FRAME_SIZE = 64 * 1024 * 1024;

export const FrameType = {
  HELLO: 0x01,
  OPEN: 0x02,
  COLUMNS: 0x03,
  ROWS: 0x04,
  END: 0x05,
  ERROR: 0x06,
  CANCEL: 0x07,
  CREDIT: 0x08,
  PING: 0x09,
  PONG: 0x0a,
  GOAWAY: 0x0b,
} as const;

export type FrameTypeName = keyof typeof FrameType;

export const FRAME_TYPE_NAMES: ReadonlyMap<number, FrameTypeName> = new Map(
  (Object.entries(FrameType) as [FrameTypeName, number][]).map(([name, code]) => [code, name]),
);

/** frames counted against the receiver's stream and session windows (cost: header + payload) */
export const FLOW_CONTROLLED: ReadonlySet<FrameTypeName> = new Set<FrameTypeName>(['COLUMNS', 'ROWS', 'END']);

/** A cell value. JSON objects/arrays travel as JSON text (nested dates become strings). */
export type Value =
  | null
  | boolean
  | number
  | string
  | bigint
  | Date
  | Uint8Array
  | JsonObject
  | JsonValue[];
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}
export type Row = Value[];

export type Role = 'client' | 'server';

export interface Hello {
  /** session protocol versions the sender speaks */
  versions: number[];
  /** optional capabilities; the session uses the intersection */
  features: string[];
  /** `server` opens odd stream ids, `client` even ones; the two sides must differ */
  role: Role;
  /** largest payload the sender accepts in one frame */
  maxFrameSize: number;
  /** bytes of flow-controlled frames the sender buffers per stream before returning credit */
  streamWindow: number;
  /** the same, summed over all streams of the session */
  sessionWindow: number;
  /** streams the sender accepts at once */
  maxConcurrentStreams: number;
  /** free-form software identification, e.g. "svc-relay/0.1.0" */
  agent?: string;
}

export interface QueryLimits {
  maxRows?: number;
  maxBytes?: number;
}

export interface QueryOpen {
  statement: string;
  params?: Value[];
  limits?: QueryLimits;
  /** deadline, relative (the peers' clocks differ): the acceptor fails the stream with PROTO_ERR_DEADLINE after this */
  timeoutMs?: number;
  /** opaque correlation id for logs */
  tag?: string;
}

export interface Column {
  name: string;
  /** PostgreSQL type OID when known */
  typeOid?: number;
  /** type name when known */
  type?: string;
}

export interface EndInfo {
  rowCount: number;
  /** payload bytes of ROWS frames on this stream */
  byteCount: number;
  /** the acceptor stopped early at a limit */
  truncated?: boolean;
  /** command tag, e.g. "SELECT 10" */
  command?: string;
}

export interface ErrorInfo {
  code: string;
  message: string;
  retryable?: boolean;
  detail?: JsonValue;
}

export interface GoawayInfo {
  /** highest stream id opened by the receiver of GOAWAY that the sender will still serve */
  lastStreamId: number;
  code?: string;
  message?: string;
}

interface Base {
  streamId: number;
  /** reserved: senders write 0, receivers ignore bits they do not know */
  flags?: number;
}

export type HelloFrame = Base & { type: 'HELLO'; hello: Hello };
export type OpenFrame = Base & { type: 'OPEN'; open: QueryOpen };
export type ColumnsFrame = Base & { type: 'COLUMNS'; columns: Column[] };
export type RowsFrame = Base & { type: 'ROWS'; rows: Row[] };
export type EndFrame = Base & { type: 'END'; end: EndInfo };
export type ErrorFrame = Base & { type: 'ERROR'; error: ErrorInfo };
export type CancelFrame = Base & { type: 'CANCEL'; reason?: string };
export type CreditFrame = Base & { type: 'CREDIT'; increment: number };
export type PingFrame = Base & { type: 'PING'; data: Uint8Array };
export type PongFrame = Base & { type: 'PONG'; data: Uint8Array };
export type GoawayFrame = Base & { type: 'GOAWAY'; goaway: GoawayInfo };

export type Frame =
  | HelloFrame
  | OpenFrame
  | ColumnsFrame
  | RowsFrame
  | EndFrame
  | ErrorFrame
  | CancelFrame
  | CreditFrame
  | PingFrame
  | PongFrame
  | GoawayFrame;

/** what the decoder yields: the frame plus its header facts */
export type DecodedFrame = Frame & { flags: number; payloadLength: number };

/** which stream ids a frame type may use */
export const STREAM_ZERO_ONLY: ReadonlySet<FrameTypeName> = new Set<FrameTypeName>(['HELLO', 'PING', 'PONG', 'GOAWAY']);
export const STREAM_NONZERO_ONLY: ReadonlySet<FrameTypeName> = new Set<FrameTypeName>(['OPEN', 'COLUMNS', 'ROWS', 'END', 'CANCEL']);
/** payload sizes fixed by the format */
export const FIXED_PAYLOAD: ReadonlyMap<FrameTypeName, number> = new Map<FrameTypeName, number>([
  ['CREDIT', 4],
  ['PING', 8],
  ['PONG', 8],
]);
