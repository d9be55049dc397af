/**
 * The live connectors by catalogue target id, and the credential kinds they need. `postgres-relay`
 * is not here: it needs no credential and runs over the relay tunnel (query/relay.ts).
 */
import type { Config } from '../config.js';
import { ApiError } from '../errors.js';
import { reservedFromUrl } from '../credentials/database.js';
import { MysqlConnector, mysqlCredentialKind } from './mysql/index.js';
import { PostgresConnector, postgresCredentialKind } from './postgres.js';
import { restConnectors, restCredentialKinds, type EnginePool } from './rest/index.js';
import type { CredentialKindDef, LiveConnector } from './types.js';
import type { SqlChecker } from '../query/sql/offload.js';

export type { CredentialFields, CredentialKindDef, LiveConnector, LiveLimits, LiveRunContext, PreparedLiveQuery } from './types.js';
export { PostgresConnector, postgresCredentialKind } from './postgres.js';
export { MysqlConnector, mysqlCredentialKind, mysqlPolicy } from './mysql/index.js';

/**
 * The reason a statement (or a listing) running with a credential replaced or deleted meanwhile
 * is stopped with: 503 with Retry-After, not charged (the engine gives its reservation back).
 */
export function credentialChangedWhileRunning(kind: string): ApiError {
  return new ApiError(
    'service_unavailable',
    `the organization's ${kind} credential was replaced or deleted while this statement waited or ran: it was stopped (if it had started, its source was told to cancel it) and not charged; retry (it runs with the current credential)`,
    { connector_kind: kind, reason: 'credential_changed', retry_after_seconds: 1 },
    { 'Retry-After': '1' },
  );
}

export class LiveRegistry {
  private readonly byTarget: ReadonlyMap<string, LiveConnector>;
  readonly kinds: readonly CredentialKindDef[];
  /** what runs with each organization's credential of each kind on this replica (`org` NUL `kind`) */
  private readonly using = new Map<string, Set<AbortController>>();

  constructor(connectors: readonly LiveConnector[], kinds: readonly CredentialKindDef[]) {
    this.byTarget = new Map(connectors.map((c) => [c.targetId, c]));
    this.kinds = kinds;
  }

  connector(targetId: string): LiveConnector | undefined {
    return this.byTarget.get(targetId);
  }

  /** Checks a credential of `kind` being registered with each connector using it (see LiveConnector.checkCredential). */
  async checkCredential(kind: string, secret: string, options: Readonly<Record<string, unknown>>): Promise<void> {
    for (const c of this.byTarget.values()) if (c.credentialKind === kind) await c.checkCredential?.(secret, options);
  }

  /**
   * Work about to run with the organization's credential of `kind`, taken before the credential
   * is read: its signal aborts (credentialChangedWhileRunning) if the credential is replaced or
   * deleted through this replica before `release`, so nothing keeps reading with the old one.
   */
  use(orgId: string, kind: string): { readonly signal: AbortSignal; release(): void } {
    const key = `${orgId}\0${kind}`;
    const ac = new AbortController();
    let set = this.using.get(key);
    if (!set) this.using.set(key, (set = new Set()));
    set.add(ac);
    return {
      signal: ac.signal,
      release: () => {
        const now = this.using.get(key);
        now?.delete(ac);
        if (now?.size === 0) this.using.delete(key);
      },
    };
  }

  /**
   * The organization's credential of `kind` was replaced or deleted: the connectors using it let
   * go of it, and what runs with it here is stopped at its source.
   */
  forget(orgId: string, kind: string): void {
    for (const c of this.byTarget.values()) if (c.credentialKind === kind) c.forget?.(orgId);
    const running = this.using.get(`${orgId}\0${kind}`);
    for (const ac of running ?? []) ac.abort(credentialChangedWhileRunning(kind));
  }

  /** Ends what the connectors hold (shutdown). */
  close(): void {
    for (const c of this.byTarget.values()) c.close?.();
  }
}

/**
 * The connectors of one app. `restEngines` is the app's pool of query engines for the API and
 * file targets, `checker` its SQL check worker: the app makes both (the pool sized by
 * SVC_LIVE_REST_ENGINES) and closes them at shutdown. `shutdown` is the app's shutdown signal
 * (aborted after its drain): the API and file targets' gates close then (./rest/index.ts).
 */
export function liveRegistry(config: Config, restEngines: EnginePool, checker: SqlChecker, shutdown?: AbortSignal): LiveRegistry {
  const network = {
    allowPrivate: config.liveAllowPrivate,
    // the control plane's own databases are never a customer database
    reserved: [...reservedFromUrl(config.databaseUrl), ...reservedFromUrl(config.demoDatabaseUrl)],
  };
  const connectors: LiveConnector[] = [new PostgresConnector(network, checker, config.livePoolSize), new MysqlConnector(network, checker, config.livePoolSize), ...restConnectors(config.restApis, restEngines, shutdown)];
  return new LiveRegistry(connectors, [postgresCredentialKind, mysqlCredentialKind, ...restCredentialKinds]);
}
