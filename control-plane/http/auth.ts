/**
 * Bearer agent-key authentication for every route not marked `config: { public: true }`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticate, type Principal } from '../accounts/index.js';
import { ApiError } from '../errors.js';
import type { Store } from '../store/index.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
  interface FastifyContextConfig {
    /** no agent key needed */
    public?: boolean;
  }
}

export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) throw new ApiError('unauthorized', 'missing agent key');
  return req.principal;
}

const HINT = 'send the agent key as "Authorization: Bearer svc_conn_…"; get one with POST /v1/agent/account';

export function registerAuth(app: FastifyInstance, store: Store): void {
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.public || req.routeOptions.url === undefined) return;
    const header = req.headers.authorization;
    if (!header) throw new ApiError('unauthorized', `missing Authorization header; ${HINT}`, undefined, { 'WWW-Authenticate': 'Bearer' });
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m || !m[1]) throw new ApiError('unauthorized', `malformed Authorization header; ${HINT}`, undefined, { 'WWW-Authenticate': 'Bearer' });
    const principal = await authenticate(store, m[1]);
    if (!principal) throw new ApiError('unauthorized', `unknown or revoked agent key; ${HINT}`, undefined, { 'WWW-Authenticate': 'Bearer error="invalid_token"' });
    req.principal = principal;
  });
}
