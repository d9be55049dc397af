/**
 * One rule for every string the API accepts: no NUL byte and no lone UTF-16 surrogate, in path
 * parameters, the query string and the JSON body (object keys included, at any depth; a body
 * nested more than 64 levels is refused as such). PostgreSQL
 * cannot store a NUL in text, and a lone surrogate is not Unicode; either would otherwise fail
 * deep inside a handler. Checked before validation, so no route has to remember it.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';
import { emptyBodyIsAbsent } from './body.js';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const MAX_DEPTH = 64;

type Where = 'path' | 'query' | 'body';
const LABEL: Record<Where, string> = { path: 'path parameter', query: 'query parameter', body: 'body field' };

/** Why `s` is refused, or undefined when it is fine. */
export function badString(s: string): string | undefined {
  if (s.includes('\u0000')) return 'contains a NUL byte (\\u0000), which is not accepted in any string';
  if (LONE_SURROGATE.test(s)) return 'contains a lone UTF-16 surrogate, which is not valid Unicode';
  return undefined;
}

function join(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path ? `${path}.${key}` : key;
}

/** The first refused string in `value` as `{field, problem}`, walking arrays and object keys. */
export function findBadString(value: unknown, path = '', depth = 0): { field: string; problem: string } | undefined {
  if (typeof value === 'string') {
    const problem = badString(value);
    return problem ? { field: path, problem } : undefined;
  }
  if (value === null || typeof value !== 'object') return undefined;
  // nothing the API accepts is nested this deep; refusing it keeps every string within reach
  if (depth > MAX_DEPTH) return { field: path, problem: `is nested more than ${MAX_DEPTH} levels deep` };
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findBadString(value[i], join(path, i), depth + 1);
      if (found) return found;
    }
    return undefined;
  }
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    const keyProblem = badString(key);
    if (keyProblem) return { field: join(path, JSON.stringify(key).slice(1, -1)), problem: `has a key that ${keyProblem}` };
    const found = findBadString(v, join(path, key), depth + 1);
    if (found) return found;
  }
  return undefined;
}

export function checkRequestStrings(req: FastifyRequest): void {
  const parts: [Where, unknown][] = [
    ['path', req.params],
    ['query', req.query],
    ['body', req.body],
  ];
  for (const [where, value] of parts) {
    const found = findBadString(value);
    if (!found) continue;
    const field = found.field || where;
    const label = found.field ? `${LABEL[where]} ${JSON.stringify(field)}` : `the ${where}`;
    throw new ApiError('invalid_request', `${label} ${found.problem}`, { field, in: where, problem: found.problem });
  }
}

/**
 * Registers the rule for every route. `/mcp` and `/v1/mcp` are left to their tools: each tool call goes through
 * the API in process and meets the same rule there, answered as a tool error naming the field.
 */
export const STRING_GUARD_EXEMPT: ReadonlySet<string> = new Set(['/mcp', '/v1/mcp']);

export function registerStringGuard(app: FastifyInstance): void {
  app.addHook('preValidation', async (req) => {
    if (STRING_GUARD_EXEMPT.has(req.routeOptions.url ?? '')) return;
    checkRequestStrings(req);
  });
}

/** The path of the first key that could alter prototypes (`__proto__`, or `constructor.prototype`). */
function findProtoKey(value: unknown, path = '', depth = 0): { field: string; key: string } | undefined {
  if (value === null || typeof value !== 'object' || depth > MAX_DEPTH) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findProtoKey(value[i], join(path, i), depth + 1);
      if (found) return found;
    }
    return undefined;
  }
  const obj = value as Record<string, unknown>;
  for (const key of Object.keys(obj)) {
    const v = obj[key];
    if (key === '__proto__') return { field: join(path, key), key };
    if (key === 'constructor' && v !== null && typeof v === 'object' && Object.prototype.hasOwnProperty.call(v, 'prototype')) return { field: join(path, key), key };
    const found = findProtoKey(v, join(path, key), depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** bodies refused as no JSON text at all (empty, not UTF-8, not JSON) */
const unreadableBodies = new WeakSet<ApiError>();

function unreadable(message: string): ApiError {
  const err = new ApiError('invalid_request', message, { field: 'body' });
  unreadableBodies.add(err);
  return err;
}

/**
 * Whether `err` refused a body that is no JSON text at all (empty, not UTF-8, not JSON), from
 * this parser or fastify's own, rather than JSON the route did not accept: the MCP route answers
 * those as JSON-RPC's parse error (mcp/index.ts).
 */
export function isUnreadableBody(err: unknown): boolean {
  if (err instanceof ApiError) return unreadableBodies.has(err);
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof SyntaxError || code === 'FST_ERR_CTP_INVALID_JSON_BODY' || code === 'FST_ERR_CTP_EMPTY_JSON_BODY';
}

/**
 * The JSON body parser: `JSON.parse` (which makes `__proto__` an own key, never a prototype), then
 * a refusal that names a `__proto__` key or a `constructor` key holding `prototype`, wherever it is.
 */
export function parseJsonBody(text: string): unknown {
  if (text.length === 0) throw unreadable('the body is empty; send a JSON object');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw unreadable('the body is not valid JSON');
  }
  const proto = findProtoKey(parsed);
  if (proto) {
    const what = proto.key === '__proto__' ? 'a "__proto__" key' : 'a "constructor" key holding "prototype"';
    throw new ApiError('invalid_request', `body field ${JSON.stringify(proto.field)} is refused: the body has ${what}, which could alter objects' prototypes; rename that key`, {
      field: proto.field,
      in: 'body',
      problem: 'forbidden key',
    });
  }
  return parsed;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/**
 * The body as text: JSON is UTF-8 (RFC 8259); a declared charset other than UTF-8 is `415`, bytes
 * that are not UTF-8 are `400` (never decoded into U+FFFD and run).
 */
export function decodeJsonBody(contentType: string | undefined, body: Buffer): string {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '')?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new ApiError('unsupported_media_type', `the body is declared as ${charset}; send JSON in UTF-8 (Content-Type: application/json or application/json; charset=utf-8)`);
  }
  try {
    return utf8.decode(body);
  } catch {
    throw unreadable('the body is not valid UTF-8; send JSON encoded as UTF-8');
  }
}

export function registerJsonParser(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    try {
      // zero bytes is no body (handled by the route's body rule, http/body.ts), not an empty JSON text
      if (body.length === 0 && emptyBodyIsAbsent(req)) return done(null, undefined);
      done(null, parseJsonBody(decodeJsonBody(req.headers['content-type'], typeof body === 'string' ? Buffer.from(body, 'utf8') : body)));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  // Any other content type: a request that announces zero bytes sends no body, whatever type it
  // names (`curl -X POST -d ''` says application/x-www-form-urlencoded), so it is handled as one
  // without a body; one with bytes is refused unread (415).
  app.addContentTypeParser('*', (req, _payload, done) => {
    if (req.headers['content-length'] === '0' && req.headers['transfer-encoding'] === undefined && emptyBodyIsAbsent(req)) return done(null, undefined);
    done(new ApiError('unsupported_media_type', 'send the body as JSON with Content-Type: application/json'), undefined);
  });
}
