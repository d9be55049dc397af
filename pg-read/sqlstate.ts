/**
 * What a failed PostgreSQL read means, by its SQLSTATE: one table for every caller of pg-read
 * (svc-relay's executor, the `postgres` live target, the external-PostgreSQL demo engine). Each
 * caller maps the kind to its own error at its boundary (relay error codes, API errors, demo
 * engine errors); the table only says what happened.
 */
import pg from 'pg';

export type PgErrorKind =
  /** 57014: statement_timeout, or a cancel at the database */
  | 'query_canceled'
  /** 25006: a write (or a switch to read-write) in the read-only transaction */
  | 'read_only'
  /** 42501: the role may not read (or call) what the statement names */
  | 'insufficient_privilege'
  /** 42601 "cannot insert multiple commands into a prepared statement": more than one statement */
  | 'multiple_statements'
  /**
   * 08P01 "bind message supplies N parameters, but prepared statement … requires M": the
   * parameters do not match the statement's $n. A protocol-violation SQLSTATE, but the connection
   * is fine and the same query fails the same way again: the statement's error, not a lost connection
   */
  | 'parameter_count'
  /** class 08 (otherwise), or no SQLSTATE but a socket error's code (ECONNRESET, EPIPE…) */
  | 'connection'
  /** 57P01 admin_shutdown, 57P03 cannot_connect_now: the server is going away or not up yet */
  | 'server_shutdown'
  /** the rest of class 57 (operator intervention: crash shutdown, database dropped, idle session timeout…) */
  | 'operator_intervention'
  /** 53300 */
  | 'too_many_connections'
  /** the rest of class 53 (out of memory, disk full…) */
  | 'insufficient_resources'
  /** any other SQLSTATE: the statement's own error (syntax, unknown column, division by zero…) */
  | 'statement'
  /** neither a SQLSTATE nor an error code (e.g. pg's own "Connection terminated unexpectedly") */
  | 'unknown';

export interface PgErrorInfo {
  readonly kind: PgErrorKind;
  /** the server's SQLSTATE (absent for a socket error) */
  readonly sqlstate: string | undefined;
  readonly message: string;
  /** 1-based character position in the statement the server pointed at, when it did */
  readonly position: number | undefined;
  /** parameter_count: what the query supplied and the statement takes */
  readonly parameters?: { readonly supplied: number; readonly required: number };
}

const SQLSTATE = /^[0-9A-Z]{5}$/;
const MULTIPLE = /multiple commands/;
const BIND_COUNT = /^bind message supplies (\d+) parameters?, but prepared statement "[^"]*" requires (\d+)$/;

/** exact SQLSTATEs first, then classes (the first two characters) */
const BY_SQLSTATE: Readonly<Record<string, PgErrorKind>> = {
  '57014': 'query_canceled',
  '25006': 'read_only',
  '42501': 'insufficient_privilege',
  '57P01': 'server_shutdown',
  '57P03': 'server_shutdown',
  '53300': 'too_many_connections',
};
const BY_CLASS: Readonly<Record<string, PgErrorKind>> = {
  '08': 'connection',
  '57': 'operator_intervention',
  '53': 'insufficient_resources',
};

/** The SQLSTATE of an error the server sent (a pg DatabaseError), else undefined. */
export function sqlstateOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { code?: unknown; severity?: unknown };
  if (typeof e.code !== 'string' || !SQLSTATE.test(e.code)) return undefined;
  // (a socket error's code can look like one: EPIPE)
  return err instanceof pg.DatabaseError || typeof e.severity === 'string' ? e.code : undefined;
}

export function classifyPgError(err: unknown): PgErrorInfo {
  const e = (typeof err === 'object' && err !== null ? err : {}) as { code?: unknown; message?: unknown; position?: unknown };
  const message = typeof e.message === 'string' ? e.message : String(err);
  const sqlstate = sqlstateOf(err);
  const position = typeof e.position === 'string' && /^\d+$/.test(e.position) ? Number(e.position) : undefined;
  if (!sqlstate) return { kind: typeof e.code === 'string' ? 'connection' : 'unknown', sqlstate, message, position };
  if (sqlstate === '42601' && MULTIPLE.test(message)) return { kind: 'multiple_statements', sqlstate, message, position };
  if (sqlstate === '08P01') {
    const bind = BIND_COUNT.exec(message);
    if (bind) return { kind: 'parameter_count', sqlstate, message, position, parameters: { supplied: Number(bind[1]), required: Number(bind[2]) } };
  }
  const kind = BY_SQLSTATE[sqlstate] ?? BY_CLASS[sqlstate.slice(0, 2)] ?? 'statement';
  return { kind, sqlstate, message, position };
}
