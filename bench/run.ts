/**
 * `npm run bench`: speed as ratios against a baseline measured in the same run.
 *
 * 1. SQL policy: parse + check + rewrite of a typical 3-table join, against a bare parse of the
 *    same statement (the floor any real-parser approach pays).
 * 2. Query path: POST /v1/connections/{id}/query end to end (HTTP, auth, policy, billing, audit,
 *    execution) against running the same rewritten statement directly on the same demo engine.
 * 3. Row-level security: the rewritten statement as the demo reader role (row security applies)
 *    against the same statement as the engine's superuser (row security bypassed), on one
 *    embedded engine loaded from the demo image.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
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

  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-'));
  const config = loadConfig({ SVC_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'silent' });
  const svc = await buildApp(config, { awaitDemo: true });
  const engine = await svc.demoReady;
  const inject = async (method: string, url: string, body?: unknown, key?: string) => {
    const r = await svc.app.inject({ method: method as 'POST', url, payload: body as object, headers: key ? { authorization: `Bearer ${key}` } : {} });
    return JSON.parse(r.body) as Record<string, unknown>;
  };
  const signup = await inject('POST', '/v1/agent/account', { orgName: 'bench', agentName: 'bench' });
  const key = signup['apiKey'] as string;
  await inject('POST', '/v1/agent/topup', { amount_cents: 1_000_000 }, key);
  const conn = (await inject('POST', '/v1/connections', { target_id: 'demo-healthcare', scopes: ['read:encounters', 'read:patients', 'read:claims', 'period:2024'] }, key))['connectionId'] as string;
  const rewritten = checkAndRewrite(SQL, policy).sql;
  const limits = config.limits;
  const settings = scopeSettings([...policy.allowed.values()], scopes.periods);
  const directRun = () => engine.run({ sql: rewritten, direct: false, settings, tenant: 'bench', timeoutMs: limits.queryTimeoutMs, maxRows: limits.maxRows, maxBytes: limits.maxResultBytes });
  const viaApi = () => inject('POST', `/v1/connections/${conn}/query`, { sql: SQL }, key);
  await timeEachAsync(20, directRun);
  await timeEachAsync(20, viaApi);
  const direct = median(await timeEachAsync(100, directRun));
  const api = median(await timeEachAsync(100, viaApi));
  await svc.app.close();

  // row security on and off, same statement, same engine
  // as a demo worker runs: on the shared image, with the workers' settings
  const db = await EmbeddedPostgres.start({ image: await unpackImage(await embeddedDemoImage(path.join(dataDir, 'rls'), catalogue.datasets)), settings: DEMO_WORKER_SETTINGS });
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
  await db.terminate();
  await fs.rm(dataDir, { recursive: true, force: true });

  const rows = [
    ['SQL policy: parse + check + rewrite (3-table join)', `${policyTime.toFixed(1)} µs median`, `${(policyTime / parseOnly).toFixed(2)}× a bare parse (${parseOnly.toFixed(1)} µs)`],
    ['SQL policy, the same text again (check cache)', `${cachedTime.toFixed(1)} µs median`, `${(cachedTime / policyTime).toFixed(3)}× a full check`],
    [
      'Row-level security (3-table join, period:2024)',
      `${(rls / 1000).toFixed(2)} ms median`,
      `${(rls / bare).toFixed(2)}× the same statement with row security bypassed (${(bare / 1000).toFixed(2)} ms)${same ? '' : ' — RESULTS DIFFER (the rewrite alone does not scope this statement)'}`,
    ],
    ['Query path end to end (in-process HTTP, embedded demo)', `${(api / 1000).toFixed(2)} ms median`, `${(api / direct).toFixed(2)}× running the statement directly (${(direct / 1000).toFixed(2)} ms); overhead ${((api - direct) / 1000).toFixed(2)} ms`],
  ];
  process.stdout.write('| measurement | result | against the baseline |\n| --- | --- | --- |\n');
  for (const r of rows) process.stdout.write(`| ${r.join(' | ')} |\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
