/**
 * The backends a statement runs on, one interface for all: the demo engines, `postgres-relay`
 * (the relay tunnel) and the live connectors (`postgres`, `mysql`, the API and file targets). Each
 * prepares a statement (its policy: parse, check, rewrite) and runs it (rows capped while they are
 * read). Which one a target uses is data: the catalogue's `backend` field. Everything around a
 * backend (connection, admission, reservation, deadline, settlement, audit, error answers) is
 * query/engine.ts, the same for all of them.
 */
import type { ParsedScopes, Target } from '../catalogue/index.js';
import type { CredentialStore } from '../credentials/index.js';
import { scrub } from '../credentials/database.js';
import { DemoQueryError, type DemoEngine } from '../demo/query.js';
import { mapDemoFailure, mapPolicyRefusal } from './errors.js';
import { scopeSettings } from './scope-settings.js';
import type { ReadQueryResult } from '../results/index.js';
import { ApiError, isApiError } from '../errors.js';
import type { LiveRegistry } from '../live/index.js';
import type { LiveConnector, LiveRunContext, PreparedLiveQuery } from '../live/types.js';
import type { TunnelRegistry } from '../tunnel/index.js';
import type { RelayForwarder } from '../tunnel/forward.js';
import { describeOnRelay, relayPolicy, runOnRelay } from './relay.js';
import { definedTable, type SchemaListing } from './schema.js';
import { periodPredicate, rowFiltersOf, type CheckedQuery, type ScopedTable, type SqlPolicy } from './sql/index.js';
import { CheckCache } from './sql/check-cache.js';
import type { SqlChecker } from './sql/offload.js';

/** A statement checked against a connection's scopes, ready to run. */
export interface PreparedStatement {
  /** the statement that runs (rewritten); audited as `sql_executed` */
  readonly sql: string;
  /** agent-facing names of the tables read, sorted, unique */
  readonly tables: readonly string[];
  /** agent-facing table name → the row predicate enforced beneath the statement (null: every row) */
  readonly rowFilters: Readonly<Record<string, string | null>>;
  /** tables the scopes allow (agent-facing names); '*' when they allow every table */
  readonly tablesAllowed: readonly string[] | '*';
  /** backend-private data carried from prepare to run */
  readonly plan: unknown;
}

export interface RunContext {
  readonly orgId: string;
  readonly connectionId: string;
  readonly scopes: ParsedScopes;
  readonly limits: { readonly timeoutMs: number; readonly maxRows: number; readonly maxBytes: number };
  /** aborted when the statement must stop (revocation, expiry, relay deletion): it is stopped at its source */
  readonly signal: AbortSignal;
  /** a free organization (never funded a wallet): the demo engines admit it in their free class */
  readonly trial: boolean;
  /** the client's address (free work is shared fairly by it) */
  readonly address?: string | undefined;
  /**
   * called when the statement reaches its source: a demo engine admitted it, or a `postgres` /
   * `mysql` statement got one of its organization's pooled connections and was sent (each may
   * wait first), a relay statement was sent to the relay (query/relay.ts runOnRelay); the other
   * connectors call it at once
   */
  readonly onStart?: () => void;
}

/** What describing a connection's tables needs: its scopes, deadline and caps, and a signal that stops it. */
export type DescribeContext = Pick<RunContext, 'orgId' | 'connectionId' | 'scopes' | 'limits' | 'signal'>;

export interface Backend {
  /**
   * Parse, check and rewrite the agent's statement for these scopes. Throws ApiError only (the
   * policy's refusals as `invalid_sql` / `scope_violation`, query/errors.ts). Reads nothing at the source.
   */
  prepare(sqlText: string, scopes: ParsedScopes, target: Target, caller: { readonly tenant: string }): Promise<PreparedStatement>;
  /** Run it at its source. Throws ApiError only: each backend maps its source's failures (query/errors.ts). */
  run(q: PreparedStatement, ctx: RunContext): Promise<ReadQueryResult>;
  /**
   * The tables and columns the scopes allow (GET /v1/connections/{id}/schema), from the source's
   * own catalog or the definitions svc holds; never through the agent's SQL. Throws ApiError.
   */
  describe(target: Target, ctx: DescribeContext): Promise<SchemaListing>;
}

/**
 * How the demo and relay targets' statements are checked: the app's check worker, and its cache
 * of statements checked and rewritten, by target, scopes and text.
 */
export interface PolicyChecks {
  readonly checker: SqlChecker;
  readonly cache: CheckCache<CheckedQuery>;
}

export function demoPolicy(target: Target, scopes: ParsedScopes): SqlPolicy {
  const dataset = target.dataset;
  if (!dataset) throw new Error(`${target.id} is not a demo target`);
  const allowed = new Map<string, ScopedTable>();
  for (const t of dataset.tables) {
    if (scopes.read !== 'all' && !scopes.read.has(t.name)) continue;
    allowed.set(t.name, {
      name: t.name,
      schema: dataset.schema,
      table: t.name,
      predicate: t.timeColumn ? periodPredicate(t.timeColumn, scopes.periods) : null,
    });
  }
  return { allowed, known: dataset.tables.map((t) => t.name), schemas: [dataset.schema] };
}

/** A statement under a PostgreSQL-dialect policy of ours (demo, relay), through the check cache. */
async function preparePolicy(checks: PolicyChecks, target: Target, scopes: ParsedScopes, policy: SqlPolicy, sqlText: string, tenant: string): Promise<PreparedStatement & { readonly plan: PolicyPlan }> {
  const key = CheckCache.key(target.id, scopes.normalized, sqlText);
  let checked = checks.cache.get(key);
  if (!checked) {
    checked = await checks.checker.check(sqlText, policy, tenant).catch((err: unknown) => {
      throw mapPolicyRefusal(err);
    });
    checks.cache.set(key, checked);
  }
  return {
    sql: checked.sql,
    tables: checked.tables,
    rowFilters: rowFiltersOf(policy.allowed, checked.tables),
    tablesAllowed: scopes.read === 'all' ? '*' : [...new Set([...policy.allowed.values()].map((t) => t.name))].sort(),
    plan: { explain: checked.kind === 'explain', allowed: [...policy.allowed.values()] },
  };
}

interface PolicyPlan {
  readonly explain: boolean;
  readonly allowed: readonly ScopedTable[];
}

/**
 * `work`, or its abort reason as soon as `signal` aborts (a demo statement still waiting for an
 * engine is then answered at once; the engine skips it when its turn comes).
 */
function untilStopped<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => (signal.removeEventListener('abort', onAbort), resolve(v)),
      (e: unknown) => (signal.removeEventListener('abort', onAbort), reject(e)),
    );
  });
}

/**
 * `signal`, also aborted (with the shutdown's reason) when the process-long `shutdown` aborts;
 * `release()` detaches it once its statement is done. Not `AbortSignal.any`: each signal it makes
 * stays referenced from the long-lived one on Node.js 20 (one per statement, never freed).
 */
export function untilShutdown(signal: AbortSignal, shutdown: AbortSignal | undefined): { readonly signal: AbortSignal; release(): void } {
  if (!shutdown) return { signal, release: () => undefined };
  const linked = new AbortController();
  const onShutdown = (): void => linked.abort(shutdown.reason);
  const onSignal = (): void => linked.abort(signal.reason);
  const release = (): void => {
    shutdown.removeEventListener('abort', onShutdown);
    signal.removeEventListener('abort', onSignal);
  };
  if (signal.aborted) onSignal();
  else if (shutdown.aborted) onShutdown();
  else {
    shutdown.addEventListener('abort', onShutdown, { once: true });
    signal.addEventListener('abort', onSignal, { once: true });
  }
  return { signal: linked.signal, release };
}

/** The demo datasets, on the demo engines (embedded workers or SVC_DEMO_DATABASE_URL). */
export class DemoBackend implements Backend {
  constructor(
    private readonly engine: () => Promise<DemoEngine>,
    private readonly checks: PolicyChecks,
  ) {}

  async prepare(sqlText: string, scopes: ParsedScopes, target: Target, caller: { readonly tenant: string }): Promise<PreparedStatement> {
    if (!target.dataset) throw new ApiError('internal_error', `${target.id} has no dataset`);
    return preparePolicy(this.checks, target, scopes, demoPolicy(target, scopes), sqlText, caller.tenant);
  }

  async run(q: PreparedStatement, ctx: RunContext): Promise<ReadQueryResult> {
    const plan = q.plan as PolicyPlan;
    const work = this.engine()
      .catch(() => {
        throw new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the demo datasets could not be loaded');
      })
      .then((engine) =>
        engine.run({
          sql: q.sql,
          direct: plan.explain,
          settings: scopeSettings(plan.allowed, ctx.scopes.periods),
          tenant: ctx.orgId,
          timeoutMs: ctx.limits.timeoutMs,
          maxRows: ctx.limits.maxRows,
          maxBytes: ctx.limits.maxBytes,
          signal: ctx.signal,
          // free organizations (never funded a wallet) share the engines' free slice, by client address
          trial: ctx.trial,
          ...(ctx.address ? { address: ctx.address } : {}),
          ...(ctx.onStart ? { onStart: ctx.onStart } : {}),
        }),
      );
    // the engines' errors as the API answers them (a stop's reason is an ApiError already)
    return untilStopped(work, ctx.signal).catch((err: unknown) => {
      throw mapDemoFailure(err);
    });
  }

  /** From the dataset's definition: its tables the scopes name, every column (periods restrict rows, not columns). */
  async describe(target: Target, ctx: DescribeContext): Promise<SchemaListing> {
    if (!target.dataset) throw new ApiError('internal_error', `${target.id} has no dataset`);
    const read = ctx.scopes.read;
    const tables = target.dataset.tables.filter((t) => read === 'all' || read.has(t.name)).map((t) => definedTable(t.name, t.columns, (c) => c.notNull === false));
    return { tables, missing: [], truncated: false };
  }
}

/** `postgres-relay`: the customer's PostgreSQL through the relay's tunnel. */
export class RelayBackend implements Backend {
  constructor(
    private readonly tunnels: TunnelRegistry,
    private readonly checks: PolicyChecks,
    /** reaches tunnels other replicas hold (none: this replica's tunnels only) */
    private readonly forward?: RelayForwarder,
    /** aborted when the control plane shuts down: statements are cancelled at the relay's database */
    private readonly shutdown?: AbortSignal,
  ) {}

  async prepare(sqlText: string, scopes: ParsedScopes, target: Target, caller: { readonly tenant: string }): Promise<PreparedStatement> {
    return preparePolicy(this.checks, target, scopes, relayPolicy(scopes), sqlText, caller.tenant);
  }

  async run(q: PreparedStatement, ctx: RunContext): Promise<ReadQueryResult> {
    // after the shutdown's drain, as a live statement: stopped at the database, answered 503, not charged
    const stop = untilShutdown(ctx.signal, this.shutdown);
    try {
      // started once sent to the relay: refused or unsent before that (no tunnel, an outdated
      // relay, a holder that refuses it), an agent that left meanwhile is not charged
      return await runOnRelay(this.tunnels, ctx.scopes.relay as string, q.sql, ctx.limits, {
        signal: stop.signal,
        onStart: ctx.onStart,
        ...(this.forward ? { forward: { via: this.forward, connectionId: ctx.connectionId } } : {}),
      });
    } finally {
      stop.release();
    }
  }

  describe(_target: Target, ctx: DescribeContext): Promise<SchemaListing> {
    return describeOnRelay(this.tunnels, ctx, this.forward);
  }
}

/** The live connectors (`postgres`, `mysql`, the API and file targets), with the organization's credential. */
export class ConnectorBackend implements Backend {
  constructor(
    private readonly live: LiveRegistry,
    private readonly credentials: CredentialStore,
    /** aborted when the control plane shuts down: statements are cancelled at their source */
    private readonly shutdown: AbortSignal | undefined,
  ) {}

  private connector(target: Target): LiveConnector {
    const c = this.live.connector(target.id);
    if (!c) throw new ApiError('not_implemented', `queries on the live target ${target.id} are not available in this version; see GET /v1/connections/targets for the queryable ones`, { target_id: target.id });
    return c;
  }

  async prepare(sqlText: string, scopes: ParsedScopes, target: Target, caller: { readonly tenant: string }): Promise<PreparedStatement> {
    const connector = this.connector(target);
    let prepared: PreparedLiveQuery;
    try {
      prepared = await connector.prepare(sqlText, scopes, target, caller);
    } catch (err) {
      throw mapPolicyRefusal(err);
    }
    return { sql: prepared.sql, tables: prepared.tables, rowFilters: prepared.rowFilters, tablesAllowed: prepared.tablesAllowed, plan: { connector, prepared } };
  }

  async run(q: PreparedStatement, ctx: RunContext): Promise<ReadQueryResult> {
    const { connector, prepared } = q.plan as { connector: LiveConnector; prepared: PreparedLiveQuery };
    // a pooled connector says when its statement is sent (it may wait for a connection first)
    const onStart = ctx.onStart;
    if (!connector.signalsStart) onStart?.();
    return this.withCredential(connector, ctx, (live) => connector.run(prepared, connector.signalsStart && onStart ? { ...live, onStart } : live));
  }

  async describe(target: Target, ctx: DescribeContext): Promise<SchemaListing> {
    const connector = this.connector(target);
    const describe = connector.describe?.bind(connector);
    if (!describe) throw new ApiError('not_implemented', `listing the tables of ${target.id} is not available in this version`, { target_id: target.id });
    return this.withCredential(connector, ctx, (live) => describe(target, live));
  }

  /** `work` with the organization's credential, opened only now, under the deadline and the shutdown. */
  private async withCredential<T>(connector: LiveConnector, ctx: DescribeContext, work: (live: LiveRunContext) => Promise<T>): Promise<T> {
    // taken before the credential is read: replaced or deleted from now on, the work is stopped
    const use = this.live.use(ctx.orgId, connector.credentialKind);
    let credential: LiveRunContext['credential'];
    try {
      // never logged, never in an error or audit event
      credential = await this.credentials.resolve(ctx.orgId, connector.credentialKind);
    } catch (err) {
      use.release();
      throw err;
    }
    const deadline = new AbortController();
    // a backstop past the connector's own deadline: answered as that deadline (query/errors.ts abortAnswer)
    const timer = setTimeout(() => deadline.abort(new ApiError('query_timeout', `the statement ran past its ${ctx.limits.timeoutMs} ms deadline and was stopped`)), ctx.limits.timeoutMs + 1000);
    const stop = untilShutdown(AbortSignal.any([deadline.signal, ctx.signal, use.signal]), this.shutdown);
    try {
      return await work({ orgId: ctx.orgId, connectionId: ctx.connectionId, scopes: ctx.scopes, credential, limits: ctx.limits, signal: stop.signal });
    } catch (err) {
      // defence in depth: whatever a connector says, the credential does not leave in it
      if (!isApiError(err)) throw err;
      const clean = (text: string): string => scrub(text, credential.secret);
      const details = err.details ? (JSON.parse(clean(JSON.stringify(err.details))) as Record<string, unknown>) : undefined;
      throw new ApiError(err.code, clean(err.message), details, err.headers);
    } finally {
      clearTimeout(timer);
      stop.release();
      use.release();
    }
  }
}

/** The backends by the catalogue's `backend` kind. */
export interface Backends {
  readonly demo: Backend;
  readonly relay: Backend;
  readonly connector: Backend;
}

export function backendFor(backends: Backends, target: Target): Backend {
  return backends[target.backend];
}
