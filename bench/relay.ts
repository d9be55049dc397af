/**
 * `npm run bench` (part 3): the relay path against direct `pg`, on the same customer database
 * in the same run.
 *
 * The customer database is a real PostgreSQL (BENCH_DATABASE_URL, else TEST_DATABASE_URL, else
 * postgres://postgres@127.0.0.1:5432/test) when it answers, else PGlite over the wire
 * (bench/customer-db.ts; SVC_TEST_FORCE_PGLITE=1 forces it). The control plane is built
 * in-process (HTTP and the mutual-TLS tunnel listener on port 0); the relay is the compiled CLI
 * `dist/cli/svc-relay.js` in a child process, enrolled with a real token, so its memory is read
 * from /proc/<pid>/status.
 *
 * Paths, with the same statements:
 *  - direct: a pg.Pool with as many connections as the relay's pool (POOL), one `pool.query`;
 *  - tunnel: control plane → tunnel session → openStream → relay → pg (no HTTP, no policy);
 *  - api:    POST /v1/connections/:id/query over real HTTP (auth, parse/check/rewrite, billing,
 *            audit) → tunnel → relay → pg.
 * Large results: a streamed read of about BENCH_RELAY_LARGE_MB MB of values over the tunnel,
 * against a direct cursor read (DECLARE … FETCH 500, the relay's batch size) on one pg connection.
 * Every measurement runs in BENCH_RELAY_ROUNDS interleaved rounds (default 3); ratios are the
 * median of the per-round ratios, so drift on a shared machine hits both sides alike. Every
 * answer is checked (the right row, the same bytes on both paths): a wrong one voids the run.
 *
 * A huge result (BENCH_RELAY_HUGE_MB, default 1024 on PostgreSQL) is then streamed to a consumer
 * that reads at most BENCH_RELAY_SLOW_MBS MB/s (default 32) while the relay's RSS is sampled.
 * The relay through the HTTP API is also held against a `postgres` live target on the same
 * database through the same API (the control plane's own pooled connections).
 *
 * Env: BENCH_RELAY_SECONDS (per measurement and round, default 1.5), BENCH_RELAY_LARGE_MB
 * (default 64 on PostgreSQL, 16 on PGlite), BENCH_RELAY_POOL (default 8), BENCH_RELAY_CPU_PROF=<dir> (run the
 * relay with --cpu-prof into <dir>), BENCH_RELAY_STORE=postgres (the control plane's own store on
 * the same PostgreSQL instead of the embedded one, to separate the store's cost from the relay's).
 */
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { buildApp, type SvcApp } from '../control-plane/app.js';
import { loadConfig as loadServerConfig } from '../control-plane/config.js';
import { memoryTransportPair, Session, type QueryOpen, type Value } from '../protocol/index.js';
import { createExecutor } from '../relay-agent/index.js';
import { startRelay, type RelayProcess } from './relay-process.js';
import { customerDatabase, DEFAULT_CUSTOMER_DATABASE_URL, type CustomerDatabase } from './customer-db.js';
import { closedLoop, cpuSecondsOf, median, memoryOf, rowBytes, rssSampler, summarize, type Run, type Summary } from './relay-measure.js';

const SECONDS = Number(process.env['BENCH_RELAY_SECONDS'] ?? 1.5);
const ROUNDS = Math.max(1, Math.round(Number(process.env['BENCH_RELAY_ROUNDS'] ?? 3)));
const POOL = Number(process.env['BENCH_RELAY_POOL'] ?? 8);
const CPU_PROF = process.env['BENCH_RELAY_CPU_PROF'];
const STORE = process.env['BENCH_RELAY_STORE'] === 'postgres' ? 'postgres' : 'embedded';
const SMALL_ROWS = 10_000;
/** MB of the result streamed to a slow consumer while the relay's RSS is sampled (default 1024 on PostgreSQL, 128 on PGlite; 0 skips) */
const HUGE_MB = process.env['BENCH_RELAY_HUGE_MB'] === undefined ? undefined : Number(process.env['BENCH_RELAY_HUGE_MB']);
/** the slow consumer's pace, MB/s */
const SLOW_MBS = Number(process.env['BENCH_RELAY_SLOW_MBS'] ?? 32);
const FETCH = 500; // the relay executor's default FETCH size, used by the direct cursor read too

/** A result of `rows` rows of 200 value bytes each (an int and a 196-character text). */
const bigResultSql = (rows: number): string => `SELECT g, repeat(md5(g::text), 6) || left(md5(g::text), 4) AS pad FROM generate_series(1, ${rows}) g`;

// ------------------------------------------------------------------ HTTP client (keep-alive, no fetch overhead)

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function postJson(base: URL, urlPath: string, key: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      { agent, host: base.hostname, port: base.port, path: urlPath, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': payload.length, authorization: `Bearer ${key}` } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown });
          } catch (err) {
            reject(err as Error);
          }
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

// ------------------------------------------------------------------ the set-up

interface Rig {
  readonly db: CustomerDatabase;
  readonly svc: SvcApp;
  readonly base: URL;
  readonly key: string;
  readonly relayId: string;
  readonly connectionId: string;
  /** a `postgres` live-target connection to the same database */
  readonly pgConnectionId: string;
  readonly relay: RelayProcess;
  readonly dataDir: string;
  /** the control plane's own store, when it runs on PostgreSQL (BENCH_RELAY_STORE=postgres) */
  readonly storeDb: CustomerDatabase | null;
}

async function seed(url: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`CREATE TABLE public.orders (id int PRIMARY KEY, tenant_id int NOT NULL, amount numeric(10,2) NOT NULL, note text NOT NULL)`);
    await c.query(`INSERT INTO public.orders SELECT g, g % 7, g * 1.25, 'order ' || g FROM generate_series(1, ${SMALL_ROWS}) g`);
    await c.query('ANALYZE public.orders');
  } finally {
    await c.end();
  }
}

async function setUp(largeMaxBytes: number): Promise<Rig> {
  const db = await customerDatabase('svc_bench_relay', { baseUrl: process.env['BENCH_DATABASE_URL'] ?? DEFAULT_CUSTOMER_DATABASE_URL });
  await seed(db.url);

  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-relay-'));
  // the control plane's store: embedded (the default, as `npm start`) or a PostgreSQL database
  const storeDb = STORE === 'postgres' ? await customerDatabase('svc_bench_store', { baseUrl: process.env['BENCH_DATABASE_URL'] ?? DEFAULT_CUSTOMER_DATABASE_URL, forcePglite: false }) : null;
  if (storeDb && storeDb.kind !== 'postgres') throw new Error('BENCH_RELAY_STORE=postgres needs a PostgreSQL at BENCH_DATABASE_URL / TEST_DATABASE_URL');
  const config = loadServerConfig({
    SVC_DATA_DIR: dataDir,
    PORT: '0',
    SVC_TUNNEL_PORT: '0',
    LOG_LEVEL: 'silent',
    SVC_RATE_LIMIT: '100000',
    SVC_SIGNUP_RATE_LIMIT: '100000',
    SVC_DEMO_WORKERS: '1',
    SVC_LIVE_ALLOW_PRIVATE: '1', // the `postgres` live target below reads the same local database
    ...(storeDb ? { DATABASE_URL: storeDb.url } : {}),
  });
  const svc = await buildApp(config, { awaitDemo: true }); // the demo engine idles during the measurements
  await svc.app.listen({ host: '127.0.0.1', port: 0 });
  const addr = svc.app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  const base = new URL(`http://127.0.0.1:${addr.port}`);
  await svc.startTunnel();

  const signup = await svc.app.inject({ method: 'POST', url: '/v1/agent/account', payload: { orgName: 'bench', agentName: 'bench', headless: true } });
  const key = (JSON.parse(signup.body) as { apiKey: string }).apiKey;
  const auth = { authorization: `Bearer ${key}` };
  const topup = await svc.app.inject({ method: 'POST', url: '/v1/agent/topup', payload: { amount_cents: 1_000_000 }, headers: auth });
  if (topup.statusCode !== 200) throw new Error(`top-up refused: ${topup.statusCode} ${topup.body}`);
  const relay = await startRelay({
    svc,
    base,
    key,
    databaseUrl: db.url,
    nodeArgs: CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(CPU_PROF)}`] : [],
    args: ['--pool-size', String(POOL), '--max-rows', '100000000', '--max-bytes', String(largeMaxBytes), '--statement-timeout-ms', '600000'],
  });
  const relayId = relay.relayId;

  const conn = await svc.app.inject({ method: 'POST', url: '/v1/connections', payload: { target_id: 'postgres-relay', scopes: [`relay:${relayId}`, 'read:public.orders'], tier: 'container', ttl_seconds: 3600 }, headers: auth });
  if (conn.statusCode !== 201) throw new Error(`connection refused: ${conn.statusCode} ${conn.body}`);
  const connectionId = (JSON.parse(conn.body) as { connectionId: string }).connectionId;
  // the same database as a `postgres` live target (the control plane's own pooled connections):
  // the relay's API path is held against it, so the control plane's part is the same on both
  const cred = await svc.app.inject({ method: 'POST', url: '/v1/connections/credentials', payload: { connector_kind: 'postgres', secret: `${db.url}${db.url.includes('?') ? '&' : '?'}sslmode=disable` }, headers: auth });
  if (cred.statusCode !== 201 && cred.statusCode !== 200) throw new Error(`postgres credential refused: ${cred.statusCode} ${cred.body}`);
  const pgConn = await svc.app.inject({ method: 'POST', url: '/v1/connections', payload: { target_id: 'postgres', scopes: ['read:public.orders'], ttl_seconds: 3600 }, headers: auth });
  if (pgConn.statusCode !== 201) throw new Error(`postgres connection refused: ${pgConn.statusCode} ${pgConn.body}`);
  const pgConnectionId = (JSON.parse(pgConn.body) as { connectionId: string }).connectionId;
  return { db, svc, base, key, relayId, connectionId, pgConnectionId, relay, dataDir, storeDb };
}

async function tearDown(r: Rig): Promise<void> {
  await r.relay.stop();
  agent.destroy();
  await r.svc.app.close();
  await r.db.drop();
  await r.storeDb?.drop();
  await fs.rm(r.dataDir, { recursive: true, force: true });
}

// ------------------------------------------------------------------ the measurements

const smallSql = (k: number): { sql: string; id: number } => {
  const id = (k % SMALL_ROWS) + 1;
  return { id, sql: `SELECT id, tenant_id, amount, note FROM public.orders WHERE id = ${id}` };
};

interface Result {
  readonly label: string;
  readonly value: string;
  readonly baseline: string;
  readonly target?: { text: string; pass: boolean };
}

async function main(): Promise<void> {
  const largeMbWanted = Number(process.env['BENCH_RELAY_LARGE_MB'] ?? 0);
  const rig = await setUp(4 * 1024 * 1024 * 1024);
  const largeMb = largeMbWanted > 0 ? largeMbWanted : rig.db.kind === 'postgres' ? 64 : 16;
  const session = () => {
    const live = rig.svc.services.tunnels.get(rig.relayId);
    if (!live) throw new Error('the tunnel is gone');
    return live.session;
  };
  const direct = new pg.Pool({ connectionString: rig.db.url, max: POOL });
  let errors = 0;
  const check = (ok: boolean, what: string) => {
    if (!ok && errors++ < 5) process.stderr.write(`wrong answer: ${what}\n`);
  };

  const viaDirect = async (k: number) => {
    const { sql, id } = smallSql(k);
    const r = await direct.query({ text: sql, rowMode: 'array' });
    check(r.rows[0]?.[0] === id, `direct ${id}`);
  };
  const open = (statement: string, maxRows: number, maxBytes: number): QueryOpen => ({ statement, limits: { maxRows, maxBytes }, timeoutMs: 600_000 });
  const viaTunnel = async (k: number) => {
    const { sql, id } = smallSql(k);
    const r = await session().openStream(open(sql, 10_001, 10_000_000)).collect();
    check(r.rows[0]?.[0] === id, `tunnel ${id}`);
  };
  // the relay's executor alone, in this process over an in-memory transport: no TLS, no
  // WebSocket, no second process; separates the executor's own cost from the tunnel's
  const [ta, tb] = memoryTransportPair();
  const local = new Session(ta, { role: 'server', pingIntervalMs: 0 });
  const localRelay = new Session(tb, { role: 'client', pingIntervalMs: 0 });
  const localExec = createExecutor({ databaseUrl: rig.db.url, poolSize: POOL });
  localRelay.onStream(localExec.handle);
  await local.ready;
  const viaExecutor = async (k: number) => {
    const { sql, id } = smallSql(k);
    const r = await local.openStream(open(sql, 10_001, 10_000_000)).collect();
    check(r.rows[0]?.[0] === id, `executor ${id}`);
  };
  const memStart = await memoryOf(rig.relay.child.pid ?? 0);
  const queryPath = `/v1/connections/${rig.connectionId}/query`;
  const viaApi = async (k: number) => {
    const { sql, id } = smallSql(k);
    const r = await postJson(rig.base, queryPath, rig.key, { sql });
    const rows = (r.json as { rows?: { id?: number }[] }).rows;
    check(r.status === 200 && rows?.[0]?.id === id, `api ${id}: ${r.status} ${JSON.stringify(r.json).slice(0, 200)}`);
  };
  const pgQueryPath = `/v1/connections/${rig.pgConnectionId}/query`;
  const viaApiPostgres = async (k: number) => {
    const { sql, id } = smallSql(k);
    const r = await postJson(rig.base, pgQueryPath, rig.key, { sql });
    const rows = (r.json as { rows?: { id?: number }[] }).rows;
    check(r.status === 200 && rows?.[0]?.id === id, `api-postgres ${id}: ${r.status} ${JSON.stringify(r.json).slice(0, 200)}`);
  };

  process.stderr.write(`relay bench: customer database ${rig.db.kind}, pool ${POOL} connections on both paths, ${ROUNDS} rounds of ${SECONDS} s per measurement\n`);
  // warm up every path (JIT, pools, TLS session)
  for (const f of [viaDirect, viaExecutor, viaTunnel, viaApi, viaApiPostgres]) await closedLoop(8, 0.7, f);

  type Path = 'direct' | 'executor' | 'tunnel' | 'api' | 'apiPostgres';
  const paths: Record<Path, (k: number) => Promise<void>> = { direct: viaDirect, executor: viaExecutor, tunnel: viaTunnel, api: viaApi, apiPostgres: viaApiPostgres };
  const runs = new Map<string, Run[]>(); // `${path}@${concurrency}`
  const relayCpu = new Map<number, { s: number; n: number }>(); // relay CPU over the tunnel runs
  const relayPid = rig.relay.child.pid ?? 0;
  for (const c of [1, 32]) {
    for (let round = 0; round < ROUNDS; round++) {
      // interleaved, so that drift on a shared machine hits every path alike
      for (const p of Object.keys(paths) as Path[]) {
        const cpu0 = p === 'tunnel' ? await cpuSecondsOf(relayPid) : 0;
        const r = await closedLoop(c, SECONDS, paths[p]);
        if (p === 'tunnel') {
          const acc = relayCpu.get(c) ?? { s: 0, n: 0 };
          relayCpu.set(c, { s: acc.s + (await cpuSecondsOf(relayPid)) - cpu0, n: acc.n + r.lat.length });
        }
        runs.set(`${p}@${c}`, [...(runs.get(`${p}@${c}`) ?? []), r]);
      }
    }
  }
  const small = (p: Path, c: number, base: Path = 'direct'): Summary => summarize(runs.get(`${p}@${c}`) ?? [], runs.get(`${base}@${c}`) ?? []);
  local.close();
  localRelay.close();
  await localExec.close();

  // large result: ~largeMb MB of values, 200 value bytes a row (an int and a 196-character text)
  const largeRows = Math.round((largeMb * 1024 * 1024) / 204);
  const largeSql = bigResultSql(largeRows);
  const memBefore = await memoryOf(relayPid);
  const sampler = rssSampler(relayPid, memBefore.rss);

  interface Read {
    readonly bytes: number;
    readonly rows: number;
    readonly s: number;
  }
  const largeDirect = async (): Promise<Read> => {
    const c = await direct.connect();
    const t0 = performance.now();
    let bytes = 0;
    let rows = 0;
    try {
      await c.query('BEGIN READ ONLY');
      await c.query(`DECLARE big NO SCROLL CURSOR FOR ${largeSql}`);
      for (;;) {
        const r = await c.query<unknown[]>({ text: `FETCH ${FETCH} FROM big`, rowMode: 'array' });
        for (const row of r.rows) bytes += rowBytes(row);
        rows += r.rows.length;
        if (r.rows.length < FETCH) break;
      }
      await c.query('ROLLBACK');
    } finally {
      c.release();
    }
    return { bytes, rows, s: (performance.now() - t0) / 1000 };
  };
  /** a result read over the tunnel, at most `mbPerSecond` MB/s when given (a slow consumer) */
  const readTunnel = async (sql: string, expectedRows: number, mbPerSecond?: number): Promise<Read> => {
    const t0 = performance.now();
    let bytes = 0;
    let rows = 0;
    for await (const ev of session().openStream(open(sql, expectedRows + 1, 4 * 1024 * 1024 * 1024))) {
      if (ev.type !== 'rows') continue;
      for (const row of ev.rows) bytes += rowBytes(row as readonly Value[]);
      rows += ev.rows.length;
      if (mbPerSecond === undefined) continue;
      const ahead = bytes / (mbPerSecond * 1024 * 1024) - (performance.now() - t0) / 1000;
      if (ahead > 0.005) await new Promise((r) => setTimeout(r, ahead * 1000));
    }
    return { bytes, rows, s: (performance.now() - t0) / 1000 };
  };
  const largeTunnel = (): Promise<Read> => readTunnel(largeSql, largeRows);
  const mbs = (x: Read) => x.bytes / 1024 / 1024 / x.s;
  const large: { direct: Read; tunnel: Read }[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // alternate which goes first
    const first = round % 2 === 0 ? await largeDirect() : await largeTunnel();
    const second = round % 2 === 0 ? await largeTunnel() : await largeDirect();
    const pair = round % 2 === 0 ? { direct: first, tunnel: second } : { direct: second, tunnel: first };
    check(pair.direct.rows === largeRows && pair.tunnel.rows === largeRows && pair.direct.bytes === pair.tunnel.bytes, `large: direct ${pair.direct.rows} rows ${pair.direct.bytes} B, tunnel ${pair.tunnel.rows} rows ${pair.tunnel.bytes} B`);
    large.push(pair);
  }
  const relayRssMax = await sampler.stop();
  const mem = await memoryOf(rig.relay.child.pid ?? 0);

  // a huge result to a slow consumer (read at most SLOW_MBS MB/s): the relay must hold the
  // database back rather than buffer, so its RSS stays flat whatever the size
  const hugeMb = HUGE_MB ?? (rig.db.kind === 'postgres' ? 1024 : 128);
  let huge: { rows: number; bytes: number; s: number; rssMax: number; rssStart: number } | null = null;
  if (hugeMb > 0) {
    const hugeRows = Math.round((hugeMb * 1024 * 1024) / 204);
    const rssStart = (await memoryOf(relayPid)).rss;
    const hugeSampler = rssSampler(relayPid, rssStart);
    const read = await readTunnel(bigResultSql(hugeRows), hugeRows, SLOW_MBS);
    const rssMax = await hugeSampler.stop();
    check(read.rows === hugeRows, `huge: ${read.rows} of ${hugeRows} rows`);
    huge = { ...read, rssMax, rssStart };
  }
  await direct.end();
  await tearDown(rig);
  if (errors > 0) throw new Error(`${errors} wrong answers: the numbers are void`);

  // ------------------------------------------------------------------ report
  const f1 = (n: number) => n.toFixed(1);
  const f2 = (n: number) => n.toFixed(2);
  const results: Result[] = [];
  for (const c of [1, 32]) {
    const d = small('direct', c);
    for (const p of ['executor', 'tunnel', 'api'] as const) {
      const r = small(p, c);
      const name = { executor: 'relay executor alone (in-process, no tunnel; breakdown)', tunnel: 'tunnel stream', api: 'HTTP API' }[p];
      const cpuAcc = relayCpu.get(c);
      const cpu = p === 'tunnel' && cpuAcc ? `; relay CPU ${f2((cpuAcc.s * 1000) / cpuAcc.n)} ms/query` : '';
      results.push({
        label: `small query, ${c} concurrent, ${name}`,
        value: `${Math.round(r.qps)} q/s (${f2(r.ratio)}× direct); p50 ${f2(r.p50)} ms, p99 ${f2(r.p99)} ms; added p50 ${f2(r.p50 - d.p50)} ms, p99 ${f2(r.p99 - d.p99)} ms${cpu}`,
        baseline: `direct pg ${Math.round(d.qps)} q/s; p50 ${f2(d.p50)} ms, p99 ${f2(d.p99)} ms`,
        ...(c === 32 && p === 'tunnel' ? { target: { text: '≥ 0.5× direct', pass: r.ratio >= 0.5 } } : {}),
      });
    }
    // the relay through the API against the `postgres` live target through the API: the same
    // control-plane path, so the difference is the tunnel's own price
    const viaPg = small('apiPostgres', c);
    const rel = small('api', c, 'apiPostgres');
    results.push({
      label: `small query, ${c} concurrent, HTTP API: postgres-relay against a postgres live target on the same database`,
      value: `${Math.round(rel.qps)} q/s, p50 ${f2(rel.p50)} ms: each query costs ${f2(1 / rel.ratio)}× the postgres target's`,
      baseline: `postgres live target ${Math.round(viaPg.qps)} q/s; p50 ${f2(viaPg.p50)} ms`,
      ...(c === 32 ? { target: { text: '≤ 1.25× the postgres target', pass: 1 / rel.ratio <= 1.25 } } : {}),
    });
  }
  const largeRatio = median(large.map((l) => mbs(l.tunnel) / mbs(l.direct)));
  const lt = large[0]?.tunnel ?? { bytes: 0, rows: 0, s: 1 };
  results.push({
    label: `large result (${f1(lt.bytes / 1024 / 1024)} MB of values, ${lt.rows} rows), tunnel stream`,
    value: `${f1(median(large.map((l) => mbs(l.tunnel))))} MB/s (${f2(largeRatio)}× direct)`,
    baseline: `direct pg cursor (FETCH ${FETCH}) ${f1(median(large.map((l) => mbs(l.direct))))} MB/s`,
    target: { text: '≥ 0.6× direct', pass: largeRatio >= 0.6 },
  });
  if (huge) {
    results.push({
      label: `relay RSS while ${f1(huge.bytes / 1024 / 1024)} MB of values (${huge.rows} rows) stream to a slow consumer (${f1(huge.bytes / 1024 / 1024 / huge.s)} MB/s)`,
      value: `at most ${f1(huge.rssMax)} MB`,
      baseline: `${f1(huge.rssStart)} MB before it`,
      target: { text: '< 150 MB', pass: huge.rssMax < 150 },
    });
  }
  const peak = Math.max(mem.hwm, relayRssMax);
  results.push({
    label: 'relay peak RSS (VmHWM of the svc-relay process, whole run)',
    value: `${f1(peak)} MB`,
    baseline: `RSS ${f1(memStart.rss)} MB once connected, ${f1(memBefore.rss)} MB after the small-query runs, ${f1(mem.rss)} MB after the large result`,
    target: { text: '< 150 MB', pass: peak < 150 },
  });

  const out = process.stdout;
  out.write(`\nRelay path against direct pg (customer database: ${rig.db.kind === 'postgres' ? 'PostgreSQL' : 'PGlite over the wire'}; ${POOL} database connections on both paths; ${ROUNDS} interleaved rounds of ${SECONDS} s per measurement, medians; control-plane store ${STORE}; ${os.cpus().length} CPUs)\n\n`);
  out.write('| measurement | result | baseline (same run) | target |\n| --- | --- | --- | --- |\n');
  for (const r of results) out.write(`| ${r.label} | ${r.value} | ${r.baseline} | ${r.target ? `${r.target.text}: ${r.target.pass ? 'PASS' : 'MISS'}` : '—'} |\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`relay bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
