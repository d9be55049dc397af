/**
 * `node dist/bench/admission.js`: what a crowd of free organizations costs a paying one on the
 * demo engines, as a ratio taken in one run.
 *
 * A control plane (embedded store, demo engines warm, rate limits off) on 127.0.0.1, port 0. A
 * paying organization (funded wallet) sends demo joins one at a time, each with a distinct text,
 * from autocannon with one connection for BENCH_SECONDS (default 5): first on a quiet server,
 * then while eight trial organizations (one client address, two autocannon connections each)
 * flood 3-way cartesian joins. Prints the paying organization's p50/p97.5/p99 in both runs, the
 * ratio of the loaded p97.5 to the quiet one, and the gate's admission counts (every paying
 * statement is admitted at once; the flood queues for the trial share). The test suite asserts
 * the admission counts (test/latency/admission.test.ts); this ratio depends on how many cores
 * the flood and the paying statements share, so it is measured here, not asserted.
 *
 * Then the same paying organization's joins while one other organization floods the largest
 * statements accepted (about 20 KB of CTEs, each text distinct so none comes from the check
 * cache; eight connections): they are checked in the SQL check worker, off the event loop, and
 * the paying organization's short statements are checked on it without waiting for them
 * (test/latency/complexity.test.ts asserts the worker's behaviour; this measures the latency).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { buildApp } from '../control-plane/app.js';
import { loadConfig } from '../control-plane/config.js';

const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 5);
const FREE_ORGS = 8;
const VICTIM_SQL = 'SELECT count(*) AS n, count(DISTINCT p.gender) AS g FROM encounters e JOIN patients p ON p.patient_id = e.patient_id';
const FLOOD_SQL = 'SELECT count(*) AS n FROM encounters a, encounters b, encounters c';
/** a statement near the largest accepted: n CTEs (900: about 20 KB), distinct by `i` */
const ctes = (n: number, i: number): string => `WITH ${Array.from({ length: n }, (_, k) => `c${k} AS (SELECT ${k === 0 ? i : 1})`).join(', ')} SELECT 1 FROM encounters LIMIT 1`;

interface Latency {
  readonly requests: number;
  readonly p50: number;
  readonly p975: number;
  readonly p99: number;
  readonly non2xx: number;
}

function cannon(base: string, path: string, key: string, connections: number, body: (i: number) => string, seconds: number): Promise<autocannon.Result> {
  let i = 0;
  return autocannon({
    url: base,
    connections,
    duration: seconds,
    requests: [{ method: 'POST', path, headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, setupRequest: (req: autocannon.Request) => ({ ...req, body: body(i++) }) }],
  });
}

async function main(): Promise<void> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-admission-'));
  const config = loadConfig({
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_DATA_DIR: dataDir,
    PORT: '0',
    LOG_LEVEL: 'silent',
    SVC_RATE_LIMIT: '0',
    SVC_SIGNUP_RATE_LIMIT: '0',
    SVC_REFUSED_STATEMENTS_PER_MINUTE: '0',
  });
  const svc = await buildApp(config, { awaitDemo: true });
  try {
    await svc.app.listen({ host: '127.0.0.1', port: 0 });
    const addr = svc.app.server.address();
    if (!addr || typeof addr === 'string') throw new Error('no address');
    const base = `http://127.0.0.1:${addr.port}`;
    const call = async (method: string, url: string, key?: string, body?: unknown): Promise<Record<string, unknown>> => {
      const r = await fetch(`${base}${url}`, { method, headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
      return (await r.json()) as Record<string, unknown>;
    };
    const signup = async (org: string): Promise<string> => (await call('POST', '/v1/agent/account', undefined, { orgName: org, agentName: 'bench' }))['apiKey'] as string;
    const open = async (key: string, scopes: string[]): Promise<string> => (await call('POST', '/v1/connections', key, { target_id: 'demo-healthcare', scopes, ttl_seconds: 3600 }))['connectionId'] as string;

    const payer = await signup('paying');
    await call('POST', '/v1/agent/topup', payer, { amount_cents: 1_000_000 });
    const payerConn = await open(payer, ['read:encounters', 'read:patients']);
    const victim = (seconds: number): Promise<autocannon.Result> =>
      cannon(base, `/v1/connections/${payerConn}/query`, payer, 1, (i) => JSON.stringify({ sql: `${VICTIM_SQL} WHERE e.encounter_id IS NOT NULL OR ${i} = 0` }), seconds);
    const latency = (r: autocannon.Result): Latency => ({ requests: r.requests.total, p50: r.latency.p50, p975: r.latency.p97_5, p99: r.latency.p99, non2xx: r.non2xx });

    await victim(1); // warm
    const quiet = latency(await victim(SECONDS));

    // one organization flooding the largest statements (first: the cartesian joins below run on
    // to their deadline after their clients leave)
    const large = await signup('large statements');
    await call('POST', '/v1/agent/topup', large, { amount_cents: 1_000_000 });
    const largeConn = await open(large, ['read:encounters']);
    const bigFlood = cannon(base, `/v1/connections/${largeConn}/query`, large, 8, (i) => JSON.stringify({ sql: ctes(900, i) }), SECONDS + 2);
    await new Promise((res) => setTimeout(res, 1000));
    const underBig = latency(await victim(SECONDS));
    const big = await bigFlood;

    // eight trial organizations flooding cartesian joins
    const free = await Promise.all(Array.from({ length: FREE_ORGS }, (_, i) => signup(`free ${i}`)));
    const freeConns = await Promise.all(free.map((k) => open(k, ['read:encounters'])));
    const engine = await svc.demoReady;
    const before = engine.admissions();
    const floods = free.map((k, i) => cannon(base, `/v1/connections/${freeConns[i]}/query`, k, 2, () => JSON.stringify({ sql: FLOOD_SQL }), SECONDS + 2));
    await new Promise((res) => setTimeout(res, 1000)); // the flood holds the trial share
    let waitingPeak = 0;
    const sampler = setInterval(() => (waitingPeak = Math.max(waitingPeak, engine.stats().waiting)), 20);
    const loaded = latency(await victim(SECONDS));
    clearInterval(sampler);
    const after = engine.admissions();
    await Promise.all(floods);

    const row = (name: string, l: Latency): string => `| ${name} | ${l.requests} | ${l.p50} ms | ${l.p975} ms | ${l.p99} ms | ${l.non2xx} | ${(l.p975 / Math.max(1, quiet.p975)).toFixed(2)}× |\n`;
    process.stdout.write(`a paying organization's demo join (distinct texts), one at a time, for ${SECONDS} s in each row\n\n`);
    process.stdout.write('| while | statements | p50 | p97.5 | p99 | non-2xx | p97.5 ÷ quiet |\n| --- | --- | --- | --- | --- | --- | --- |\n');
    process.stdout.write(row('the server is quiet', quiet));
    process.stdout.write(row('another organization floods ~20 KB statements (8 connections)', underBig));
    process.stdout.write(row(`${FREE_ORGS} trial organizations flood 3-way cartesian joins (2 connections each)`, loaded));
    process.stdout.write(`\nthe large statements: ${big['2xx']} answered, ${big.non2xx} other\n`);
    process.stdout.write(
      `the trial flood: up to ${waitingPeak} of its statements waiting at the gate at once; admissions meanwhile: paying ${after.paid.atOnce - before.paid.atOnce} at once, ${after.paid.queued - before.paid.queued} after a wait; ` +
        `trial ${after.trial.atOnce - before.trial.atOnce} at once, ${after.trial.queued - before.trial.queued} after a wait, ${after.trial.timedOut - before.trial.timedOut} timed out waiting (peak ${after.trialPeak} of a trial share of ${after.trialCapacity})\n`,
    );
  } finally {
    await svc.app.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
