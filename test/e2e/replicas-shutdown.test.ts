/**
 * A graceful stop (SIGTERM) of the replica holding a relay's tunnel drains the relay queries other
 * replicas forwarded to it, as it drains its own requests (issue #14; docs/deployment.md, "When a
 * replica dies"): a statement forwarded from replica A to the holder B and running at the
 * customer's database when B is told to stop finishes and answers its rows through A, instead of
 * being cut at once with `503 relay_unavailable` (as a SIGKILL would). Two compiled control planes
 * on one PostgreSQL store, the relay dialing B's tunnel port, a real `svc-relay` and a customer
 * database. Skipped with a reason where no PostgreSQL answers.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import t from 'tap';
import { demoImage, freshDatabase, openConnection, realPostgresAvailable, tempDir, CACHE } from '../helpers/server.js';
import { buildDist, controlPlaneBin, enrollRelay, freePort, fundedAgent, ordersDatabase, queryFn, rmDir, runRelay, spawnNode, until, withOutputs, type Proc } from '../relay-agent/harness.js';

/** about 3 s on a 2-core machine: long enough to be running when the holder is stopped, short of every deadline */
const SLOW = 'SELECT count(*) AS n FROM orders a, orders b WHERE a.amount + b.amount > 0';

if (!(await realPostgresAvailable())) {
  t.skip('a replica stopping while it serves forwarded relay queries: no PostgreSQL answers at TEST_DATABASE_URL for the shared store', () => undefined);
} else {
  t.test('SIGTERM on the tunnel holder lets the statements forwarded to it finish', async (t) => {
    buildDist();
    await demoImage();
    const store = await freshDatabase('svc_test_replica_stop');
    const customer = await ordersDatabase('svc_test_replica_stop_customer');
    const masterKey = randomBytes(32).toString('hex');
    const dirs: string[] = [];
    const procs: Proc[] = [];
    let relay: Proc | undefined;
    t.teardown(async () => {
      await relay?.kill('SIGTERM');
      await Promise.all(procs.map((p) => p.kill('SIGKILL')));
      await store.drop();
      await customer.drop();
      for (const d of dirs) await rmDir(d);
    });
    const ports = { a: await freePort(), aTunnel: await freePort(), b: await freePort(), bTunnel: await freePort() };
    // every relay dials B: A holds no tunnel and forwards
    const tunnelUrl = `wss://127.0.0.1:${ports.bTunnel}`;
    const start = async (port: number, tunnelPort: number): Promise<{ proc: Proc; url: string }> => {
      const dataDir = await tempDir();
      dirs.push(dataDir);
      await fs.cp(path.join(CACHE, 'demo'), path.join(dataDir, 'demo'), { recursive: true });
      const proc = spawnNode(controlPlaneBin, [], {
        DATABASE_URL: store.url,
        SVC_MASTER_KEY: masterKey,
        SVC_DATA_DIR: dataDir,
        PORT: String(port),
        SVC_TUNNEL_PORT: String(tunnelPort),
        SVC_TUNNEL_PUBLIC_URL: tunnelUrl,
        SVC_REPLICA_ADDRESS: `127.0.0.1:${tunnelPort}`,
        SVC_DEMO_WORKERS: '1',
        SVC_QUERY_TIMEOUT_MS: '60000',
        SVC_SHUTDOWN_DRAIN_MS: '60000',
        LOG_LEVEL: 'warn',
      });
      procs.push(proc);
      const url = `http://127.0.0.1:${port}`;
      await until(`the replica on ${port} answers`, async () => (await fetch(`${url}/healthz`).catch(() => undefined))?.status === 200, 60_000);
      return { proc, url };
    };
    const a = await start(ports.a, ports.aTunnel); // migrates the store first
    const b = await start(ports.b, ports.bTunnel);

    const agent = await fundedAgent(a.url);
    const enrolled = await enrollRelay(a.url, agent.key, 'stopping');
    relay = await runRelay(enrolled.configDir, customer.url);
    const storeDb = new pg.Client({ connectionString: store.url });
    await storeDb.connect();
    t.teardown(() => storeDb.end());
    // 60 s, as the replicas' start: a loaded CI machine once took more than 20 s (its output now says why, should it again)
    const held = until('B holds the relay tunnel', async () => {
      const r = await storeDb.query<{ live: boolean }>('SELECT tunnel_address = $2 AND tunnel_until > now() AS live FROM relays WHERE id = $1', [enrolled.relay_id, `127.0.0.1:${ports.bTunnel}`]);
      return r.rows[0]?.live === true;
    }, 60_000);
    await withOutputs(held, { 'svc-relay': relay, 'replica B': b.proc, 'replica A': a.proc });
    const conn = await openConnection(a.url, agent.key, 'postgres-relay', [`relay:${enrolled.relay_id}`, 'read:public.orders']);
    const ask = queryFn(a.url, agent.key, conn);
    t.equal((await ask('SELECT count(*) AS n FROM orders')).status, 200, 'A answers through B');

    const customerDb = new pg.Client({ connectionString: customer.url });
    await customerDb.connect();
    t.teardown(() => customerDb.end());
    const running = async (): Promise<boolean> =>
      (await customerDb.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE '%a.amount + b.amount%' AND pid <> pg_backend_pid()")).rows.length > 0;

    const slow = ask(SLOW);
    await until('the forwarded statement runs at the customer database', running, 20_000);
    b.proc.child.kill('SIGTERM');
    const answer = await slow;
    t.equal(answer.status, 200, `the statement forwarded to the stopping holder finished: ${answer.status} ${answer.body.error?.code ?? ''} ${answer.body.error?.message ?? ''}`);
    t.same(answer.body.rows, [{ n: '25000000' }], 'with its rows');
    t.equal(await b.proc.exited, 0, 'then the holder exits cleanly');
  });
}
