/**
 * Webhook deliveries per second to a local receiver: the real outbox (embedded store), worker,
 * signing and SSRF-guarded HTTP, against a baseline measured in the same run: the same number
 * of signed POSTs sent straight to the receiver at the same concurrency (no store).
 *
 *   npx tsc -p tsconfig.json && node dist/bench/webhooks.js        (BENCH_DELIVERIES, default 2000)
 */
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { guardedRequest } from '../control-plane/net/index.js';
import { loadMasterKey, seal } from '../control-plane/secrets/index.js';
import { openStore } from '../control-plane/store/index.js';
import { DeliveryWorker, enqueue, scenario, scenarioResource, signedHeaders } from '../control-plane/webhooks/index.js';

const N = Number(process.env['BENCH_DELIVERIES'] ?? 2000);
const CONCURRENCY = 16;

async function main(): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-webhooks-'));
  let received = 0;
  let onAll: (() => void) | undefined;
  let target = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.end('ok');
      if (++received === target) onAll?.();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  const store = await openStore({ databaseUrl: undefined, dataDir: dir });
  const key = await loadMasterKey(undefined, dir);
  const secret = `svcsec_${'b'.repeat(43)}`;
  try {
    const now = new Date().toISOString();
    await store.query(`INSERT INTO orgs (id, name, created_at, trial_expires_at) VALUES ('org_bench', 'bench', $1, $1)`, [now]);
    await store.query(`INSERT INTO webhook_endpoints (org_id, connection_id, url, secret_sealed, created_at, updated_at) VALUES ('org_bench', '', $1, $2, $3, $3)`, [url, seal(key, secret), now]);
    const sc = scenario('claim.adjudicated');
    if (!sc) throw new Error('no scenario');
    const sample = JSON.stringify({ data: { resource: scenarioResource(sc) } });

    // baseline: signed POSTs straight to the receiver, same concurrency
    received = 0;
    target = N;
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < N) {
          const i = next++;
          await guardedRequest(url, { method: 'POST', body: sample, headers: signedHeaders(secret, `dlv_${i}`, 'claim.adjudicated', sample), allowPrivate: true, maxResponseBytes: 512 });
        }
      }),
    );
    const directMs = performance.now() - t0;

    // the outbox: enqueue N in batches of 100 per transaction, then let the worker drain them
    for (let i = 0; i < N; i += 100) {
      await store.tx(async (sql) => {
        for (let j = i; j < Math.min(N, i + 100); j++) await enqueue(sql, { orgId: 'org_bench', connectionId: null, event: sc.event, environment: 'sandbox', resource: scenarioResource(sc) });
      });
    }
    received = 0;
    target = N;
    const all = new Promise<void>((r) => (onAll = r));
    const worker = new DeliveryWorker({ store, keys: async () => [key], retryDelaysMs: [1000], timeoutMs: 10_000, allowPrivate: true, concurrency: CONCURRENCY, perOrgConcurrency: CONCURRENCY, pollMs: 50 });
    const t1 = performance.now();
    worker.start();
    await all;
    // the last attempts are recorded just after the receiver answers
    for (;;) {
      const [row] = await store.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'delivered'`);
      if ((row?.n ?? 0) >= N) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    const outboxMs = performance.now() - t1;
    await worker.stop();

    const rate = (ms: number): string => ((N / ms) * 1000).toFixed(0);
    process.stdout.write(
      `webhooks (${N} deliveries, concurrency ${CONCURRENCY}, store ${store.kind})\n` +
        `  direct signed POSTs (baseline)   ${rate(directMs).padStart(7)} /s\n` +
        `  outbox + worker + attempt log    ${rate(outboxMs).padStart(7)} /s   ratio ${(directMs / outboxMs).toFixed(2)} of baseline\n`,
    );
  } finally {
    await store.close();
    server.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
