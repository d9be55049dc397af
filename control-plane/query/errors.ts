/**
 * The query path's error mapping, in one place. Every backend (query/backends.ts) answers
 * ApiError only: it maps its source's own failures at its boundary with these constructors
 * (the SQL policy's refusals, a statement the source's database rejected, the demo engines'
 * errors), so the engine around it (query/engine.ts) decides charging and auditing from ApiError
 * alone, and the HTTP error handler (http/errors.ts) is the only place that answers them.
 */
import { DemoQueryError } from '../demo/query.js';
import { ApiError, isApiError } from '../errors.js';
import { SqlPolicyError } from './sql/index.js';

/** The SQL policy's refusal (parse, check, rewrite) as the API answers it: 400 invalid_sql or 403 scope_violation. */
export function policyRefusal(err: SqlPolicyError): ApiError {
  return err.code === 'invalid_sql'
    ? new ApiError('invalid_sql', `${err.message}${err.position !== undefined ? ` (at character ${err.position + 1})` : ''}`, { ...err.detail, ...(err.position !== undefined ? { position: err.position } : {}) })
    : new ApiError('scope_violation', err.message, { ...err.detail });
}

/** `err` as the API answers it when it is the SQL policy's refusal; anything else unchanged. */
export function mapPolicyRefusal(err: unknown): unknown {
  return err instanceof SqlPolicyError ? policyRefusal(err) : err;
}

/**
 * What a statement stopped by `signal` is answered: the abort's reason when it is an answer of
 * ours (a revocation or expiry, query/running.ts; the shutdown, app.ts; the backstop deadline,
 * query/backends.ts), else `otherwise()` (e.g. the source's own deadline). Every place that turns
 * an abort into an answer asks this, so a shutdown is never answered (and charged) as a timeout.
 */
export function abortAnswer(signal: AbortSignal | undefined, otherwise: () => ApiError): ApiError {
  return signal?.aborted === true && isApiError(signal.reason) ? signal.reason : otherwise();
}

/**
 * The reason the control plane's shutdown stops the live statements still running after its drain
 * with (app.ts): 503 with Retry-After; the engine gives the reservation back, so it is not charged.
 */
export function shutdownStop(): ApiError {
  return new ApiError('service_unavailable', 'the service is shutting down: the statement was stopped at its source and not charged; retry', { reason: 'shutting_down', retry_after_seconds: 1 }, { 'Retry-After': '1' });
}

/**
 * The reason a statement whose agent closed its connection before the answer is stopped with
 * (routes/connections.ts): never sent, it is what the audit trail records.
 */
export function clientClosed(): ApiError {
  return new ApiError('client_closed_request', 'the agent closed its connection before the answer: the statement was stopped at its source');
}

/** SQLSTATEs of a refusal to read rather than an error in the statement: insufficient privilege, a write in a read-only transaction */
const REFUSED_SQLSTATES = new Set(['42501', '25006']);

/**
 * A statement the source's database refused or rejected, as the API answers it: a privilege or
 * read-only refusal (42501, 25006; for MySQL the caller says) is 403 scope_violation, any other
 * error of the statement 400 invalid_sql. `details` carries the SQLSTATE and MySQL's errno; not
 * the server's position, which points into the rewritten statement (`sql_executed`), not the
 * agent's text, where `details.position` means the parser's position (docs/api.md).
 */
export function statementRejected(
  source: string,
  message: string,
  o: { readonly sqlstate?: string | undefined; readonly errno?: number | undefined; readonly refused?: boolean } = {},
): ApiError {
  const details = {
    ...(o.errno !== undefined ? { errno: o.errno } : {}),
    ...(o.sqlstate !== undefined ? { sqlstate: o.sqlstate } : {}),
  };
  const refused = o.refused ?? (o.sqlstate !== undefined && REFUSED_SQLSTATES.has(o.sqlstate));
  return refused
    ? new ApiError('scope_violation', `${source} refused the statement: ${message}`, Object.keys(details).length > 0 ? details : undefined)
    : new ApiError('invalid_sql', `${source} rejected the statement: ${message}`, Object.keys(details).length > 0 ? details : undefined);
}

/** The demo engines' error as the API answers it. */
export function demoFailure(err: DemoQueryError): ApiError {
  switch (err.code) {
    case 'DEMO_ERR_TIMEOUT':
      return new ApiError('query_timeout', `${err.message}; narrow the query (filters, LIMIT, aggregates)`);
    case 'DEMO_ERR_BUSY':
      return new ApiError('service_unavailable', `${err.message}; retry shortly`, undefined, { 'Retry-After': String(err.retryAfter ?? 1) });
    case 'DEMO_ERR_COOLDOWN': {
      const wait = err.retryAfter ?? 1;
      return new ApiError('rate_limited', err.message, { retry_after_seconds: wait }, { 'Retry-After': String(wait) });
    }
    case 'DEMO_ERR_UNAVAILABLE':
      return new ApiError('service_unavailable', `${err.message}; retry shortly`);
    case 'DEMO_ERR_SQL':
      return statementRejected('the database', err.message, { sqlstate: err.sqlState });
  }
}

/** `err` as the API answers it when it is a demo engine's error; anything else unchanged. */
export function mapDemoFailure(err: unknown): unknown {
  return err instanceof DemoQueryError ? demoFailure(err) : err;
}
