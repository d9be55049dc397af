/**
 * protocol/ — the relay tunnel's wire format and session (frames, streams, flow control).
 * Built in the relay issues; nothing here yet.
 */
export const PROTOCOL_VERSION = 1;
