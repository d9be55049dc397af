import type { FastifyBaseLogger, FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type TSchema } from 'typebox';
import type { Catalogue } from '../catalogue/index.js';
import type { Config } from '../config.js';
import type { DemoEngine } from '../demo/query.js';
import type { Store } from '../store/index.js';
import type { TunnelRegistry } from '../tunnel/index.js';
import type { RelayForwarder } from '../tunnel/forward.js';
import type { Metrics } from '../metrics.js';
import type { CredentialStore } from '../credentials/index.js';
import type { LiveRegistry } from '../live/index.js';
import type { QueryDeps } from '../query/engine.js';
import type { ConnectionCache } from '../connections/index.js';
import type { KeyCache } from '../accounts/index.js';
import { ConnectorBackend, DemoBackend, RelayBackend, type Backends } from '../query/backends.js';
import type { RunningQueries } from '../query/running.js';
import type { SqlChecker } from '../query/sql/offload.js';
import type { CheckCache } from '../query/sql/check-cache.js';
import type { CheckedQuery } from '../query/sql/index.js';
import { EarlyStarts } from '../query/early-start.js';
import { ApiError } from '../errors.js';

export type App = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, TypeBoxTypeProvider>;

/** What every route plugin is given. */
export interface Services {
  readonly config: Config;
  readonly store: Store;
  readonly catalogue: Catalogue;
  /** resolves once the demo engine is ready (it warms up in the background at start) */
  readonly demo: () => Promise<DemoEngine>;
  /** run work that shutdown must wait for (queries: money is held while they run) */
  readonly track: <T>(work: () => Promise<T>) => Promise<T>;
  /** live relay tunnels (empty until the tunnel listener runs) */
  readonly tunnels: TunnelRegistry;
  /** relay queries to tunnels other replicas sharing the store hold */
  readonly forwarder: RelayForwarder;
  /** this process's Prometheus metrics (GET /metrics) */
  readonly metrics: Metrics;
  /** the live connectors (every live target but postgres-relay) and their credential kinds */
  readonly live: LiveRegistry;
  /** bring-your-own credentials (sealed under the master key) */
  readonly credentials: CredentialStore;
  /** aborted when the control plane starts shutting down */
  readonly shutdown: AbortSignal;
  /** the statements running in this process, per connection (revocation stops them) */
  readonly running: RunningQueries;
  /** this app's SQL checks off the event loop (a worker thread, closed with the app) */
  readonly sqlChecker: SqlChecker;
  /** the demo and relay statements this app has checked, by target, scopes and text */
  readonly checkedStatements: CheckCache<CheckedQuery>;
  /** connections as this app's queries read them (a revocation through this app drops its entry) */
  readonly connections: ConnectionCache;
  /** agent keys as this app has read them (the query path's authentication) */
  readonly keys: KeyCache;
}

const depsOf = new WeakMap<Services, QueryDeps>();

/** What the query path needs, from the services (HTTP routes, MCP tools): built once per app. */
export function queryDeps(s: Services): QueryDeps {
  let deps = depsOf.get(s);
  if (!deps) {
    const checks = { checker: s.sqlChecker, cache: s.checkedStatements };
    const backends: Backends = { demo: new DemoBackend(s.demo, checks), relay: new RelayBackend(s.tunnels, checks, s.forwarder, s.shutdown), connector: new ConnectorBackend(s.live, s.credentials, s.shutdown) };
    deps = { store: s.store, catalogue: s.catalogue, limits: s.config.limits, backends, connections: s.connections, keys: s.keys, running: s.running, metrics: s.metrics, earlyStarts: new EarlyStarts() };
    depsOf.set(s, deps);
  }
  return deps;
}

export const ErrorSchema = Type.Object(
  {
    error: Type.Object({
      code: Type.String(),
      message: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
      request_id: Type.Optional(Type.String()),
    }),
  },
  { $id: 'Error' },
);

/** Response schemas for the error statuses a route may answer. */
export function errors(...statuses: number[]): Record<number, TSchema> {
  // 200 bodies are described per route in the OpenAPI document; serialised as plain JSON
  const out: Record<number, TSchema> = { 200: Type.Unknown() };
  for (const s of [401, ...statuses]) out[s] = ErrorSchema;
  return out;
}

/**
 * A list's `?limit=` (docs/api.md): digits in the query string (query strings are not coerced,
 * app.ts), an integer from 1 to `max` checked by {@link pageLimit}.
 */
export function limitParam(max: number, fallback = 100) {
  return Type.Optional(Type.String({ pattern: '^[0-9]{1,9}$', description: `page size: an integer from 1 to ${max} (default ${fallback})` }));
}

/** The page size `?limit=` asks for, `fallback` without one; outside 1…`max` it is refused (400), never clamped. */
export function pageLimit(raw: string | undefined, max: number, fallback = 100): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (Number.isInteger(n) && n >= 1 && n <= max) return n;
  const problem = `must be an integer from 1 to ${max}`;
  throw new ApiError('invalid_request', `query parameter "limit" ${problem} (default ${fallback}), not ${JSON.stringify(raw)}`, { field: 'limit', problem, in: 'query' });
}
