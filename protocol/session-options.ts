/**
 * Session options: their defaults and bounds (checked once, at construction), the HELLO this side
 * sends, and the negotiation with the peer's HELLO (protocol/README.md, "Session lifecycle").
 */
import type { Clock } from './clock.js';
import { DEFAULT_MAX_FRAME_SIZE } from './codec.js';
import { protoError, type ProtocolError } from './errors.js';
import { MAX_MAX_FRAME_SIZE, MAX_WINDOW, MIN_MAX_FRAME_SIZE, SUPPORTED_VERSIONS, type Hello, type Role } from './frames.js';

export interface SessionOptions {
  /** `server` (the control plane) opens odd stream ids, `client` (the relay) even ones */
  role: Role;
  /** protocol versions offered in HELLO (default [1]) */
  versions?: number[];
  /** features offered in HELLO; the session uses the intersection */
  features?: string[];
  /** software identification sent in HELLO */
  agent?: string;
  /** largest payload this side accepts (default 1 MiB) */
  maxFrameSize?: number;
  /** bytes this side buffers per stream before the sender must wait (default 1 MiB) */
  streamWindow?: number;
  /** bytes this side buffers over all streams (default 16 MiB) */
  sessionWindow?: number;
  /** streams the peer may have open towards this side at once (default 256) */
  maxConcurrentStreams?: number;
  /** target payload size of ROWS frames this side sends (default 64 KiB) */
  dataFrameSize?: number;
  /** bytes this side queues waiting for credit before sends fail with PROTO_ERR_QUEUE_FULL (default 16 MiB) */
  maxQueuedBytes?: number;
  /** the peer must complete HELLO within this (default 10 000 ms) */
  helloTimeoutMs?: number;
  /** ping interval; 0 disables pings (default 15 000 ms) */
  pingIntervalMs?: number;
  /** intervals without a pong before the peer is declared dead (default 2) */
  maxMissedPongs?: number;
  /** control frames (PING, PONG, CREDIT, CANCEL, GOAWAY, empty ROWS, frames for cancelled streams) allowed per flood window (default 10 000) */
  maxControlFrames?: number;
  /** the flood window (default 1000 ms) */
  floodWindowMs?: number;
  /** injectable time source (default: the real clock) */
  clock?: Clock;
}

function positiveInt(name: string, v: number | undefined, def: number, min: number, max: number): number {
  const x = v ?? def;
  if (!Number.isInteger(x) || x < min || x > max) throw protoError('PROTO_ERR_INVALID_ARGUMENT', `${name} must be an integer in ${min}..${max}, got ${String(v)}`);
  return x;
}

export interface ResolvedOptions {
  role: Role;
  versions: number[];
  features: string[];
  agent: string | undefined;
  maxFrameSize: number;
  streamWindow: number;
  sessionWindow: number;
  maxConcurrentStreams: number;
  dataFrameSize: number;
  maxQueuedBytes: number;
  helloTimeoutMs: number;
  pingIntervalMs: number;
  maxMissedPongs: number;
  maxControlFrames: number;
  floodWindowMs: number;
}

export function resolveOptions(o: SessionOptions): ResolvedOptions {
  if (o.role !== 'client' && o.role !== 'server') throw protoError('PROTO_ERR_INVALID_ARGUMENT', `role must be "client" or "server", got ${String(o.role)}`);
  const versions = o.versions ?? [...SUPPORTED_VERSIONS];
  if (!Array.isArray(versions) || versions.length === 0 || versions.length > 16 || !versions.every((v) => Number.isInteger(v) && v >= 1 && v <= 255)) {
    throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'versions must be 1..16 integers in 1..255');
  }
  const features = o.features ?? [];
  if (!Array.isArray(features) || features.length > 64 || !features.every((f) => typeof f === 'string' && f.length <= 64)) {
    throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'features must be at most 64 strings of at most 64 characters');
  }
  if (o.agent !== undefined && (typeof o.agent !== 'string' || o.agent.length > 256)) throw protoError('PROTO_ERR_INVALID_ARGUMENT', 'agent must be a string of at most 256 characters');
  const streamWindow = positiveInt('streamWindow', o.streamWindow, 1024 * 1024, 1024, MAX_WINDOW);
  return {
    role: o.role,
    versions,
    features,
    agent: o.agent,
    maxFrameSize: positiveInt('maxFrameSize', o.maxFrameSize, DEFAULT_MAX_FRAME_SIZE, MIN_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE),
    streamWindow,
    sessionWindow: positiveInt('sessionWindow', o.sessionWindow, Math.max(16 * 1024 * 1024, streamWindow), 1024, MAX_WINDOW),
    maxConcurrentStreams: positiveInt('maxConcurrentStreams', o.maxConcurrentStreams, 256, 0, 0x7fff_ffff),
    dataFrameSize: positiveInt('dataFrameSize', o.dataFrameSize, 64 * 1024, 64, MAX_MAX_FRAME_SIZE),
    maxQueuedBytes: positiveInt('maxQueuedBytes', o.maxQueuedBytes, 16 * 1024 * 1024, 0, Number.MAX_SAFE_INTEGER),
    helloTimeoutMs: positiveInt('helloTimeoutMs', o.helloTimeoutMs, 10_000, 1, 0x7fff_ffff),
    pingIntervalMs: positiveInt('pingIntervalMs', o.pingIntervalMs, 15_000, 0, 0x7fff_ffff),
    maxMissedPongs: positiveInt('maxMissedPongs', o.maxMissedPongs, 2, 1, 1000),
    maxControlFrames: positiveInt('maxControlFrames', o.maxControlFrames, 10_000, 1, 0x7fff_ffff),
    floodWindowMs: positiveInt('floodWindowMs', o.floodWindowMs, 1000, 1, 0x7fff_ffff),
  };
}

export interface Negotiated {
  version: number;
  features: string[];
  peer: Hello;
}

/** the HELLO this side sends */
export function helloFor(o: ResolvedOptions): Hello {
  const hello: Hello = {
    versions: o.versions,
    features: o.features,
    role: o.role,
    maxFrameSize: o.maxFrameSize,
    streamWindow: o.streamWindow,
    sessionWindow: o.sessionWindow,
    maxConcurrentStreams: o.maxConcurrentStreams,
  };
  if (o.agent !== undefined) hello.agent = o.agent;
  return hello;
}

/** checks the peer's HELLO against this side's options: PROTO_ERR_BAD_HELLO or PROTO_ERR_VERSION_MISMATCH */
export function negotiate(o: ResolvedOptions, h: Hello): Negotiated {
  const badHello = (m: string): ProtocolError => protoError('PROTO_ERR_BAD_HELLO', m);
  if (h.role === o.role) throw badHello(`both sides claim the role "${h.role}"`);
  if (h.maxFrameSize < MIN_MAX_FRAME_SIZE || h.maxFrameSize > MAX_MAX_FRAME_SIZE) throw badHello(`maxFrameSize ${h.maxFrameSize} is outside ${MIN_MAX_FRAME_SIZE}..${MAX_MAX_FRAME_SIZE}`);
  if (h.streamWindow < 1024 || h.streamWindow > MAX_WINDOW) throw badHello(`streamWindow ${h.streamWindow} is outside 1024..${MAX_WINDOW}`);
  if (h.sessionWindow < 1024 || h.sessionWindow > MAX_WINDOW) throw badHello(`sessionWindow ${h.sessionWindow} is outside 1024..${MAX_WINDOW}`);
  const common = h.versions.filter((v) => o.versions.includes(v));
  if (common.length === 0) {
    throw protoError('PROTO_ERR_VERSION_MISMATCH', `peer speaks versions [${h.versions.join(', ')}], this side [${o.versions.join(', ')}]`);
  }
  const version = Math.max(...common);
  const features = o.features.filter((f) => h.features.includes(f));
  return { version, features, peer: h };
}
