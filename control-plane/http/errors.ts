/**
 * The one place errors become responses: `{"error": {"code", "message", "details"?, "request_id"}}`
 * with the contract's status. Bad input is never a 500, and no stack trace ever leaves.
 */
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { API_ERRORS, ApiError, isApiError, type ApiErrorCode } from '../errors.js';
import { registerMethodIndex } from './methods.js';

export interface ErrorBody {
  error: { code: ApiErrorCode; message: string; details?: Record<string, unknown>; request_id: string };
}

export function sendError(reply: FastifyReply, req: FastifyRequest, err: ApiError): FastifyReply {
  const body: ErrorBody = { error: { code: err.code, message: err.message, request_id: String(req.id) } };
  const details = err.code === 'invalid_request' ? withPlace(err.details, req) : err.details;
  if (details && Object.keys(details).length > 0) body.error.details = details;
  if (err.headers) for (const [k, v] of Object.entries(err.headers)) void reply.header(k, v);
  return reply.code(API_ERRORS[err.code].status).type('application/json; charset=utf-8').send(body);
}

const has = (o: unknown, key: string): boolean => typeof o === 'object' && o !== null && Object.prototype.hasOwnProperty.call(o, key);

/**
 * An `invalid_request` naming its field (`details.field`) says where that field is
 * (`details.in`, docs/api.md "Errors"), also when a handler's own check refused it rather than
 * the route's schema: the path parameter, query parameter or body field of that name (its first
 * part, for `options.ca` or `auto_reload.amount_cents`) in this request, else the body for a
 * request that carries one (a required field left out), else the query.
 */
function withPlace(details: Readonly<Record<string, unknown>> | undefined, req: FastifyRequest): Readonly<Record<string, unknown>> | undefined {
  const field = details?.['field'];
  if (!details || typeof field !== 'string' || details['in'] !== undefined) return details;
  const first = field.split('.')[0] as string;
  const place =
    field === 'body' || has(req.body, first) ? 'body' : has(req.params, first) ? 'path' : has(req.query, first) ? 'query' : req.method === 'GET' || req.method === 'HEAD' || req.method === 'DELETE' ? 'query' : 'body';
  return { ...details, in: place };
}

interface ValidationIssue {
  instancePath?: string;
  schemaPath?: string;
  message?: string;
  keyword?: string;
  params?: Record<string, unknown>;
}

function fieldOf(issue: ValidationIssue, context: string | undefined): string {
  const path = (issue.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
  const extra = issue.params?.['additionalProperty'] ?? issue.params?.['missingProperty'];
  const field = [path, typeof extra === 'string' ? extra : ''].filter(Boolean).join('.');
  return field || (context ?? 'body');
}

/** the values a `const` or `enum` issue names */
function valuesOf(issue: ValidationIssue): unknown[] {
  if (issue.keyword === 'enum') return Array.isArray(issue.params?.['allowedValues']) ? (issue.params['allowedValues'] as unknown[]) : [];
  return issue.params && 'allowedValue' in issue.params ? [issue.params['allowedValue']] : [];
}

const UNION = /\/(?:anyOf|oneOf)\//;

/**
 * The values a field may take when the issue is that it is none of them: an `enum` names them all,
 * a union of literals (`anyOf` of `const`s) gives one issue per literal at the same place. Only
 * when they are all it takes: a literal in a union beside another type (a number), or in one of
 * the object shapes a union takes, names nothing (the field takes more than those values).
 */
function allowedValues(issues: ValidationIssue[], issue: ValidationIssue): unknown[] | undefined {
  if (issue.keyword !== 'enum' && issue.keyword !== 'const') return undefined;
  const at = (issue.schemaPath ?? '').replace(/\/(?:const|enum)$/, '');
  const union = /^(.*\/anyOf)\/\d+$/.exec(at)?.[1];
  if (union === undefined) {
    // a literal or enum within one branch of a union (e.g. one object shape of several)
    if (UNION.test(at)) return undefined;
    const values = valuesOf(issue);
    return values.length > 0 ? values : undefined;
  }
  if (UNION.test(union)) return undefined;
  // every branch of the union failed at this value on its literal (a TypeBox Literal has a type beside its const)
  const branches = new Map<string, ValidationIssue[]>();
  for (const i of issues) {
    const path = i.schemaPath ?? '';
    if (!path.startsWith(`${union}/`)) continue;
    const branch = /^\/(\d+)\/(?:const|enum|type)$/.exec(path.slice(union.length))?.[1];
    if (branch === undefined || i.instancePath !== issue.instancePath) return undefined;
    branches.set(branch, [...(branches.get(branch) ?? []), i]);
  }
  const values: unknown[] = [];
  for (const failed of branches.values()) {
    const literal = failed.filter((i) => i.keyword === 'const' || i.keyword === 'enum');
    if (literal.length === 0) return undefined;
    values.push(...literal.flatMap(valuesOf));
  }
  return values.length > 0 ? values : undefined;
}

const PART: Record<string, { in: 'body' | 'query' | 'path' | 'header'; label: string }> = {
  body: { in: 'body', label: 'body field' },
  querystring: { in: 'query', label: 'query parameter' },
  params: { in: 'path', label: 'path parameter' },
  headers: { in: 'header', label: 'header' },
};

/** Fastify's own errors (validation, parsing, limits) mapped onto the contract. */
export function toApiError(err: FastifyError & { validation?: ValidationIssue[]; validationContext?: string }): ApiError {
  if (isApiError(err)) return err;
  if (err.validation && err.validation.length > 0) {
    const issue = err.validation[0] as ValidationIssue;
    // fastify's part names (querystring, params) in the words the rest of the API uses (http/strings.ts)
    const where = PART[err.validationContext ?? 'body'] ?? { in: 'body', label: 'body field' };
    const field = fieldOf(issue, where.in);
    let problem = issue.message ?? 'is invalid';
    if (issue.keyword === 'additionalProperties') problem = 'is not a known field';
    if (issue.keyword === 'required') problem = 'is required';
    const allowed = allowedValues(err.validation, issue);
    if (allowed) problem = `must be one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}`;
    return new ApiError('invalid_request', `${where.label} ${JSON.stringify(field)} ${problem}`, { field, problem, in: where.in, ...(allowed ? { allowed } : {}) });
  }
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('payload_too_large', 'the request body is over the size limit; send a smaller statement or body');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', 'send the body as JSON with Content-Type: application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_request', 'the body is empty; send a JSON object', { field: 'body' });
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('invalid_request', 'Content-Length does not match the body');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      // the router's message quotes the whole path back
      return new ApiError('invalid_request', 'a path parameter is too long; ids are at most 200 characters', { in: 'path' });
    case 'FST_ERR_BAD_URL':
      return new ApiError('invalid_request', 'the request path is not valid: a percent-encoded byte sequence is not UTF-8', { in: 'path' });
    default:
      break;
  }
  if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return new ApiError('invalid_request', 'the body is not valid JSON', { field: 'body' });
  }
  const status = typeof err.statusCode === 'number' ? err.statusCode : 500;
  if (status === 413) return new ApiError('payload_too_large', 'the request body is over the size limit');
  if (status === 415) return new ApiError('unsupported_media_type', 'send the body as JSON with Content-Type: application/json');
  if (status >= 400 && status < 500) return new ApiError('invalid_request', err.message || 'the request is invalid');
  return new ApiError('internal_error', 'an unexpected error occurred; retry, and quote the request_id if it persists');
}

/**
 * Errors fastify raises before routing (a path that does not decode, FST_ERR_BAD_URL), which the
 * error handler does not see: the same contract body.
 */
export function frameworkErrors(error: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  void sendError(reply, req, toApiError(error));
}

/**
 * `answerFirst`: what answers instead of `api` for this request, if anything (http/auth.ts
 * `cachedKeyAnswer`: a key taken from the key cache and revoked meanwhile is answered 401).
 * Call it before the routes: a request no route takes is `405` when its path exists with other
 * methods (http/methods.ts), else `404`.
 */
export function registerErrorHandling(app: FastifyInstance, answerFirst?: (req: FastifyRequest, api: ApiError) => Promise<ApiError | undefined>): void {
  app.setErrorHandler(async (error: FastifyError, req, reply) => {
    const api = toApiError(error);
    if (api.status >= 500) {
      // an answer the code chose (a relay without its tunnel, a source that cannot be reached) is
      // a warning with its code, no stack (its message can quote the source); anything else is an
      // error with its stack, internal_error included: the code answers it for a failure of ours
      // it did not expect (query/engine.ts translate), and its messages are ours
      if (isApiError(error) && api.code !== 'internal_error') req.log.warn({ code: api.code, status: api.status }, 'request answered with a server-side error');
      else req.log.error({ err: { message: error.message, code: error.code, stack: error.stack } }, 'request failed');
    }
    // sent here, not returned: an async error handler's returned reply would be sent again
    sendError(reply, req, (answerFirst && (await answerFirst(req, api))) || api);
  });
  const methodNotAllowed = registerMethodIndex(app);
  app.setNotFoundHandler((req, reply) =>
    sendError(reply, req, methodNotAllowed(req) ?? new ApiError('not_found', `no route ${req.method} ${req.url.split('?')[0]}; the API is described at /openapi.json`)),
  );
}

/**
 * Requests Node's HTTP parser refuses before fastify sees them (headers over the limit, a
 * malformed request line, a client too slow to send its headers) get the same
 * `{"error": {code, message, request_id}}` body as every other error, then the socket is closed.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  let status: number;
  let code: ApiErrorCode;
  let message: string;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    code = 'headers_too_large';
    message = 'the request headers are over the size limit; send fewer or smaller headers';
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    code = 'request_timeout';
    message = 'the request was not received in time; send it again';
  } else {
    status = 400;
    code = 'invalid_request';
    message = 'the request is not valid HTTP/1.1 (request line or headers malformed)';
  }
  const body = JSON.stringify({ error: { code, message, request_id: `req_${randomBytes(9).toString('base64url')}` } });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };
