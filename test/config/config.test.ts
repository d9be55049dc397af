/**
 * The configuration (control-plane/config.ts): every setting's default, the value each kind of
 * variable takes, and the problem each wrong value is reported with (all at once, in table order,
 * CONFIG_ERR_INVALID), exactly as operators see them at start.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig, parseDuration, readSettings, SETTINGS, unknownSettings } from '../../control-plane/config.js';
import { ROOT as root } from '../cli/dist.js';

const problemsOf = (env: Record<string, string>): readonly string[] => {
  try {
    loadConfig(env, '/srv');
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
};

t.test('the defaults', async (t) => {
  const c = loadConfig({}, '/srv');
  t.same(c, {
    host: '127.0.0.1',
    port: 8080,
    tunnelPort: 8443,
    dataDir: path.resolve('/srv', '.svc-data'),
    databaseUrl: undefined,
    demoDatabaseUrl: undefined,
    replicaAddress: undefined,
    metricsToken: undefined,
    trustedProxies: [],
    publicUrl: 'http://127.0.0.1:8080',
    tunnelPublicUrl: 'wss://127.0.0.1:8443',
    dashboardUrl: 'https://dashboard.svc.example',
    masterKey: undefined,
    masterKeysPrevious: [],
    liveAllowPrivate: false,
    livePoolSize: 4,
    tunnelDrainMs: 60_000,
    shutdownDrainMs: undefined,
    webhookRetryDelaysMs: [30_000, 120_000, 600_000, 1_800_000],
    webhookAllowPrivate: false,
    webhookTimeoutMs: 10_000,
    webhookOrgConcurrency: 4,
    webhookMockPendingMax: 100,
    logLevel: 'info',
    demoWorkers: 2,
    restApis: {
      stripeApiBase: undefined,
      githubApiBase: undefined,
      hubspotApiBase: undefined,
      salesforceApiBase: undefined,
      httpFilesAllowPrivate: false,
      httpFilesMaxBytes: 50_000_000,
      maxEngines: 4,
    },
    rateLimitPerKey: 100,
    signupRateLimit: 10,
    refusedPerMinute: 60,
    relayCertDays: 30,
    relayCertOverlapMs: 86_400_000,
    limits: { queryTimeoutMs: 10_000, maxRows: 10_000, maxResultBytes: 10_000_000, bodyLimitBytes: 1_048_576, maxStatementBytes: 65_536 },
  });
  t.same(loadConfig({ PORT: '  ', LOG_LEVEL: '' }, '/srv'), c, 'a blank variable is an unset one');
});

t.test('values of each kind', async (t) => {
  const key = 'a'.repeat(64);
  const c = loadConfig(
    {
      HOST: ' ::1 ',
      PORT: '08',
      SVC_TUNNEL_PORT: '0',
      SVC_DATA_DIR: 'state',
      DATABASE_URL: 'postgresql://db/x',
      SVC_METRICS_TOKEN: '0123456789abcdef',
      SVC_REPLICA_ADDRESS: '[::1]:9443',
      SVC_DASHBOARD_URL: 'https://dash.example//',
      SVC_MASTER_KEY: Buffer.alloc(32, 250).toString('base64url'),
      SVC_MASTER_KEY_PREVIOUS: ` ${key}, ,${'b'.repeat(64)} `,
      SVC_LIVE_ALLOW_PRIVATE: 'true',
      SVC_WEBHOOK_ALLOW_PRIVATE: '1',
      SVC_HTTP_FILES_ALLOW_PRIVATE: '0',
      SVC_WEBHOOK_RETRY_DELAYS: ' 1s , 150ms,2m,1.5h',
      LOG_LEVEL: 'silent',
      SVC_GITHUB_API_BASE: 'https://ghe.example.com/api/v3/',
      SVC_TUNNEL_PUBLIC_URL: 'wss://t.example:443/',
      SVC_RELAY_CERT_DAYS: '397',
      SVC_RELAY_CERT_OVERLAP: '30m',
      SVC_LIVE_REST_ENGINES: '2',
      SVC_LIVE_POOL_SIZE: '64',
      SVC_TUNNEL_DRAIN_MS: '1500',
      SVC_SHUTDOWN_DRAIN_MS: '250',
    },
    '/srv',
  );
  t.equal(c.host, '::1');
  t.equal(c.port, 8);
  t.equal(c.dataDir, path.resolve('/srv', 'state'));
  t.equal(c.publicUrl, 'http://[::1]:8', 'derived from HOST and PORT, an IPv6 host in brackets');
  t.equal(c.tunnelPublicUrl, 'wss://t.example:443/', 'as written');
  t.equal(c.dashboardUrl, 'https://dash.example', 'without its trailing slashes');
  t.equal(c.restApis.githubApiBase, 'https://ghe.example.com/api/v3');
  t.same(c.masterKeysPrevious, [key, 'b'.repeat(64)], 'trimmed, blanks left out');
  t.equal(c.liveAllowPrivate, true);
  t.equal(c.webhookAllowPrivate, true);
  t.equal(c.restApis.httpFilesAllowPrivate, false);
  t.same(c.webhookRetryDelaysMs, [1000, 150, 120_000, 5_400_000]);
  t.equal(c.logLevel, 'silent');
  t.equal(c.relayCertDays, 397);
  t.equal(c.relayCertOverlapMs, 1_800_000);
  t.equal(c.restApis.maxEngines, 2);
  t.equal(c.livePoolSize, 64);
  t.equal(c.tunnelDrainMs, 1500);
  t.equal(c.shutdownDrainMs, 250);
  t.equal(loadConfig({ SVC_RELAY_CERT_VALIDITY: '90s', SVC_RELAY_CERT_DAYS: '10' }).relayCertDays, 90_000 / 86_400_000, 'SVC_RELAY_CERT_VALIDITY wins');
  t.equal(loadConfig({ SVC_PUBLIC_URL: 'https://svc.example/' }).publicUrl, 'https://svc.example');
});

t.test('every problem at once, in table order, each naming its variable', async (t) => {
  const err = t.throws(() => loadConfig({ PORT: 'eighty', SVC_WEBHOOK_RETRY_DELAYS: 'soon', LOG_LEVEL: 'loud' })) as ConfigError;
  t.equal(err.code, 'CONFIG_ERR_INVALID');
  t.equal(err.name, 'ConfigError');
  t.same(err.problems, [
    'PORT must be a whole number, got "eighty"',
    'SVC_WEBHOOK_RETRY_DELAYS must be a comma list of up to 10 durations like 30s,2m,10m,30m, each at most 30d, got "soon"',
    'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent',
  ]);
  t.equal(err.message, `invalid configuration:\n  - ${err.problems.join('\n  - ')}`);
});

t.test('the problem of each kind of wrong value', async (t) => {
  const cases: [Record<string, string>, string][] = [
    [{ PORT: '65536' }, 'PORT must be between 0 and 65535, got 65536'],
    [{ SVC_TUNNEL_PORT: '-1' }, 'SVC_TUNNEL_PORT must be a whole number, got "-1"'],
    [{ SVC_MAX_ROWS: '0' }, 'SVC_MAX_ROWS must be between 1 and 1000000, got 0'],
    [{ SVC_QUERY_TIMEOUT_MS: '1.5' }, 'SVC_QUERY_TIMEOUT_MS must be a whole number, got "1.5"'],
    [{ DATABASE_URL: 'mysql://x/y' }, 'DATABASE_URL must use postgres: or postgresql:, got mysql:'],
    [{ SVC_DEMO_DATABASE_URL: 'not a url' }, 'SVC_DEMO_DATABASE_URL is not a valid URL'],
    [{ SVC_TUNNEL_PUBLIC_URL: 'ws://t' }, 'SVC_TUNNEL_PUBLIC_URL must use wss:, got ws:'],
    [{ SVC_STRIPE_API_BASE: 'gopher://x' }, 'SVC_STRIPE_API_BASE must use http: or https:, got gopher:'],
    [{ SVC_METRICS_TOKEN: 'short' }, 'SVC_METRICS_TOKEN must be at least 16 characters without spaces'],
    [{ SVC_METRICS_TOKEN: '0123456789 abcdef' }, 'SVC_METRICS_TOKEN must be at least 16 characters without spaces'],
    [{ SVC_REPLICA_ADDRESS: 'host' }, 'SVC_REPLICA_ADDRESS must be host:port (an IPv6 address in brackets), the address other replicas dial to reach this one'],
    [{ SVC_MASTER_KEY: 'abc' }, 'SVC_MASTER_KEY must be 32 bytes as 64 hex characters or base64/base64url'],
    [{ SVC_MASTER_KEY_PREVIOUS: `${'a'.repeat(64)},bad` }, 'SVC_MASTER_KEY_PREVIOUS must be a comma list of 32-byte keys (64 hex characters or base64/base64url each)'],
    [{ SVC_LIVE_ALLOW_PRIVATE: 'yes' }, 'SVC_LIVE_ALLOW_PRIVATE must be 1 or 0'],
    [{ SVC_WEBHOOK_ALLOW_PRIVATE: '2' }, 'SVC_WEBHOOK_ALLOW_PRIVATE must be 1 or 0'],
    [{ SVC_HTTP_FILES_ALLOW_PRIVATE: 'on' }, 'SVC_HTTP_FILES_ALLOW_PRIVATE must be 1 or 0'],
    [{ SVC_WEBHOOK_RETRY_DELAYS: '1s,,2s' }, 'SVC_WEBHOOK_RETRY_DELAYS must be a comma list of up to 10 durations like 30s,2m,10m,30m, each at most 30d, got "1s,,2s"'],
    [{ SVC_WEBHOOK_RETRY_DELAYS: '0' }, 'SVC_WEBHOOK_RETRY_DELAYS must be a comma list of up to 10 durations like 30s,2m,10m,30m, each at most 30d, got "0"'],
    [{ SVC_WEBHOOK_RETRY_DELAYS: '1,2,3,4,5,6,7,8,9,10,11' }, 'SVC_WEBHOOK_RETRY_DELAYS must be a comma list of up to 10 durations like 30s,2m,10m,30m, each at most 30d, got "1,2,3,4,5,6,7,8,9,10,11"'],
    [{ SVC_RELAY_CERT_VALIDITY: '29s' }, 'SVC_RELAY_CERT_VALIDITY must be a duration from 30s to 397d (e.g. 90s, 12h, 30d), got "29s"'],
    [{ SVC_RELAY_CERT_VALIDITY: '398d' }, 'SVC_RELAY_CERT_VALIDITY must be a duration from 30s to 397d (e.g. 90s, 12h, 30d), got "398d"'],
    [{ SVC_RELAY_CERT_OVERLAP: 'x' }, 'SVC_RELAY_CERT_OVERLAP must be a duration from 0 to 397d (e.g. 24h or 30m), got "x"'],
    // SVC_RELAY_CERT_DAYS out of range is one problem (it was also reported as SVC_RELAY_CERT_VALIDITY "got undefined")
    [{ SVC_RELAY_CERT_DAYS: '398' }, 'SVC_RELAY_CERT_DAYS must be between 1 and 397, got 398'],
    // checked like every other setting (it was read after the check, so a wrong value was taken as it was)
    [{ SVC_LIVE_POOL_SIZE: '0' }, 'SVC_LIVE_POOL_SIZE must be between 1 and 64, got 0'],
    [{ SVC_LIVE_REST_ENGINES: '65' }, 'SVC_LIVE_REST_ENGINES must be between 1 and 64, got 65'],
    [{ SVC_TUNNEL_DRAIN_MS: '99' }, 'SVC_TUNNEL_DRAIN_MS must be between 100 and 600000, got 99'],
  ];
  for (const [env, problem] of cases) t.same(problemsOf(env), [problem], JSON.stringify(env));
});

t.test('hostile values: never taken, and the problem names the variable without echoing a secret', async (t) => {
  // numbers written any other way than digits
  for (const v of ['1e3', '0x10', '-1', '+5', 'NaN', 'Infinity', '1_000', '10 000', '99999999999999999999999']) {
    const problems = problemsOf({ SVC_MAX_ROWS: v });
    t.equal(problems.length, 1, `SVC_MAX_ROWS=${v}`);
    t.match(problems[0] ?? '', /^SVC_MAX_ROWS must be /, `SVC_MAX_ROWS=${v}`);
  }
  // durations past what a Date holds (the worker and the renewal threw RangeError at run time)
  t.same(problemsOf({ SVC_WEBHOOK_RETRY_DELAYS: '1s,1000000000d' }), ['SVC_WEBHOOK_RETRY_DELAYS must be a comma list of up to 10 durations like 30s,2m,10m,30m, each at most 30d, got "1s,1000000000d"']);
  t.same(problemsOf({ SVC_WEBHOOK_RETRY_DELAYS: '31d' }).length, 1, 'a retry delay over 30 days');
  t.same(loadConfig({ SVC_WEBHOOK_RETRY_DELAYS: '30d' }).webhookRetryDelaysMs, [30 * 86_400_000]);
  t.same(problemsOf({ SVC_RELAY_CERT_OVERLAP: '1000000000d' }), ['SVC_RELAY_CERT_OVERLAP must be a duration from 0 to 397d (e.g. 24h or 30m), got "1000000000d"']);
  t.equal(loadConfig({ SVC_RELAY_CERT_OVERLAP: '397d' }).relayCertOverlapMs, 397 * 86_400_000);
  // a port a socket can have
  t.same(problemsOf({ SVC_REPLICA_ADDRESS: 'replica-2:99999' }), ['SVC_REPLICA_ADDRESS must be host:port (an IPv6 address in brackets), the address other replicas dial to reach this one']);
  t.equal(loadConfig({ SVC_REPLICA_ADDRESS: 'replica-2:65535' }).replicaAddress, 'replica-2:65535');
  // URLs written into answers, or fetched with the connectors' own credentials, carry none of their own
  for (const name of ['SVC_PUBLIC_URL', 'SVC_DASHBOARD_URL', 'SVC_TUNNEL_PUBLIC_URL', 'SVC_STRIPE_API_BASE', 'SVC_SALESFORCE_API_BASE']) {
    const scheme = name === 'SVC_TUNNEL_PUBLIC_URL' ? 'wss' : 'https';
    const problems = problemsOf({ [name]: `${scheme}://admin:hunter2secret@svc.example/` });
    t.same(problems, [`${name} must not hold a user name or password`], name);
  }
  // a secret is never echoed
  const secretEnv = {
    DATABASE_URL: 'mysql://svc:hunter2secret@db/x',
    SVC_DEMO_DATABASE_URL: 'postgres://svc:hunter2secret@db:notaport/x',
    SVC_MASTER_KEY: 'hunter2secret',
    SVC_MASTER_KEY_PREVIOUS: `${'a'.repeat(64)},hunter2secret`,
    SVC_METRICS_TOKEN: 'hunter2secret',
  };
  const problems = problemsOf(secretEnv);
  t.equal(problems.length, Object.keys(secretEnv).length, problems.join('; '));
  for (const name of Object.keys(secretEnv)) t.ok(problems.some((p) => p.startsWith(`${name} `)), `${name} is named`);
  t.notMatch(problems.join('\n'), /hunter2/, 'no secret in the problems');
});

t.test('the settings table', async (t) => {
  const { values, problems } = readSettings({ PORT: 'x', SVC_MAX_ROWS: '7' });
  t.same(problems, ['PORT must be a whole number, got "x"']);
  t.equal(values.PORT, 8080, 'a wrong value reads as the default (it is reported)');
  t.equal(values.SVC_MAX_ROWS, 7);
  t.ok(Object.keys(SETTINGS).every((name) => /^[A-Z][A-Z0-9_]*$/.test(name)), 'one variable name per setting');
  t.equal(parseDuration('1.5h'), 5_400_000);
  t.ok(Number.isNaN(parseDuration('-1s')));
});

t.test('every setting is in the operator documentation’s configuration table', async (t) => {
  const docs = [path.join(root, 'README.md'), ...fs.readdirSync(path.join(root, 'docs'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.md')).map((f) => path.join(root, 'docs', f))];
  const rows = docs.flatMap((f) => fs.readFileSync(f, 'utf8').split('\n')).filter((l) => l.startsWith('|'));
  for (const name of Object.keys(SETTINGS)) t.ok(rows.some((l) => l.includes(`\`${name}\``)), `${name} has a table row`);
});

t.test('SVC_ variables no svc program reads are named, with the setting they are closest to', async (t) => {
  const env = {
    SVC_RATE_LIMT: '5', // a typo of SVC_RATE_LIMIT
    SVC_QUERY_TIMEOUT: '1000', // SVC_QUERY_TIMEOUT_MS, three letters away
    SVC_SOMETHING_ELSE_ENTIRELY: 'x',
    SVC_RATE_LIMIT: '20', // a setting
    SVC_API_KEY: 'svc_conn_x', // the CLI's
    SVC_BASE_URL: 'http://x', // the CLI's
    NOT_SVC_RATE_LIMT: '1', // not ours
  };
  t.same(unknownSettings(env), [
    { name: 'SVC_QUERY_TIMEOUT', suggestion: 'SVC_QUERY_TIMEOUT_MS' },
    { name: 'SVC_RATE_LIMT', suggestion: 'SVC_RATE_LIMIT' },
    { name: 'SVC_SOMETHING_ELSE_ENTIRELY' },
  ]);
  t.same(unknownSettings({}), []);
  for (const name of Object.keys(SETTINGS)) if (name.startsWith('SVC_')) t.same(unknownSettings({ [name]: '1' }), [], `${name} is a setting`);
  t.notOk(JSON.stringify(unknownSettings({ SVC_MASTER_KY: 'secret-value-123' })).includes('secret-value-123'), 'names only, never values');
});
