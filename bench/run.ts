/**
 * `npm run bench`: speed as ratios against a baseline measured in the same run.
 *
 * 1. SQL policy: parse + check + rewrite of a typical 3-table join, against a bare parse of the
 *    same statement (the floor any real-parser approach pays).
 * 2. Query path: POST /v1/connections/{id}/query end to end (HTTP, auth, policy, billing, audit,
 *    execution) against running the same rewritten statement directly on the same demo engine,
 *    on the embedded store and on a PostgreSQL store (a fresh database at TEST_DATABASE_URL;
 *    skipped when none answers or BENCH_STORES=embedded): a 3-table join, and the overhead of a
 *    primary-key lookup whose text is new each time.
 * 3. Row-level security: the rewritten statement as the demo reader role (row security applies)
 *    against the same statement as the engine's superuser (row security bypassed), on one
 *    embedded engine loaded from the demo image.
 */
import path from 'node:path';
import { parseSync } from 'pgsql-parser';
import { buildApp } from '../control-plane/app.js';
import { Catalogue, parseScopes } from '../control-plane/catalogue/index.js';
import { loadConfig } from '../control-plane/config.js';
import { demoPolicy } from '../control-plane/query/backends.js';
import { DEMO_READER_ROLE } from '../control-plane/demo/load.js';
import { scopeSettings } from '../control-plane/query/scope-settings.js';
import { DEMO_WORKER_SETTINGS, embeddedDemoImage } from '../control-plane/demo/engine.js';
import { unpackImage } from '../control-plane/embedded/image-fs.js';
import { EmbeddedPostgres } from '../control-plane/embedded/index.js';
import { checkAndRewrite, initSqlParser } from '../control-plane/query/sql/index.js';
import { CheckCache } from '../control-plane/query/sql/check-cache.js';
import { postgresDatabase } from './customer-db.js';
import { inTempDir } from './temp-dir.js';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

function timeEach(n: number, fn: () => void): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    fn();
    out.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  return out;
}

async function timeEachAsync(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await fn();
    out.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  return out;
}

/**
 * Medians (µs) of `a` and `b` timed in turns, one of each at a time after `warm` of each (a
 * machine whose speed drifts during the run shifts both alike).
 */
async function alternating(warm: number, n: number, a: () => Promise<unknown>, b: () => Promise<unknown>): Promise<[number, number]> {
  const ta: number[] = [];
  const tb: number[] = [];
  for (let i = 0; i < warm + n; i++) {
    const [da] = await timeEachAsync(1, a);
    const [db] = await timeEachAsync(1, b);
    if (i >= warm && da !== undefined && db !== undefined) {
      ta.push(da);
      tb.push(db);
    }
  }
  return [median(ta), median(tb)];
}

const ms = (us: number): string => `${(us / 1000).toFixed(2)} ms`;

/** Medians (µs) of the query path through the API and of the same statement run directly on the demo engine. */
interface PathTimes {
  readonly joinApi: number;
  readonly joinDirect: number;
  readonly lookupApi: number;
  readonly lookupDirect: number;
}

/**
 * The query path on a control plane of its own (`storeUrl`: a PostgreSQL store, else the embedded
 * one): the 3-table join sent again and again (its check cached), and primary-key lookups each
 * with a new text (checked every time), each against the same rewritten statement run directly
 * on the demo engine. Sequential: one query at a time, as an agent waiting for each answer; the
 * per-key rate limit off (as in bench/load.ts).
 */
async function queryPath(dataDir: string, storeUrl?: string): Promise<PathTimes> {
  const config = loadConfig({ SVC_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'silent', SVC_RATE_LIMIT: '0', ...(storeUrl ? { DATABASE_URL: storeUrl } : {}) });
  const svc = await buildApp(config, { awaitDemo: true });
  try {
    const engine = await svc.demoReady;
    const inject = async (method: string, url: string, body?: unknown, key?: string) => {
      const r = await svc.app.inject({ method: method as 'POST', url, payload: body as object, headers: key ? { authorization: `Bearer ${key}` } : {} });
      if (r.statusCode >= 300) throw new Error(`${method} ${url} answered ${r.statusCode}: ${r.body.slice(0, 300)}`);
      return JSON.parse(r.body) as Record<string, unknown>;
    };
    const signup = await inject('POST', '/v1/agent/account', { orgName: 'bench', agentName: 'bench' });
    const key = signup['apiKey'] as string;
    await inject('POST', '/v1/agent/topup', { amount_cents: 1_000_000 }, key);
    const target = new Catalogue().target('demo-healthcare');
    if (!target) throw new Error('no healthcare target');
    const limits = config.limits;
    const direct = (text: string, scopeNames: string[]): (() => Promise<unknown>) => {
      const scopes = parseScopes(target, scopeNames);
      const policy = demoPolicy(target, scopes);
      const spec = { sql: checkAndRewrite(text, policy).sql, direct: false, settings: scopeSettings([...policy.allowed.values()], scopes.periods), tenant: 'bench', timeoutMs: limits.queryTimeoutMs, maxRows: limits.maxRows, maxBytes: limits.maxResultBytes };
      return () => engine.run(spec);
    };
    const joinScopes = ['read:encounters', 'read:patients', 'read:claims', 'period:2024'];
    const joinConn = (await inject('POST', '/v1/connections', { target_id: 'demo-healthcare', scopes: joinScopes }, key))['connectionId'] as string;
    const joinDirect = direct(SQL, joinScopes);
    const joinApi = () => inject('POST', `/v1/connections/${joinConn}/query`, { sql: SQL }, key);
    const [joinDirectUs, joinApiUs] = await alternating(20, 100, joinDirect, joinApi);

    const lookupConn = (await inject('POST', '/v1/connections', { target_id: 'demo-healthcare', scopes: ['read:patients'] }, key))['connectionId'] as string;
    let n = 0;
    const lookupText = (): string => `SELECT patient_id, gender FROM patients WHERE patient_id = 'pat-${String((n % 900) + 1).padStart(6, '0')}' AND ${n++} >= 0`;
    const lookupDirect = direct(lookupText(), ['read:patients']);
    const lookupApi = () => inject('POST', `/v1/connections/${lookupConn}/query`, { sql: lookupText() }, key);
    const [lookupDirectUs, lookupApiUs] = await alternating(200, 500, lookupDirect, lookupApi);
    return { joinApi: joinApiUs, joinDirect: joinDirectUs, lookupApi: lookupApiUs, lookupDirect: lookupDirectUs };
  } finally {
    await svc.app.close();
  }
}

const SQL = `SELECT p.gender, e.class_code, count(*) AS encounters, sum(c.total_amount) AS billed
  FROM encounters e JOIN patients p ON p.patient_id = e.patient_id
  LEFT JOIN claims c ON c.encounter_id = e.encounter_id
  WHERE e.status = 'finished' GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 20`;

async function main(): Promise<void> {
  await initSqlParser();
  const catalogue = new Catalogue();
  const target = catalogue.target('demo-healthcare');
  if (!target) throw new Error('no healthcare target');
  const scopes = parseScopes(target, ['read:encounters', 'read:patients', 'read:claims', 'period:2024']);
  const policy = demoPolicy(target, scopes);

  // warm up, then measure
  timeEach(500, () => checkAndRewrite(SQL, policy));
  const parseOnly = median(timeEach(3000, () => parseSync(SQL)));
  const policyTime = median(timeEach(3000, () => checkAndRewrite(SQL, policy)));
  // a repeated text under the same scopes: the check cache the query path keeps
  const cache = new CheckCache<ReturnType<typeof checkAndRewrite>>();
  const cacheKey = () => CheckCache.key(target.id, scopes.normalized, SQL);
  cache.set(cacheKey(), checkAndRewrite(SQL, policy));
  const cachedTime = median(timeEach(3000, () => cache.get(cacheKey())));

  const rewritten = checkAndRewrite(SQL, policy).sql;
  const limits = loadConfig({}).limits;
  const settings = scopeSettings([...policy.allowed.values()], scopes.periods);
  // its directory (stores, demo images) goes when it ends, failed or not
  const { paths, postgresSkipped, rls, bare, same } = await inTempDir('svc-bench-', async (dataDir) => {
    const paths: { store: string; m: PathTimes }[] = [{ store: 'embedded store', m: await queryPath(path.join(dataDir, 'embedded')) }];
    const storeDb = process.env['BENCH_STORES'] === 'embedded' ? undefined : await postgresDatabase('svc_bench_run');
    if (storeDb) {
      try {
        paths.push({ store: 'PostgreSQL store', m: await queryPath(path.join(dataDir, 'postgres'), storeDb.url) });
      } finally {
        await storeDb.drop();
      }
    }

    // row security on and off, same statement, same engine
    // as a demo worker runs: on the shared image, with the workers' settings
    const db = await EmbeddedPostgres.start({ image: await unpackImage(await embeddedDemoImage(path.join(dataDir, 'rls'), catalogue.datasets)), settings: DEMO_WORKER_SETTINGS });
    try {
      const read = (preamble: string[]) => db.read({ preamble, sql: rewritten, maxRows: limits.maxRows, maxBytes: limits.maxResultBytes, direct: false });
      const withRls = [`SET LOCAL ROLE ${DEMO_READER_ROLE}`, 'SET LOCAL search_path = pg_catalog', 'SET LOCAL enable_nestloop = off', ...settings];
      const withoutRls = ['SET LOCAL search_path = pg_catalog', 'SET LOCAL enable_nestloop = off', ...settings];
      // the same rows (as a set: ties under ORDER BY … LIMIT may come in either order)
      const rowSet = async (preamble: string[]) => JSON.stringify((await read(preamble)).rows.map((r) => JSON.stringify(r)).sort());
      const same = (await rowSet(withRls)) === (await rowSet(withoutRls));
      await timeEachAsync(10, () => read(withRls));
      await timeEachAsync(10, () => read(withoutRls));
      const rls = median(await timeEachAsync(50, () => read(withRls)));
      const bare = median(await timeEachAsync(50, () => read(withoutRls)));
      return { paths, postgresSkipped: !storeDb, rls, bare, same };
    } finally {
      await db.terminate();
    }
  });

  const rows = [
    ['SQL policy: parse + check + rewrite (3-table join)', `${policyTime.toFixed(1)} µs median`, `${(policyTime / parseOnly).toFixed(2)}× a bare parse (${parseOnly.toFixed(1)} µs)`],
    ['SQL policy, the same text again (check cache)', `${cachedTime.toFixed(1)} µs median`, `${(cachedTime / policyTime).toFixed(3)}× a full check`],
    [
      'Row-level security (3-table join, period:2024)',
      `${(rls / 1000).toFixed(2)} ms median`,
      `${(rls / bare).toFixed(2)}× the same statement with row security bypassed (${(bare / 1000).toFixed(2)} ms)${same ? '' : ' — RESULTS DIFFER (the rewrite alone does not scope this statement)'}`,
    ],
    ...paths.flatMap(({ store, m }) => [
      [`Query path end to end, ${store} (in-process HTTP, embedded demo, 3-table join)`, `${ms(m.joinApi)} median`, `${(m.joinApi / m.joinDirect).toFixed(2)}× running the statement directly (${ms(m.joinDirect)}); overhead ${ms(m.joinApi - m.joinDirect)}`],
      [`Query path overhead, ${store} (primary-key lookup, each text new)`, `${ms(m.lookupApi - m.lookupDirect)} between the medians`, `${ms(m.lookupApi)} through the API against ${ms(m.lookupDirect)} running the statement directly`],
    ]),
  ];
  if (postgresSkipped) rows.push(['(PostgreSQL store skipped: no PostgreSQL answered at TEST_DATABASE_URL, or BENCH_STORES=embedded)', '', '']);
  process.stdout.write('| measurement | result | against the baseline |\n| --- | --- | --- |\n');
  for (const r of rows) process.stdout.write(`| ${r.join(' | ')} |\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
