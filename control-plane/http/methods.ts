/**
 * `405 method_not_allowed` for a path that exists, but not with the request's method (docs/api.md,
 * "Errors"), with an `Allow` header listing the methods it takes (RFC 9110 §15.5.6); a path no
 * route matches stays `404 not_found`. Whether a path exists is asked of fastify's own router
 * (`findRoute` with the request's path, so path parameters match as they do when routing), once for
 * each method some route was registered with: HEAD is listed where fastify answers it (its HEAD
 * routes for the GET routes). A route marked `config: { refusesMethod: true }` is one that answers
 * 405 itself (GET and DELETE on the MCP paths): its method is not listed.
 */
import type { FastifyInstance, FastifyRequest, HTTPMethods } from 'fastify';
import { ApiError } from '../errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** the route exists only to answer 405 (its method is not offered): left out of `Allow` (literal URLs only) */
    refusesMethod?: boolean;
  }
}

/**
 * Collects the methods of every route registered after this call (call it before the routes), and
 * returns what answers a request no route took: the 405 for its path, or undefined (a 404).
 */
export function registerMethodIndex(app: FastifyInstance): (req: FastifyRequest) => ApiError | undefined {
  const methods = new Set<string>();
  /** `METHOD /literal/url` of the routes that refuse their method */
  const refusing = new Set<string>();
  app.addHook('onRoute', (r) => {
    for (const method of Array.isArray(r.method) ? r.method : [r.method]) {
      methods.add(method);
      if (r.config?.refusesMethod !== true) continue;
      if (/[:*]/.test(r.url)) throw new Error(`refusesMethod is for literal URLs only: ${method} ${r.url}`);
      refusing.add(`${method} ${r.url}`);
    }
  });
  return (req) => {
    const path = req.url.split('?')[0] ?? req.url;
    const allowed = [...methods]
      .filter((m) => m !== req.method && !refusing.has(`${m} ${path}`) && app.findRoute({ method: m as HTTPMethods, url: req.url }) !== null)
      .sort();
    if (allowed.length === 0) return undefined;
    const allow = allowed.join(', ');
    return new ApiError('method_not_allowed', `${req.method} is not offered on ${path}; it takes ${allow} (the API is described at /openapi.json)`, { allow: allowed }, { Allow: allow });
  };
}
