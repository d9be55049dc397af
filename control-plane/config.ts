/**
 * Configuration, read from the environment and validated once at start-up (docs/configuration.md).
 * Every problem is reported at once, with the variable's name, before anything listens.
 */
import path from 'node:path';

export interface Limits {
  /** statement deadline; past it the statement is cancelled at the database (504 query_timeout) */
  readonly queryTimeoutMs: number;
  /** rows per response; beyond it the response is truncated */
  readonly maxRows: number;
  /** bytes of serialized rows per response; beyond it the response is truncated */
  readonly maxResultBytes: number;
  /** request body limit in bytes (413 beyond) */
  readonly bodyLimitBytes: number;
  /** longest statement accepted, in UTF-8 bytes; longer is 400 invalid_sql `too_complex` before any parsing */
  readonly maxStatementBytes: number;
}

/** Operator settings of the REST connectors; a configured base URL is trusted (it may be a private address). */
export interface RestApisConfig {
  readonly stripeApiBase: string | undefined;
  readonly githubApiBase: string | undefined;
  readonly hubspotApiBase: string | undefined;
  /** every Salesforce request goes here instead of the credential's instance_url */
  readonly salesforceApiBase: string | undefined;
  /** http-files URLs may resolve to private/loopback addresses */
  readonly httpFilesAllowPrivate: boolean;
  readonly httpFilesMaxBytes: number;
  /** ephemeral query engines at a time */
  readonly maxEngines: number;
}

export interface Config {
  readonly host: string;
  readonly port: number;
  readonly tunnelPort: number;
  readonly dataDir: string;
  /** control-plane state in an external PostgreSQL instead of the embedded PGlite */
  readonly databaseUrl: string | undefined;
  /** demo datasets in an external PostgreSQL instead of embedded PGlite workers */
  readonly demoDatabaseUrl: string | undefined;
  /** bearer token GET /metrics requires (SVC_METRICS_TOKEN); undefined: /metrics is open */
  readonly metricsToken: string | undefined;
  /** host:port where other replicas reach this replica's tunnel listener directly (SVC_REPLICA_ADDRESS); undefined: HOST and the tunnel port */
  readonly replicaAddress: string | undefined;
  /** base URL written into responses; derived from host/port when unset */
  readonly publicUrl: string;
  readonly tunnelPublicUrl: string;
  readonly dashboardUrl: string;
  /** 32-byte key for credential encryption; generated into the data dir when absent */
  readonly masterKey: string | undefined;
  /** earlier master keys that still open stored credentials (SVC_MASTER_KEY_PREVIOUS, comma list) */
  readonly masterKeysPrevious: readonly string[];
  /** live database targets may reach loopback/private addresses (SVC_LIVE_ALLOW_PRIVATE, default 0; link-local, metadata and 0.0.0.0/:: never) */
  readonly liveAllowPrivate: boolean;
  /** pooled connections per organization to its `postgres` target database */
  readonly livePoolSize: number;
  readonly webhookRetryDelaysMs: readonly number[];
  readonly webhookAllowPrivate: boolean;
  /** deadline of one webhook attempt (SVC_WEBHOOK_TIMEOUT_MS, default 10 s) */
  readonly webhookTimeoutMs: number;
  /** webhook attempts in flight at once per organization, across replicas (SVC_WEBHOOK_ORG_CONCURRENCY, default 4) */
  readonly webhookOrgConcurrency: number;
  /** mock-event deliveries an organization may have pending before trigger-mock-event answers 429 (SVC_WEBHOOK_MOCK_PENDING_MAX, default 100) */
  readonly webhookMockPendingMax: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** validity of relay client certificates, days (fractional: SVC_RELAY_CERT_VALIDITY, else SVC_RELAY_CERT_DAYS) */
  readonly relayCertDays: number;
  /** how long a replaced relay certificate stays valid, ms */
  readonly relayCertOverlapMs: number;
  /** requests per second per agent key; 0 disables */
  readonly rateLimitPerKey: number;
  /** signups per minute per client address; 0 disables */
  readonly signupRateLimit: number;
  /** refused statements (invalid_sql, scope_violation) per minute per agent key, burst half that; 0 disables */
  readonly refusedPerMinute: number;
  /** number of embedded demo-engine workers kept warm (all share one in-memory image of the demo data) */
  readonly demoWorkers: number;
  /** REST live connectors (stripe, github, hubspot, salesforce, http-files) */
  readonly restApis: RestApisConfig;
  readonly limits: Limits;
}

export class ConfigError extends Error {
  readonly code = 'CONFIG_ERR_INVALID';
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Parse `30s`, `2m`, `150ms`, `1h`, `30d`, or a bare number of milliseconds. Returns NaN when malformed. */
export function parseDuration(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!m || m[1] === undefined) return Number.NaN;
  const n = Number(m[1]);
  const unit = m[2] ?? 'ms';
  const factor = unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : unit === 'h' ? 3_600_000 : 86_400_000;
  return Math.round(n * factor);
}

type Env = Readonly<Record<string, string | undefined>>;

export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Config {
  const problems: string[] = [];

  const str = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const int = (name: string, dflt: number, min: number, max: number): number => {
    const v = str(name);
    if (v === undefined) return dflt;
    if (!/^\d+$/.test(v)) {
      problems.push(`${name} must be a whole number, got ${JSON.stringify(v)}`);
      return dflt;
    }
    const n = Number(v);
    if (n < min || n > max) problems.push(`${name} must be between ${min} and ${max}, got ${n}`);
    return n;
  };
  const url = (name: string, protocols: readonly string[]): string | undefined => {
    const v = str(name);
    if (v === undefined) return undefined;
    try {
      const u = new URL(v);
      if (!protocols.includes(u.protocol)) {
        problems.push(`${name} must use ${protocols.join(' or ')}, got ${u.protocol}`);
      }
    } catch {
      problems.push(`${name} is not a valid URL`);
    }
    return v;
  };

  const host = str('HOST') ?? '127.0.0.1';
  const port = int('PORT', 8080, 0, 65535);
  const tunnelPort = int('SVC_TUNNEL_PORT', 8443, 0, 65535);
  const dataDir = path.resolve(cwd, str('SVC_DATA_DIR') ?? '.svc-data');
  const databaseUrl = url('DATABASE_URL', ['postgres:', 'postgresql:']);
  const demoDatabaseUrl = url('SVC_DEMO_DATABASE_URL', ['postgres:', 'postgresql:']);
  const metricsToken = str('SVC_METRICS_TOKEN');
  if (metricsToken !== undefined && (metricsToken.length < 16 || /\s/.test(metricsToken))) problems.push('SVC_METRICS_TOKEN must be at least 16 characters without spaces');
  const replicaAddress = str('SVC_REPLICA_ADDRESS');
  if (replicaAddress !== undefined && !/^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(replicaAddress)) {
    problems.push('SVC_REPLICA_ADDRESS must be host:port (an IPv6 address in brackets), the address other replicas dial to reach this one');
  }
  const hostForUrl = host.includes(':') ? `[${host}]` : host;
  const publicUrl = (url('SVC_PUBLIC_URL', ['http:', 'https:']) ?? `http://${hostForUrl}:${port}`).replace(/\/+$/, '');
  const tunnelPublicUrl = url('SVC_TUNNEL_PUBLIC_URL', ['wss:']) ?? `wss://${hostForUrl}:${tunnelPort}`;
  const dashboardUrl = (url('SVC_DASHBOARD_URL', ['http:', 'https:']) ?? 'https://dashboard.svc.example').replace(/\/+$/, '');

  const masterKey = str('SVC_MASTER_KEY');
  if (masterKey !== undefined && !isValidMasterKey(masterKey)) {
    problems.push('SVC_MASTER_KEY must be 32 bytes as 64 hex characters or base64/base64url');
  }

  const previousText = str('SVC_MASTER_KEY_PREVIOUS');
  const masterKeysPrevious = previousText === undefined ? [] : previousText.split(',').map((k) => k.trim()).filter((k) => k !== '');
  if (masterKeysPrevious.some((k) => !isValidMasterKey(k))) {
    problems.push('SVC_MASTER_KEY_PREVIOUS must be a comma list of 32-byte keys (64 hex characters or base64/base64url each)');
  }
  const liveAllowPrivateText = str('SVC_LIVE_ALLOW_PRIVATE');
  if (liveAllowPrivateText !== undefined && !['0', '1', 'true', 'false'].includes(liveAllowPrivateText)) {
    problems.push('SVC_LIVE_ALLOW_PRIVATE must be 1 or 0');
  }

  const delaysText = str('SVC_WEBHOOK_RETRY_DELAYS') ?? '30s,2m,10m,30m';
  const webhookRetryDelaysMs = delaysText.split(',').map((d) => parseDuration(d));
  if (webhookRetryDelaysMs.some((d) => !Number.isFinite(d) || d <= 0) || webhookRetryDelaysMs.length > 10) {
    problems.push(`SVC_WEBHOOK_RETRY_DELAYS must be a comma list of up to 10 durations like 30s,2m,10m,30m, got ${JSON.stringify(delaysText)}`);
  }

  const allowPrivate = str('SVC_WEBHOOK_ALLOW_PRIVATE');
  if (allowPrivate !== undefined && !['0', '1', 'true', 'false'].includes(allowPrivate)) {
    problems.push('SVC_WEBHOOK_ALLOW_PRIVATE must be 1 or 0');
  }
  const webhookTimeoutMs = int('SVC_WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000);
  const webhookOrgConcurrency = int('SVC_WEBHOOK_ORG_CONCURRENCY', 4, 1, 64);
  const webhookMockPendingMax = int('SVC_WEBHOOK_MOCK_PENDING_MAX', 100, 1, 100_000);

  const logLevelText = str('LOG_LEVEL') ?? 'info';
  const logLevel = (LOG_LEVELS as readonly string[]).includes(logLevelText) ? (logLevelText as Config['logLevel']) : 'info';
  if (logLevel !== logLevelText) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);

  const limits: Limits = {
    queryTimeoutMs: int('SVC_QUERY_TIMEOUT_MS', 10_000, 100, 600_000),
    maxRows: int('SVC_MAX_ROWS', 10_000, 1, 1_000_000),
    maxResultBytes: int('SVC_MAX_RESULT_BYTES', 10_000_000, 1_000, 100_000_000),
    bodyLimitBytes: int('SVC_BODY_LIMIT_BYTES', 1_048_576, 1_024, 16_777_216),
    maxStatementBytes: int('SVC_MAX_STATEMENT_BYTES', 65_536, 1_024, 100_000),
  };
  const demoWorkers = int('SVC_DEMO_WORKERS', 2, 1, 16);
  const filesPrivate = str('SVC_HTTP_FILES_ALLOW_PRIVATE');
  if (filesPrivate !== undefined && !['0', '1', 'true', 'false'].includes(filesPrivate)) problems.push('SVC_HTTP_FILES_ALLOW_PRIVATE must be 1 or 0');
  const apiBase = (name: string): string | undefined => url(name, ['http:', 'https:'])?.replace(/\/+$/, '');
  const restApis: RestApisConfig = {
    stripeApiBase: apiBase('SVC_STRIPE_API_BASE'),
    githubApiBase: apiBase('SVC_GITHUB_API_BASE'),
    hubspotApiBase: apiBase('SVC_HUBSPOT_API_BASE'),
    salesforceApiBase: apiBase('SVC_SALESFORCE_API_BASE'),
    httpFilesAllowPrivate: filesPrivate === '1' || filesPrivate === 'true',
    httpFilesMaxBytes: int('SVC_HTTP_FILES_MAX_BYTES', 50_000_000, 1_000, 1_000_000_000),
    maxEngines: int('SVC_LIVE_REST_ENGINES', 4, 1, 64),
  };
  const rateLimitPerKey = int('SVC_RATE_LIMIT', 100, 0, 100_000);
  const relayCertWholeDays = int('SVC_RELAY_CERT_DAYS', 30, 1, 397);
  // SVC_RELAY_CERT_VALIDITY (a duration, e.g. 90s or 30d) wins over SVC_RELAY_CERT_DAYS; short ones are for tests
  const validityText = str('SVC_RELAY_CERT_VALIDITY');
  const validityMs = validityText === undefined ? relayCertWholeDays * 86_400_000 : parseDuration(validityText);
  if (!Number.isFinite(validityMs) || validityMs < 30_000 || validityMs > 397 * 86_400_000) {
    problems.push(`SVC_RELAY_CERT_VALIDITY must be a duration from 30s to 397d (e.g. 90s, 12h, 30d), got ${JSON.stringify(validityText)}`);
  }
  const relayCertDays = validityMs / 86_400_000;
  const overlapText = str('SVC_RELAY_CERT_OVERLAP') ?? '24h';
  const relayCertOverlapMs = parseDuration(overlapText);
  if (!Number.isFinite(relayCertOverlapMs) || relayCertOverlapMs < 0) problems.push(`SVC_RELAY_CERT_OVERLAP must be a duration like 24h or 30m, got ${JSON.stringify(overlapText)}`);
  const signupRateLimit = int('SVC_SIGNUP_RATE_LIMIT', 10, 0, 100_000);
  const refusedPerMinute = int('SVC_REFUSED_STATEMENTS_PER_MINUTE', 60, 0, 100_000);

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    host,
    port,
    tunnelPort,
    dataDir,
    databaseUrl,
    demoDatabaseUrl,
    replicaAddress,
    metricsToken,
    publicUrl,
    tunnelPublicUrl,
    dashboardUrl,
    masterKey,
    masterKeysPrevious,
    liveAllowPrivate: liveAllowPrivateText === '1' || liveAllowPrivateText === 'true',
    livePoolSize: int('SVC_LIVE_POOL_SIZE', 4, 1, 64),
    webhookRetryDelaysMs,
    webhookAllowPrivate: allowPrivate === '1' || allowPrivate === 'true',
    webhookTimeoutMs,
    webhookOrgConcurrency,
    webhookMockPendingMax,
    logLevel,
    demoWorkers,
    restApis,
    rateLimitPerKey,
    signupRateLimit,
    refusedPerMinute,
    relayCertDays,
    relayCertOverlapMs,
    limits,
  };
}

export function isValidMasterKey(text: string): boolean {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return true;
  const b = Buffer.from(text, text.includes('-') || text.includes('_') ? 'base64url' : 'base64');
  return b.length === 32;
}
