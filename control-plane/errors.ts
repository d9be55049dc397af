/**
 * One registry of the API's error codes (docs/api.md, "Errors"), and the error type every module
 * throws when a request must fail with one of them. The HTTP error handler is the only place that
 * turns these into responses.
 */

export const API_ERRORS = {
  invalid_request: { status: 400, summary: 'The body or query string failed validation; `details` says which field.' },
  invalid_scope: { status: 400, summary: "A scope is not of the target's grammar; the message lists the grammar." },
  invalid_sql: { status: 400, summary: 'The statement does not parse; `details.position` is the parser position.' },
  unauthorized: { status: 401, summary: 'Missing, malformed, unknown or deleted agent key.' },
  payment_required: { status: 402, summary: 'The trial allowance is used up and the wallet cannot pay; top up.' },
  scope_violation: { status: 403, summary: "The statement reaches outside the connection's scopes, or is not a read." },
  not_found: { status: 404, summary: 'Unknown id, or an id of another organization.' },
  method_not_allowed: { status: 405, summary: 'The path exists but not with this method.' },
  conflict: { status: 409, summary: 'The request conflicts with the current state (e.g. a token already used).' },
  connection_expired: { status: 410, summary: 'The connection is past its TTL; open a new one.' },
  connection_revoked: { status: 410, summary: 'The connection was revoked; open a new one.' },
  request_timeout: { status: 408, summary: 'The request was not received in time (headers or body too slow).' },
  client_closed_request: { status: 499, summary: 'Never answered (nobody is left to answer): the audit code of a statement whose agent closed its connection before the answer; it was stopped at its source and charged the query price, as at its deadline.' },
  payload_too_large: { status: 413, summary: 'The request body is over the limit.' },
  unsupported_media_type: { status: 415, summary: 'The body is not JSON.' },
  headers_too_large: { status: 431, summary: 'The request headers are over the size limit.' },
  rate_limited: { status: 429, summary: 'Too many requests; retry after `Retry-After` seconds.' },
  internal_error: { status: 500, summary: 'An unexpected failure on our side; the request id helps us find it.' },
  not_implemented: { status: 501, summary: 'This capability exists in the catalogue but is not available yet.' },
  dashboard_only: { status: 501, summary: 'A path owned by the dashboard; use the dashboard URL in the message.' },
  relay_unavailable: { status: 503, summary: "The connection's relay has no live tunnel." },
  service_unavailable: { status: 503, summary: 'The service is starting or shutting down; retry shortly.' },
  query_timeout: { status: 504, summary: 'The statement ran past its deadline and was cancelled at the database.' },
} as const satisfies Record<string, { status: number; summary: string }>;

export type ApiErrorCode = keyof typeof API_ERRORS;

export class ApiError extends Error {
  readonly code: ApiErrorCode;
  readonly status: number;
  readonly details: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    code: ApiErrorCode,
    message: string,
    details?: Record<string, unknown>,
    headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.status = API_ERRORS[code].status;
    this.details = details;
    this.headers = headers;
  }
}

export function isApiError(err: unknown): err is ApiError {
  return err instanceof ApiError;
}
