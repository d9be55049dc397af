/**
 * The lifecycle of one stream, as one value with explicit transitions. A stream on this side is
 * either a read half (this side opened it: `QueryStream`, stream-read.ts) or a write half (the
 * peer opened it: `IncomingQuery`, stream-write.ts); each half uses the states that apply to it.
 *
 * read half:   Open ─▶ RemoteClosed ─▶ Closed          (END / ERROR arrives, then the application reads it)
 *              Open ─▶ Reset ─▶ Closed                 (cancelled or refused, then the peer's END / ERROR arrives)
 *              RemoteClosed ─▶ Closed                  (also: cancelled with events still buffered)
 * write half:  Open ─▶ LocalClosed ─▶ Closed           (END queued behind credit, then on the wire)
 *              Open | LocalClosed ─▶ Closed            (failed, cancelled by the peer, past its deadline, session closed)
 */
import { protoError } from './errors.js';

export const StreamState = {
  /** frames flow */
  Open: 'open',
  /** write half: END is queued (half-closed for writing); nothing more may be written */
  LocalClosed: 'local-closed',
  /** read half: the peer's END or ERROR (or the session's failure) is queued behind the events still to be read */
  RemoteClosed: 'remote-closed',
  /** read half: abandoned here (cancelled, or refused by the peer's GOAWAY); frames in flight are dropped until the peer's END or ERROR */
  Reset: 'reset',
  /** nothing more happens on this stream */
  Closed: 'closed',
} as const;

export type StreamState = (typeof StreamState)[keyof typeof StreamState];

type Transitions = Readonly<Record<StreamState, readonly StreamState[]>>;

export const READ_TRANSITIONS: Transitions = {
  open: ['remote-closed', 'reset'],
  'local-closed': [],
  'remote-closed': ['closed'],
  reset: ['closed'],
  closed: [],
};

export const WRITE_TRANSITIONS: Transitions = {
  open: ['local-closed', 'closed'],
  'local-closed': ['closed'],
  'remote-closed': [],
  reset: [],
  closed: [],
};

/** checks a transition against a half's table; an illegal one is a bug here, not the peer's */
export function transition(table: Transitions, id: number, from: StreamState, to: StreamState): StreamState {
  if (!table[from].includes(to)) throw protoError('PROTO_ERR_INTERNAL', `stream ${id}: no transition from ${from} to ${to}`);
  return to;
}
