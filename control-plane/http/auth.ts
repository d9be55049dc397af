/**
 * Bearer agent-key authentication for every route not marked `config: { public: true }`. A route
 * marked `config: { keyRereadByHandler: true }` may be answered from the app's key cache: its
 * handler reads the key's revocation from the store before anything acts for it (the query path,
 * see accounts `KeyCache`); every other route reads the key from the store. A request with a key
 * from the cache that is answered with an error before its handler has read the key (its rate
 * limit, a body refused by parsing or validation, the refused-statement budget) reads it then
 * (`cachedKeyAnswer`, run by the error handler): a revoked key is answered 401 there too, as from
 * the store.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { KeyCache, Principal } from '../accounts/index.js';
import { ApiError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
    /**
     * the principal came from the key cache and its revocation has not been read from the store
     * since: the handler sets it false once it has (the query route, after runQuery)
     */
    principalCached?: boolean;
  }
  interface FastifyContextConfig {
    /** no agent key needed */
    public?: boolean;
    /** the handler reads the key's revocation from the store before acting: a cached key will do */
    keyRereadByHandler?: boolean;
  }
}

export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) throw new ApiError('unauthorized', 'missing agent key');
  return req.principal;
}

const HINT = 'send the agent key as "Authorization: Bearer svc_conn_…"; get one with POST /v1/agent/account';

/** What a missing, revoked or unknown key is answered. */
function unknownKey(): ApiError {
  return new ApiError('unauthorized', `unknown or revoked agent key; ${HINT}`, undefined, { 'WWW-Authenticate': 'Bearer error="invalid_token"' });
}

/**
 * For the error handler (http/errors.ts): a request whose key came from the cache and has not been
 * read from the store since is answered 401 instead of its error when the key is revoked (or gone)
 * in the store now, as authentication from the store would have answered it; the key is then
 * forgotten by the cache. When the store cannot say, the error stands.
 */
export function cachedKeyAnswer(keys: KeyCache): (req: FastifyRequest, api: ApiError) => Promise<ApiError | undefined> {
  return async (req, api) => {
    if (req.principalCached !== true || !req.principal || api.code === 'unauthorized') return undefined;
    req.principalCached = false;
    const revoked = await keys.revoked(req.principal.keyId).catch(() => false);
    return revoked ? unknownKey() : undefined;
  };
}

/**
 * Whether a request carries more than one Authorization header (rawHeaders: name, value, …). Node
 * keeps the first; a proxy in front may check another, so such a request is refused (401).
 */
export function severalAuthorizations(req: FastifyRequest): boolean {
  const raw = req.raw.rawHeaders;
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === 'authorization' && ++n > 1) return true;
  return false;
}

export function registerAuth(app: FastifyInstance, keys: KeyCache): void {
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.public || req.routeOptions.url === undefined) return;
    const header = req.headers.authorization;
    // Node keeps the first of several Authorization headers; a proxy in front may check another
    if (header && severalAuthorizations(req)) throw new ApiError('unauthorized', `more than one Authorization header; ${HINT}`, undefined, { 'WWW-Authenticate': 'Bearer' });
    if (!header) throw new ApiError('unauthorized', `missing Authorization header; ${HINT}`, undefined, { 'WWW-Authenticate': 'Bearer' });
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m || !m[1]) throw new ApiError('unauthorized', `malformed Authorization header; ${HINT}`, undefined, { 'WWW-Authenticate': 'Bearer' });
    const found = req.routeOptions.config?.keyRereadByHandler ? await keys.recent(m[1]) : await keys.fresh(m[1]).then((principal) => (principal ? { principal, cached: false } : undefined));
    if (!found) throw unknownKey();
    req.principal = found.principal;
    req.principalCached = found.cached;
  });
}
