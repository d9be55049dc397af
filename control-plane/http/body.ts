/**
 * Requests without a body. A POST whose route declares its JSON body optional may be sent with
 * no body at all (no content-type, or `Content-Type: application/json` with nothing after it):
 * it is handled as `{}`. A route that takes no body accepts none or `{}`, and refuses anything
 * else (a field it would ignore is an unknown field). A route whose body is required, sent without one, is answered with the
 * fields it needs (`400 invalid_request`, `details.missing`), as is an object body missing some
 * of them; a body that is not an object (`null`, an array, a number) is refused as such.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';

/** What a route declares of its request body. */
export type DeclaredBody =
  | { readonly kind: 'none' }
  /** a JSON object; `optional`: the body may be left out (TypeBox `Type.Optional`) */
  | { readonly kind: 'object'; readonly optional: boolean; readonly required: readonly string[] }
  /** anything else (the MCP routes' JSON-RPC message): left to the route */
  | { readonly kind: 'other' };

/** The route schema's `body`, read from TypeBox's (non-enumerable) markers and JSON Schema keywords. */
export function declaredBody(schema: unknown): DeclaredBody {
  const body = (schema as { body?: unknown } | undefined)?.body;
  if (body === undefined || body === null || typeof body !== 'object') return { kind: 'none' };
  const b = body as { type?: unknown; required?: unknown; '~optional'?: unknown };
  if (b.type !== 'object') return { kind: 'other' };
  const required = Array.isArray(b.required) ? b.required.filter((x): x is string => typeof x === 'string') : [];
  return { kind: 'object', optional: b['~optional'] === true, required };
}

const quoted = (fields: readonly string[]): string => fields.map((f) => JSON.stringify(f)).join(', ');

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

/**
 * Whether an empty body (zero bytes) sent as JSON counts as no body for this request: yes unless
 * the route takes something other than an object (there an empty body stays `400`, as before).
 */
export function emptyBodyIsAbsent(req: FastifyRequest): boolean {
  return declaredBody(req.routeOptions.schema).kind !== 'other';
}

/** The body as the route's validation should see it, or the error that answers the request. */
export function settleBody(declared: DeclaredBody, body: unknown): { body: unknown } | { error: ApiError } {
  if (declared.kind === 'none') return noBody(body);
  if (declared.kind !== 'object') return { body };
  if (body === undefined) {
    if (declared.optional) return { body: {} };
    const fields = declared.required;
    return {
      error: new ApiError(
        'invalid_request',
        fields.length > 0
          ? `no body was sent; send a JSON object with the required ${fields.length === 1 ? 'field' : 'fields'} ${quoted(fields)} (Content-Type: application/json)`
          : 'no body was sent; send a JSON object (Content-Type: application/json)',
        { field: fields[0] ?? 'body', in: 'body', problem: 'is required', missing: [...fields] },
      ),
    };
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return {
      error: new ApiError(
        'invalid_request',
        `the body must be a JSON object, not ${kindOf(body)}${declared.optional ? ' (or leave the body out)' : ''}`,
        { field: 'body', in: 'body', problem: 'must be a JSON object' },
      ),
    };
  }
  const missing = declared.required.filter((f) => !Object.prototype.hasOwnProperty.call(body, f));
  if (missing.length > 0) {
    const message = missing.length === 1 ? `body field ${quoted(missing)} is required` : `body fields ${quoted(missing)} are required`;
    return { error: new ApiError('invalid_request', message, { field: missing[0] as string, in: 'body', problem: 'is required', missing }) };
  }
  return { body };
}

/**
 * A route that takes no body (revoke, replay, the DELETEs) accepts none, or an empty object; a
 * field it would ignore is refused like any unknown field (a `connection_id` sent in the body of
 * `DELETE /v1/agent/webhook` must not quietly remove the organization's default instead).
 */
function noBody(body: unknown): { body: unknown } | { error: ApiError } {
  if (body === undefined) return { body };
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const field = Object.keys(body)[0];
    if (field === undefined) return { body };
    return { error: new ApiError('invalid_request', `body field ${JSON.stringify(field)} is not a known field: this operation takes no body (leave it out)`, { field, in: 'body', problem: 'is not a known field' }) };
  }
  return { error: new ApiError('invalid_request', `this operation takes no body, not ${kindOf(body)}: leave it out`, { field: 'body', in: 'body', problem: 'must be left out' }) };
}

/** Applies {@link settleBody} to every route before validation. */
export function registerBodyRules(app: FastifyInstance): void {
  app.addHook('preValidation', async (req) => {
    // not an operation of the API (no route: the 404; the dashboard's paths, /healthz, /metrics): left to its handler
    const schema = req.routeOptions.schema as { hide?: unknown } | undefined;
    if (schema === undefined || schema.hide === true) return;
    const settled = settleBody(declaredBody(schema), req.body);
    if ('error' in settled) throw settled.error;
    if (settled.body !== req.body) req.body = settled.body;
  });
}
