/**
 * `node dist/bench/load.js`: the query path under load, as ratios against the same server's
 * `GET /healthz` at the same concurrency, from one load generator (autocannon) in the same run.
 *
 * A control plane (rate limits off, a funded wallet; restarted once, so it runs as after a restart
 * with its demo workers warm) listens on 127.0.0.1, port 0, first on the
 * embedded store (the default), then on a fresh PostgreSQL store (a database created on the
 * server at TEST_DATABASE_URL; skipped when none answers or BENCH_STORES=embedded). Each row runs
 * BENCH_SECONDS (default 5) at BENCH_CONNECTIONS (default 16):
 *  - `GET /healthz` (the baseline);
 *  - a demo primary-key lookup, every request with a distinct text (nothing can be served from
 *    a cache of answers);
 *  - a `postgres` live-target primary-key lookup against a real PostgreSQL (TEST_DATABASE_URL;
 *    skipped with a note when none answers), distinct texts too;
 *  - the same lookup on `postgres-relay`: the same database through an `svc-relay` (the compiled
 *    CLI in a child process, enrolled with a real token) over its mutual-TLS tunnel; on PGlite
 *    over the wire when no PostgreSQL answers;
 *  - on the PostgreSQL store, the relay lookup again through a second replica on the same store
 *    that does not hold the tunnel (each query forwarded to the holder over mutual TLS);
 *  - the same lookup on `mysql`, against the MariaDB/MySQL on 127.0.0.1:3306 (root, no password;
 *    skipped with a note when none answers).
 * Prints a Markdown table: requests per second, p50 and p99 latency, and the ratio to /healthz,
 * and how much a relay query costs against a `postgres` one.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import autocannon from 'autocannon';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { buildApp } from '../control-plane/app.js';
import { loadConfig } from '../control-plane/config.js';
import { customerDatabase, postgresDatabase, type CustomerDatabase } from './customer-db.js';
import { inTempDir } from './temp-dir.js';
import { startRelay, type RelayProcess } from './relay-process.js';

const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 5);
const CONNECTIONS = Number(process.env['BENCH_CONNECTIONS'] ?? 16);

interface Row {
  readonly name: string;
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly non2xx: number;
}

async function load(name: string, base: string, request: { method: 'GET' | 'POST'; path: string; key?: string; body?: (i: number) => string }): Promise<Row> {
  let i = 0;
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(request.key ? { authorization: `Bearer ${request.key}` } : {}) };
  const result = await autocannon({
    url: base,
    connections: CONNECTIONS,
    duration: SECONDS,
    requests: [
      {
        method: request.method,
        path: request.path,
        headers,
        ...(request.body ? { setupRequest: (req: autocannon.Request) => ({ ...req, body: (request.body as (i: number) => string)(i++) }) } : {}),
      },
    ],
  });
  return { name, rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx };
}

const ITEMS = 100_000;
const itemSql = (i: number): string => JSON.stringify({ sql: `SELECT id, name FROM items WHERE id = ${(i % ITEMS) + 1}` });

interface StoreRun {
  readonly store: string;
  readonly rows: readonly Row[];
  readonly postgresSkipped: boolean;
  /** resident memory (MB) of this process, control plane and load generator, at ready and right after the demo row */
  readonly rssReadyMb: number;
  readonly rssLoadedMb: number;
}

/** This process's resident memory in MB (VmRSS). */
async function rssMb(): Promise<number> {
  const status = await fs.readFile('/proc/self/status', 'utf8').catch(() => '');
  const kb = /VmRSS:\s+(\d+)/.exec(status)?.[1];
  return kb ? Math.round(Number(kb) / 1024) : Math.round(process.memoryUsage().rss / 1048576);
}

/**
 * One control plane on `databaseUrl`'s store (undefined: the embedded default), loaded row by
 * row; with `demoDatabaseUrl`, its demo datasets are in that PostgreSQL (SVC_DEMO_DATABASE_URL).
 */
function runOn(store: string, databaseUrl: string | undefined, customer: CustomerDatabase | undefined, relayDb: CustomerDatabase | undefined, mysqlDb: string | undefined, demoDatabaseUrl?: string): Promise<StoreRun> {
  // its working directory goes whether the run ends or fails
  return inTempDir('svc-bench-load-', (dataDir) => runIn(dataDir, store, databaseUrl, customer, relayDb, mysqlDb, demoDatabaseUrl));
}

async function runIn(dataDir: string, store: string, databaseUrl: string | undefined, customer: CustomerDatabase | undefined, relayDb: CustomerDatabase | undefined, mysqlDb: string | undefined, demoDatabaseUrl?: string): Promise<StoreRun> {
  const masterKey = randomBytes(32).toString('hex'); // shared by a second replica on a PostgreSQL store
  const config = loadConfig({
    SVC_MASTER_KEY: masterKey,
    SVC_DATA_DIR: dataDir,
    PORT: '0',
    SVC_TUNNEL_PORT: '0',
    LOG_LEVEL: 'silent',
    SVC_RATE_LIMIT: '0',
    SVC_SIGNUP_RATE_LIMIT: '0',
    SVC_REFUSED_STATEMENTS_PER_MINUTE: '0',
    SVC_LIVE_ALLOW_PRIVATE: '1',
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...(demoDatabaseUrl ? { SVC_DEMO_DATABASE_URL: demoDatabaseUrl } : {}),
  });
  // measured as after a restart: the first start generates the demo data, the second starts its
  // workers from the saved image (none is still starting while a row is measured)
  await (await buildApp(config, { awaitDemo: true })).app.close();
  const svc = await buildApp(config, { awaitDemo: true });
  await svc.app.listen({ host: '127.0.0.1', port: 0 });
  const addr = svc.app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  const base = `http://127.0.0.1:${addr.port}`;
  await svc.startTunnel();
  const call = async (method: string, url: string, key?: string, body?: unknown): Promise<Record<string, unknown>> => {
    const r = await fetch(`${base}${url}`, { method, headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
    return (await r.json()) as Record<string, unknown>;
  };
  const key = (await call('POST', '/v1/agent/account', undefined, { orgName: 'bench', agentName: 'bench' }))['apiKey'] as string;
  for (let i = 0; i < 5; i++) await call('POST', '/v1/agent/topup', key, { amount_cents: 1_000_000 });
  const demoConn = (await call('POST', '/v1/connections', key, { target_id: 'demo-healthcare', scopes: ['read:patients'], ttl_seconds: 3600 }))['connectionId'] as string;
  let pgConn: string | undefined;
  if (customer?.kind === 'postgres') {
    await call('POST', '/v1/connections/credentials', key, { connector_kind: 'postgres', secret: `${customer.url}${customer.url.includes('?') ? '&' : '?'}sslmode=disable` });
    pgConn = (await call('POST', '/v1/connections', key, { target_id: 'postgres', scopes: ['read:public.items'], ttl_seconds: 3600 }))['connectionId'] as string | undefined;
  }
  let relay: RelayProcess | undefined;
  let relayConn: string | undefined;
  if (relayDb) {
    relay = await startRelay({ svc, base: new URL(base), key, databaseUrl: relayDb.url });
    relayConn = (await call('POST', '/v1/connections', key, { target_id: 'postgres-relay', scopes: [`relay:${relay.relayId}`, 'read:public.items'], ttl_seconds: 3600 }))['connectionId'] as string | undefined;
  }
  let mysqlConn: string | undefined;
  if (mysqlDb) {
    await call('POST', '/v1/connections/credentials', key, { connector_kind: 'mysql', secret: `mysql://root@127.0.0.1:3306/${mysqlDb}` });
    mysqlConn = (await call('POST', '/v1/connections', key, { target_id: 'mysql', scopes: ['read:items'], ttl_seconds: 3600 }))['connectionId'] as string | undefined;
  }

  const rows: Row[] = [];
  const rssReadyMb = await rssMb();
  rows.push(await load('GET /healthz', base, { method: 'GET', path: '/healthz' }));
  rows.push(
    await load('demo primary-key lookup (distinct texts)', base, {
      method: 'POST',
      path: `/v1/connections/${demoConn}/query`,
      key,
      body: (i) => JSON.stringify({ sql: `SELECT patient_id, gender FROM patients WHERE patient_id = 'pat-${String((i % 900) + 1).padStart(6, '0')}' AND ${i} = ${i}` }),
    }),
  );
  const rssLoadedMb = await rssMb();
  if (pgConn) {
    rows.push(
      await load('postgres primary-key lookup (distinct texts)', base, {
        method: 'POST',
        path: `/v1/connections/${pgConn}/query`,
        key,
        body: itemSql,
      }),
    );
  }
  if (relayConn) rows.push(await load('postgres-relay primary-key lookup (distinct texts)', base, { method: 'POST', path: `/v1/connections/${relayConn}/query`, key, body: itemSql }));
  if (relayConn && databaseUrl) {
    // a second replica on the same store, without the relay's tunnel: it forwards each query to this one
    const otherDir = path.join(dataDir, 'replica-2');
    await fs.mkdir(otherDir);
    const other = await buildApp({ ...config, dataDir: otherDir }, { demo: 'lazy' });
    await other.app.listen({ host: '127.0.0.1', port: 0 });
    const otherAddr = other.app.server.address();
    if (otherAddr && typeof otherAddr !== 'string') {
      rows.push(await load('postgres-relay, through a replica without the tunnel (forwarded)', `http://127.0.0.1:${otherAddr.port}`, { method: 'POST', path: `/v1/connections/${relayConn}/query`, key, body: itemSql }));
    }
    await other.app.close();
  }
  if (mysqlConn) rows.push(await load('mysql primary-key lookup (distinct texts)', base, { method: 'POST', path: `/v1/connections/${mysqlConn}/query`, key, body: itemSql }));
  await relay?.stop();
  await svc.app.close();
  return { store, rows, postgresSkipped: !pgConn, rssReadyMb, rssLoadedMb };
}

/** A fresh database with `items` on the MariaDB/MySQL at 127.0.0.1:3306, or undefined when none answers. */
async function mysqlDatabase(): Promise<{ name: string; drop: () => Promise<void> } | undefined> {
  let admin: mysql.Connection;
  try {
    admin = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root', password: '', connectTimeout: 1500 });
  } catch {
    return undefined;
  }
  const name = `svc_bench_load_${process.pid}`;
  await admin.query(`DROP DATABASE IF EXISTS ${name}`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.query(`CREATE TABLE ${name}.items (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL)`);
  for (let from = 1; from <= ITEMS; from += 5000) {
    const values = Array.from({ length: Math.min(5000, ITEMS - from + 1) }, (_, k) => `(${from + k}, 'item ${from + k}')`).join(',');
    await admin.query(`INSERT INTO ${name}.items VALUES ${values}`);
  }
  return {
    name,
    drop: async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${name}`);
      await admin.end();
    },
  };
}

async function main(): Promise<void> {
  let customer: CustomerDatabase | undefined;
  try {
    customer = await customerDatabase('svc_bench_load');
    const c = new pg.Client({ connectionString: customer.url });
    await c.connect();
    await c.query('CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)');
    await c.query(`INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, ${ITEMS}) g`);
    await c.query('ANALYZE items');
    await c.end();
  } catch {
    await customer?.drop().catch(() => undefined);
    customer = undefined;
  }
  const my = await mysqlDatabase().catch(() => undefined);
  const runs: StoreRun[] = [];
  let storeDb: Awaited<ReturnType<typeof postgresDatabase>>;
  try {
    runs.push(await runOn('embedded', undefined, customer, customer, my?.name));
    storeDb = process.env['BENCH_STORES'] === 'embedded' ? undefined : await postgresDatabase('svc_bench_store');
    if (storeDb) {
      try {
        // the customer database lives on the same server as this store, and the control plane refuses
        // credentials that point at its own database server: the postgres row runs on the embedded store
        // only (the relay reaches it from its own side, so its row runs on both)
        runs.push(await runOn('PostgreSQL', storeDb.url, undefined, customer, my?.name));
      } finally {
        await storeDb.drop();
      }
      // the second configuration: a PostgreSQL store and the demo datasets in a PostgreSQL
      // (SVC_DEMO_DATABASE_URL) instead of the embedded demo workers
      const store2 = await postgresDatabase('svc_bench_store2');
      const demoDb = await postgresDatabase('svc_bench_demo');
      try {
        if (store2 && demoDb) runs.push(await runOn('PostgreSQL, demo in PostgreSQL', store2.url, undefined, undefined, undefined, demoDb.url));
      } finally {
        await store2?.drop();
        await demoDb?.drop();
      }
    }
  } finally {
    await customer?.drop();
    await my?.drop();
  }

  process.stdout.write(`${CONNECTIONS} connections, ${SECONDS} s each\n\n| store | load | requests/s | p50 | p99 | non-2xx | ÷ /healthz |\n| --- | --- | --- | --- | --- | --- | --- |\n`);
  for (const run of runs) {
    const healthz = run.rows[0]?.rps ?? 1;
    for (const r of run.rows) process.stdout.write(`| ${run.store} | ${r.name} | ${r.rps.toFixed(0)} | ${r.p50} ms | ${r.p99} ms | ${r.non2xx} | ${(r.rps / healthz).toFixed(3)}× |\n`);
  }
  for (const run of runs) {
    const direct = run.rows.find((r) => r.name.startsWith('postgres primary-key'));
    const relayed = run.rows.find((r) => r.name.startsWith('postgres-relay'));
    if (direct && relayed) process.stdout.write(`\n${run.store} store: a postgres-relay query costs ${(direct.rps / relayed.rps).toFixed(2)}× a postgres one (throughput ratio; goal ≤ 1.25×)\n`);
    const forwarded = run.rows.find((r) => r.name.includes('(forwarded)'));
    if (relayed && forwarded) process.stdout.write(`\n${run.store} store: a relay query forwarded by another replica costs ${(relayed.rps / forwarded.rps).toFixed(2)}× one answered by the tunnel's holder (throughput ratio)\n`);
  }
  process.stdout.write('\nresident memory of this process (control plane and autocannon together, after a first start in the same process; `npm start` alone is smaller):\n');
  for (const run of runs) process.stdout.write(`- ${run.store} store: ${run.rssReadyMb} MB at ready, ${run.rssLoadedMb} MB right after the demo row\n`);
  if (runs[0]?.postgresSkipped) process.stdout.write('\n(postgres row skipped: no PostgreSQL answered at TEST_DATABASE_URL; the relay row ran against PGlite over the wire)\n');
  if (!my) process.stdout.write('\n(mysql rows skipped: no MariaDB/MySQL answered on 127.0.0.1:3306)\n');
  if (storeDb) process.stdout.write('\n(no postgres row on the PostgreSQL store: its customer database would be on the store\'s own server, which the control plane refuses to read)\n');
  if (!storeDb) process.stdout.write('\n(PostgreSQL store skipped: no PostgreSQL answered at TEST_DATABASE_URL, or BENCH_STORES=embedded)\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
