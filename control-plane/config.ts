/**
 * Configuration, read from the environment and validated once at start-up (docs/configuration.md).
 * Every problem is reported at once, with the variable's name, before anything listens.
 *
 * One small typed parser per kind of value (a whole number in a range, a 1/0 switch, one of a
 * list, a URL, a duration, a comma list…), one table of every setting (its variable, parser and
 * default: {@link SETTINGS}), and the Config assembled from the parsed values, where a few
 * defaults derive from other settings (the public URLs from HOST and the ports).
 */
import { isIP } from 'node:net';
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
  /** ephemeral query engines at a time, and http-files listings at once (SVC_LIVE_REST_ENGINES, default 4) */
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
  /**
   * addresses (or CIDR ranges) of balancers whose X-Forwarded-For names the client
   * (SVC_TRUSTED_PROXIES); empty: the client is the TCP peer
   */
  readonly trustedProxies: readonly string[];
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
  /** pooled connections per organization to its `postgres` and to its `mysql` target database (SVC_LIVE_POOL_SIZE, default 4) */
  readonly livePoolSize: number;
  /** how long a replaced relay tunnel may finish its running streams before it is closed (SVC_TUNNEL_DRAIN_MS, default 60 s) */
  readonly tunnelDrainMs: number;
  /** how long a shutdown waits for the requests in flight before it stops their live statements (SVC_SHUTDOWN_DRAIN_MS); undefined: the query timeout + 5 s */
  readonly shutdownDrainMs: number | undefined;
  readonly webhookRetryDelaysMs: readonly number[];
  readonly webhookAllowPrivate: boolean;
  /** deadline of one webhook attempt (SVC_WEBHOOK_TIMEOUT_MS, default 10 s) */
  readonly webhookTimeoutMs: number;
  /** webhook attempts in flight at once per organization, across replicas (SVC_WEBHOOK_ORG_CONCURRENCY, default 4) */
  readonly webhookOrgConcurrency: number;
  /** mock-event deliveries an organization may have pending before trigger-mock-event (or a replay of a mock event) answers 429 (SVC_WEBHOOK_MOCK_PENDING_MAX, default 100) */
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

const DAY_MS = 86_400_000;
/** how long a replaced relay tunnel may drain its running streams before it is closed, unless SVC_TUNNEL_DRAIN_MS says otherwise */
export const DEFAULT_TUNNEL_DRAIN_MS = 60_000;
const DURATION_UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: DAY_MS };

/** Parse `30s`, `2m`, `150ms`, `1h`, `30d`, or a bare number of milliseconds. Returns NaN when malformed. */
export function parseDuration(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!m || m[1] === undefined) return Number.NaN;
  return Math.round(Number(m[1]) * (DURATION_UNITS[m[2] ?? 'ms'] ?? 1));
}

export function isValidMasterKey(text: string): boolean {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return true;
  const b = Buffer.from(text, text.includes('-') || text.includes('_') ? 'base64url' : 'base64');
  return b.length === 32;
}

// ---- parsers: one per kind of value ----

/** What a parser makes of a variable's text: its value, or what is wrong with it (a sentence naming the variable). */
export type Parsed<T> = { readonly value: T } | { readonly problem: string };
/** Reads a variable's text (trimmed, never blank: an unset or blank variable takes the setting's default). */
export type Parser<T> = (text: string, name: string) => Parsed<T>;

const got = (text: string): string => `, got ${JSON.stringify(text)}`;

/** any text */
const text: Parser<string> = (t) => ({ value: t });

/** a whole number (digits only) from `min` to `max` */
const wholeNumber =
  (min: number, max: number): Parser<number> =>
  (t, name) => {
    if (!/^\d+$/.test(t)) return { problem: `${name} must be a whole number${got(t)}` };
    const n = Number(t);
    return n < min || n > max ? { problem: `${name} must be between ${min} and ${max}, got ${n}` } : { value: n };
  };

/** `1`/`true` on, `0`/`false` off */
const onOff: Parser<boolean> = (t, name) => (['0', '1', 'true', 'false'].includes(t) ? { value: t === '1' || t === 'true' } : { problem: `${name} must be 1 or 0` });

/** one of `values`, as written */
const oneOf =
  <V extends string>(values: readonly V[]): Parser<V> =>
  (t, name) =>
    (values as readonly string[]).includes(t) ? { value: t as V } : { problem: `${name} must be one of ${values.join(', ')}` };

/**
 * a URL with one of `protocols` (e.g. `https:`); `trimSlash`: without its trailing slashes;
 * `noCredentials`: without a user name or password (a URL written into answers, or one the
 * connectors call with credentials of their own). Never echoed: a database URL holds a password
 */
const url =
  (protocols: readonly string[], o: { readonly trimSlash?: boolean; readonly noCredentials?: boolean } = {}): Parser<string> =>
  (t, name) => {
    let u: URL;
    try {
      u = new URL(t);
    } catch {
      return { problem: `${name} is not a valid URL` };
    }
    if (!protocols.includes(u.protocol)) return { problem: `${name} must use ${protocols.join(' or ')}, got ${u.protocol}` };
    if (o.noCredentials && (u.username !== '' || u.password !== '')) return { problem: `${name} must not hold a user name or password` };
    return { value: o.trimSlash ? t.replace(/\/+$/, '') : t };
  };

/** a duration ({@link parseDuration}) from `minMs` to `maxMs`, in milliseconds; `expected` completes "NAME …, got …" */
const duration =
  (minMs: number, maxMs: number, expected: string): Parser<number> =>
  (t, name) => {
    const ms = parseDuration(t);
    return Number.isFinite(ms) && ms >= minMs && ms <= maxMs ? { value: ms } : { problem: `${name} ${expected}${got(t)}` };
  };

/** an IP address, or a CIDR range of them (a balancer's, SVC_TRUSTED_PROXIES) */
function isProxyAddress(t: string): boolean {
  const [address = '', bits, ...rest] = t.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
}

/** text that passes `test`; `expected` completes "NAME …" */
const checked =
  (test: (t: string) => boolean, expected: string): Parser<string> =>
  (t, name) =>
    test(t) ? { value: t } : { problem: `${name} ${expected}` };

/**
 * A comma list of `item`s (each trimmed; `skipBlank`: empty items are left out, else `item`
 * reads them too), at most `max` of them. One problem for the whole list: "NAME `expected`", and
 * `, got "…"` when `echo`.
 */
const list =
  <T>(item: Parser<T>, o: { readonly expected: string; readonly max?: number; readonly skipBlank?: boolean; readonly echo?: boolean }): Parser<T[]> =>
  (t, name) => {
    const items = t
      .split(',')
      .map((s) => s.trim())
      .filter((s) => !o.skipBlank || s !== '');
    const values = items.flatMap((s) => {
      const r = item(s, name);
      return 'problem' in r ? [] : [r.value];
    });
    return values.length === items.length && values.length <= (o.max ?? Infinity) ? { value: values } : { problem: `${name} ${o.expected}${o.echo ? got(t) : ''}` };
  };

// ---- the settings ----

/** One setting: how its variable is read, and its value when the variable is unset or blank. */
export interface Setting<T> {
  readonly parse: Parser<T>;
  readonly default: T;
}
const setting = <T>(parse: Parser<T>, dflt: T): Setting<T> => ({ parse, default: dflt });
const optional = <T>(parse: Parser<T>): Setting<T | undefined> => ({ parse, default: undefined });

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const POSTGRES_URL = ['postgres:', 'postgresql:'];
const HTTP_URL = ['http:', 'https:'];
const publicUrl = url(HTTP_URL, { trimSlash: true, noCredentials: true });
const apiBase = optional(publicUrl);
const DEFAULT_RETRY_DELAYS = '30s,2m,10m,30m';
const retryDelay = duration(1, 30 * DAY_MS, 'must be a positive duration of at most 30d');
const masterKey = checked(isValidMasterKey, 'must be 32 bytes as 64 hex characters or base64/base64url');

/**
 * Every setting, by variable name. Its problems are reported in this order; docs/configuration.md
 * documents each (keep the two in step).
 */
export const SETTINGS = {
  HOST: setting(text, '127.0.0.1'),
  PORT: setting(wholeNumber(0, 65535), 8080),
  SVC_TUNNEL_PORT: setting(wholeNumber(0, 65535), 8443),
  SVC_DATA_DIR: setting(text, '.svc-data'),
  DATABASE_URL: optional(url(POSTGRES_URL)),
  SVC_DEMO_DATABASE_URL: optional(url(POSTGRES_URL)),
  SVC_METRICS_TOKEN: optional(checked((t) => t.length >= 16 && !/\s/.test(t), 'must be at least 16 characters without spaces')),
  SVC_TRUSTED_PROXIES: setting(
    list(checked(isProxyAddress, ''), { skipBlank: true, max: 64, echo: true, expected: 'must be a comma list of IP addresses or CIDR ranges (e.g. 10.0.0.0/8, fd00::/8) of the balancers in front' }),
    [] as string[],
  ),
  SVC_REPLICA_ADDRESS: optional(
    checked((t) => /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(t) && Number(t.slice(t.lastIndexOf(':') + 1)) <= 65535, 'must be host:port (an IPv6 address in brackets), the address other replicas dial to reach this one'),
  ),
  SVC_PUBLIC_URL: optional(publicUrl),
  SVC_TUNNEL_PUBLIC_URL: optional(url(['wss:'], { noCredentials: true })),
  SVC_DASHBOARD_URL: setting(publicUrl, 'https://dashboard.svc.example'),
  SVC_MASTER_KEY: optional(masterKey),
  SVC_MASTER_KEY_PREVIOUS: setting(list(masterKey, { skipBlank: true, expected: 'must be a comma list of 32-byte keys (64 hex characters or base64/base64url each)' }), [] as string[]),
  SVC_LIVE_ALLOW_PRIVATE: setting(onOff, false),
  SVC_WEBHOOK_RETRY_DELAYS: setting(
    list(retryDelay, { max: 10, echo: true, expected: `must be a comma list of up to 10 durations like ${DEFAULT_RETRY_DELAYS}, each at most 30d` }),
    DEFAULT_RETRY_DELAYS.split(',').map(parseDuration),
  ),
  SVC_WEBHOOK_ALLOW_PRIVATE: setting(onOff, false),
  SVC_WEBHOOK_TIMEOUT_MS: setting(wholeNumber(100, 60_000), 10_000),
  SVC_WEBHOOK_ORG_CONCURRENCY: setting(wholeNumber(1, 64), 4),
  SVC_WEBHOOK_MOCK_PENDING_MAX: setting(wholeNumber(1, 100_000), 100),
  LOG_LEVEL: setting(oneOf(LOG_LEVELS), 'info'),
  SVC_QUERY_TIMEOUT_MS: setting(wholeNumber(100, 600_000), 10_000),
  SVC_MAX_ROWS: setting(wholeNumber(1, 1_000_000), 10_000),
  SVC_MAX_RESULT_BYTES: setting(wholeNumber(1_000, 100_000_000), 10_000_000),
  SVC_BODY_LIMIT_BYTES: setting(wholeNumber(1_024, 16_777_216), 1_048_576),
  SVC_MAX_STATEMENT_BYTES: setting(wholeNumber(1_024, 100_000), 65_536),
  SVC_DEMO_WORKERS: setting(wholeNumber(1, 16), 2),
  SVC_HTTP_FILES_ALLOW_PRIVATE: setting(onOff, false),
  SVC_STRIPE_API_BASE: apiBase,
  SVC_GITHUB_API_BASE: apiBase,
  SVC_HUBSPOT_API_BASE: apiBase,
  SVC_SALESFORCE_API_BASE: apiBase,
  SVC_HTTP_FILES_MAX_BYTES: setting(wholeNumber(1_000, 1_000_000_000), 50_000_000),
  SVC_LIVE_REST_ENGINES: setting(wholeNumber(1, 64), 4),
  SVC_RATE_LIMIT: setting(wholeNumber(0, 100_000), 100),
  SVC_RELAY_CERT_DAYS: setting(wholeNumber(1, 397), 30),
  // a duration (e.g. 90s or 30d) that wins over SVC_RELAY_CERT_DAYS; short ones are for tests
  SVC_RELAY_CERT_VALIDITY: optional(duration(30_000, 397 * DAY_MS, 'must be a duration from 30s to 397d (e.g. 90s, 12h, 30d)')),
  SVC_RELAY_CERT_OVERLAP: setting(duration(0, 397 * DAY_MS, 'must be a duration from 0 to 397d (e.g. 24h or 30m)'), parseDuration('24h')),
  SVC_SIGNUP_RATE_LIMIT: setting(wholeNumber(0, 100_000), 10),
  SVC_REFUSED_STATEMENTS_PER_MINUTE: setting(wholeNumber(0, 100_000), 60),
  SVC_LIVE_POOL_SIZE: setting(wholeNumber(1, 64), 4),
  SVC_TUNNEL_DRAIN_MS: setting(wholeNumber(100, 600_000), DEFAULT_TUNNEL_DRAIN_MS),
  SVC_SHUTDOWN_DRAIN_MS: optional(wholeNumber(0, 600_000)),
} satisfies Record<string, Setting<unknown>>;

type SettingValues = { readonly [K in keyof typeof SETTINGS]: (typeof SETTINGS)[K] extends Setting<infer T> ? T : never };

type Env = Readonly<Record<string, string | undefined>>;

/** Every setting's value (its default when unset, blank or wrong), and the problems found, in table order. */
export function readSettings(env: Env): { readonly values: SettingValues; readonly problems: readonly string[] } {
  const problems: string[] = [];
  const values: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(SETTINGS) as [string, Setting<unknown>][]) {
    const t = env[name]?.trim() ?? '';
    const r = t === '' ? { value: s.default } : s.parse(t, name);
    if ('problem' in r) problems.push(r.problem);
    values[name] = 'problem' in r ? s.default : r.value;
  }
  return { values: values as SettingValues, problems };
}

/**
 * `SVC_` variables other programs read (docs/configuration.md): not the control plane's, not a
 * typo. The webhook secrets are the receiver's own, as docs/webhooks.md's example names them.
 */
const OTHER_PROGRAMS: ReadonlySet<string> = new Set(['SVC_BASE_URL', 'SVC_API_KEY', 'SVC_CONFIG', 'SVC_TEST_FORCE_PGLITE', 'SVC_WEBHOOK_SECRET', 'SVC_STANDARD_WEBHOOKS_SECRET']);

/** Edit distance (insertions, deletions, substitutions) between two short names. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row.push(Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1)));
    prev = row;
  }
  return prev[b.length] as number;
}

/**
 * `SVC_` variables set in `env` that no svc program reads (names only, never values), each with
 * the setting it is closest to when one is near: a misspelt setting is otherwise silently its
 * default. The control plane logs them at start (control-plane/main.ts).
 */
export function unknownSettings(env: Env): { readonly name: string; readonly suggestion?: string }[] {
  const known = Object.keys(SETTINGS);
  return Object.keys(env)
    .filter((name) => name.startsWith('SVC_') && !(name in SETTINGS) && !OTHER_PROGRAMS.has(name))
    .sort()
    .map((name) => {
      let best: { name: string; d: number } | undefined;
      for (const k of known) {
        const d = distance(name, k);
        if (d <= 3 && (!best || d < best.d)) best = { name: k, d };
      }
      return best ? { name, suggestion: best.name } : { name };
    });
}

export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Config {
  const { values: v, problems } = readSettings(env);
  if (problems.length > 0) throw new ConfigError(problems);
  const hostForUrl = v.HOST.includes(':') ? `[${v.HOST}]` : v.HOST;
  return {
    host: v.HOST,
    port: v.PORT,
    tunnelPort: v.SVC_TUNNEL_PORT,
    dataDir: path.resolve(cwd, v.SVC_DATA_DIR),
    databaseUrl: v.DATABASE_URL,
    demoDatabaseUrl: v.SVC_DEMO_DATABASE_URL,
    replicaAddress: v.SVC_REPLICA_ADDRESS,
    metricsToken: v.SVC_METRICS_TOKEN,
    trustedProxies: v.SVC_TRUSTED_PROXIES,
    publicUrl: v.SVC_PUBLIC_URL ?? `http://${hostForUrl}:${v.PORT}`,
    tunnelPublicUrl: v.SVC_TUNNEL_PUBLIC_URL ?? `wss://${hostForUrl}:${v.SVC_TUNNEL_PORT}`,
    dashboardUrl: v.SVC_DASHBOARD_URL,
    masterKey: v.SVC_MASTER_KEY,
    masterKeysPrevious: v.SVC_MASTER_KEY_PREVIOUS,
    liveAllowPrivate: v.SVC_LIVE_ALLOW_PRIVATE,
    livePoolSize: v.SVC_LIVE_POOL_SIZE,
    tunnelDrainMs: v.SVC_TUNNEL_DRAIN_MS,
    shutdownDrainMs: v.SVC_SHUTDOWN_DRAIN_MS,
    webhookRetryDelaysMs: v.SVC_WEBHOOK_RETRY_DELAYS,
    webhookAllowPrivate: v.SVC_WEBHOOK_ALLOW_PRIVATE,
    webhookTimeoutMs: v.SVC_WEBHOOK_TIMEOUT_MS,
    webhookOrgConcurrency: v.SVC_WEBHOOK_ORG_CONCURRENCY,
    webhookMockPendingMax: v.SVC_WEBHOOK_MOCK_PENDING_MAX,
    logLevel: v.LOG_LEVEL,
    demoWorkers: v.SVC_DEMO_WORKERS,
    restApis: {
      stripeApiBase: v.SVC_STRIPE_API_BASE,
      githubApiBase: v.SVC_GITHUB_API_BASE,
      hubspotApiBase: v.SVC_HUBSPOT_API_BASE,
      salesforceApiBase: v.SVC_SALESFORCE_API_BASE,
      httpFilesAllowPrivate: v.SVC_HTTP_FILES_ALLOW_PRIVATE,
      httpFilesMaxBytes: v.SVC_HTTP_FILES_MAX_BYTES,
      maxEngines: v.SVC_LIVE_REST_ENGINES,
    },
    rateLimitPerKey: v.SVC_RATE_LIMIT,
    signupRateLimit: v.SVC_SIGNUP_RATE_LIMIT,
    refusedPerMinute: v.SVC_REFUSED_STATEMENTS_PER_MINUTE,
    relayCertDays: (v.SVC_RELAY_CERT_VALIDITY ?? v.SVC_RELAY_CERT_DAYS * DAY_MS) / DAY_MS,
    relayCertOverlapMs: v.SVC_RELAY_CERT_OVERLAP,
    limits: {
      queryTimeoutMs: v.SVC_QUERY_TIMEOUT_MS,
      maxRows: v.SVC_MAX_ROWS,
      maxResultBytes: v.SVC_MAX_RESULT_BYTES,
      bodyLimitBytes: v.SVC_BODY_LIMIT_BYTES,
      maxStatementBytes: v.SVC_MAX_STATEMENT_BYTES,
    },
  };
}
