/**
 * pg-read: a read-only statement on a PostgreSQL the caller does not control, the one way svc
 * runs one (svc-relay's executor, the `postgres` live target, the external-PostgreSQL demo
 * engine). Imports only protocol/ (the wire guard) and `pg`, so svc-relay's package carries it.
 *
 *  - client.ts   GuardedPgClient: every message passes the wire guard from the start-up on
 *  - portal.ts   the read as one write and one round trip (BEGIN READ ONLY … ROLLBACK, Sync)
 *  - run.ts      runReadOnly: caps, deadline, abort, backpressure, cancel, the connection's fate
 *  - cancel.ts   CancelRequest
 *  - sqlstate.ts what a failure means, by SQLSTATE (each caller maps it to its own errors)
 */
export { GuardedPgClient } from './client.js';
export { sendCancelRequest, within, type CancelTarget } from './cancel.js';
export { PIN_SEARCH_PATH, RELEASE_SESSION_LOCKS } from './portal.js';
export {
  CANCEL_TIMEOUT_MS,
  runReadOnly,
  SETTLE_TIMEOUT_MS,
  valueBytes,
  type ReadFailure,
  type ReadOnlyRequest,
  type ReadOutcome,
  type ReadResult,
  type ShapedRow,
} from './run.js';
export { classifyPgError, sqlstateOf, type PgErrorInfo, type PgErrorKind } from './sqlstate.js';
