/**
 * The contract between the query path (query/engine.ts) and the live connectors (#7): every live
 * target except `postgres-relay` is one LiveConnector. The query path parses scopes, asks the
 * connector to check and rewrite the statement (`prepare`), reserves money, resolves and decrypts
 * the organization's credential for `credentialKind`, calls `run`, then settles and audits exactly
 * as for a demo query. A connector never sees the agent key, never logs the credential, and never
 * puts the credential (or any part of it) in an error message.
 */
import type { ParsedScopes, Target } from '../catalogue/index.js';
import type { ReadQueryResult } from '../results/index.js';
import type { SchemaListing } from '../query/schema.js';
import type { CredentialFields } from './credential-fields.js';

export type { CredentialFields } from './credential-fields.js';

export interface LiveLimits {
  /** deadline for the whole statement (fetching pages included), ms */
  readonly timeoutMs: number;
  /** most rows returned; one more row is never held (truncated = true) */
  readonly maxRows: number;
  /** most bytes (UTF-8 JSON of the rows) returned */
  readonly maxBytes: number;
}

/** A statement checked against the connection's scopes, ready to run. */
export interface PreparedLiveQuery {
  /** the statement that runs (rewritten); audited as `sql_executed` */
  readonly sql: string;
  /** agent-facing names of the tables read, sorted, unique */
  readonly tables: readonly string[];
  /** agent-facing table name → the row predicate applied to it (null = all rows), for scope_applied and the audit */
  readonly rowFilters: Readonly<Record<string, string | null>>;
  /** tables the scopes allow (agent-facing names), for scope_applied; '*' when the scopes allow every table */
  readonly tablesAllowed: readonly string[] | '*';
  /** connector-private data carried from prepare to run (e.g. which API tables to fetch) */
  readonly plan?: unknown;
}

/** One credential kind, as `GET /v1/connections/credentials/kinds` describes it and `POST` validates it. */
export interface CredentialKindDef {
  readonly kind: string;
  /** catalogue targets that use it */
  readonly targets: readonly string[];
  readonly description: string;
  /** what `secret` must hold, e.g. "a restricted read-only key rk_test_… or rk_live_…" */
  readonly secret: { readonly description: string; readonly example: string };
  /** the non-secret `options` it accepts */
  readonly options: readonly { readonly name: string; readonly required: boolean; readonly description: string }[];
  /** how it is validated, in words (shown to agents) */
  readonly validation: string;
  /**
   * Throws ApiError('invalid_request', …, {field}) when the secret or options are wrong. The
   * message says what is expected and never contains the secret or any part of it. Returns the
   * normalized options to store.
   */
  validate(secret: string, options: Readonly<Record<string, unknown>>): Record<string, unknown>;
}

export interface LiveRunContext {
  readonly orgId: string;
  readonly connectionId: string;
  readonly scopes: ParsedScopes;
  readonly credential: CredentialFields;
  readonly limits: LiveLimits;
  /** aborted at the deadline or when the control plane shuts down: stop fetching, cancel the statement */
  readonly signal: AbortSignal;
  /**
   * called once the statement is sent to its source (it is charged from then on when its agent
   * leaves); a connector that does not declare {@link LiveConnector.signalsStart} never calls it
   */
  readonly onStart?: () => void;
}

export interface LiveConnector {
  /** catalogue target id, e.g. `postgres`, `mysql`, `stripe` */
  readonly targetId: string;
  /** the credential kind it needs (docs/credentials-and-live-targets.md: the kind of the same name) */
  readonly credentialKind: string;
  /**
   * `run` calls `ctx.onStart` itself, when the statement is sent to the source (after a wait for
   * a pooled connection); without it, the statement counts as started when `run` is called
   */
  readonly signalsStart?: boolean;
  /**
   * Parse, check and rewrite the agent's statement for these scopes. Throws SqlPolicyError
   * (`invalid_sql` / `scope_violation`) or ApiError (`invalid_scope`, …). No I/O.
   */
  prepare(sqlText: string, scopes: ParsedScopes, target: Target, caller?: { readonly tenant: string }): PreparedLiveQuery | Promise<PreparedLiveQuery>;
  /**
   * Run it. Throws ApiError with a contract code: `query_timeout` past the deadline (after
   * cancelling at the source), `invalid_sql` when the source rejects the statement,
   * `scope_violation` when the source refuses access, `invalid_request` (details.reason
   * `credential_rejected`, naming the kind to register again) when the source refuses the stored
   * credential, `service_unavailable` when the source cannot be reached. Never `unauthorized`: that
   * code is about the agent key.
   */
  run(q: PreparedLiveQuery, ctx: LiveRunContext): Promise<ReadQueryResult>;
  /**
   * The tables and columns `ctx.scopes` allow (GET /v1/connections/{id}/schema): from the
   * source's own catalog, read with a statement of the connector's (never the agent's SQL), or
   * from the connector's definitions (API specs, file headers). Throws ApiError like `run`.
   */
  describe?(target: Target, ctx: LiveRunContext): Promise<SchemaListing>;
  /**
   * At registration, after the kind's `validate`: throws ApiError when the credential can already
   * be known to fail every query (a database host resolving to an address no query may reach:
   * 400 `address_not_allowed`, as the query would answer). Never contacts the source itself.
   */
  checkCredential?(secret: string, options: Readonly<Record<string, unknown>>): Promise<void>;
  /** The organization's credential was replaced or deleted: anything held for it (pooled connections) ends. */
  forget?(orgId: string): void;
  /** Ends everything it holds (shutdown). */
  close?(): void;
}
