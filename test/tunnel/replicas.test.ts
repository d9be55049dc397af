/**
 * Relay tunnels across replicas of one PostgreSQL store (issue #14): the replica holding a tunnel
 * records it under a lease in the store, so every replica gives the same status and a
 * `last_seen_at` that moves while the relay stays connected; deleting the relay through another
 * replica closes the tunnel within a heartbeat; a replica that dies stops renewing and the relay
 * shows offline once its lease lapses. Real replicas (two control planes in this process on one
 * PostgreSQL database), a real svc-relay agent over mutual TLS, a real customer database.
 */
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { HEARTBEAT_MS, LEASE_MS } from '../../control-plane/tunnel/leases.js';
import https from 'node:https';
import pg from 'pg';
import { generateKeyAndCsr, issueClientCertificate, issueReplicaCertificate } from '../../pki/index.js';
import { loadOrCreateStoredCa } from '../../control-plane/relays/ca.js';
import { loadMasterKeyRing } from '../../control-plane/secrets/index.js';
import { FORWARD_PATH } from '../../control-plane/tunnel/forward.js';
import { customerDatabase } from '../helpers/customer-db.js';
import { startRelay } from '../helpers/relay.js';
import { api, freshDatabase, openConnection, realPostgresAvailable, signupAgent, startServer } from '../helpers/server.js';
import { eventually } from '../helpers/tap.js';

interface QueryBody {
  rows?: Record<string, unknown>[];
  row_count?: number;
  truncated?: boolean;
  error?: { code: string; message: string };
}

interface Relay {
  relay_id: string;
  status: string;
  last_seen_at: string | null;
  version: string | null;
}

if (!(await realPostgresAvailable())) {
  t.skip('relay tunnels across replicas: no PostgreSQL answers at TEST_DATABASE_URL for the shared store', () => undefined);
} else {
  t.test('one status on every replica, a moving last_seen_at, deletion and death seen everywhere', async (t) => {
    const db = await freshDatabase('svc_test_tunnels');
    const customer = await customerDatabase('svc_test_tunnels_customer');
    const env = { SVC_MASTER_KEY: randomBytes(32).toString('hex') };
    const seed = new pg.Client({ connectionString: customer.url });
    await seed.connect();
    await seed.query("CREATE TABLE orders (id int PRIMARY KEY, region text NOT NULL); INSERT INTO orders VALUES (1, 'eu'), (2, 'us'), (3, 'eu'); INSERT INTO orders SELECT g, 'eu' FROM generate_series(4, 400) g; CREATE TABLE secrets (v text)");
    await seed.end();
    const a = await startServer({ databaseUrl: db.url, demoWorkers: 1, env, limits: { queryTimeoutMs: 2000, maxRows: 100 } });
    const b = await startServer({ databaseUrl: db.url, demoWorkers: 1, env, limits: { queryTimeoutMs: 2000, maxRows: 100 } });
    let aClosed = false;
    t.teardown(async () => {
      if (!aClosed) await a.close();
      await b.close();
      await db.drop();
      await customer.drop();
    });
    const agent = await signupAgent(a.url, 'Replicas Org');
    const relay = await startRelay(a, agent.key, customer.url); // its tunnel is on a
    t.teardown(() => relay.close());
    const statusOn = async (url: string): Promise<Relay | undefined> =>
      (await api<{ relays: Relay[] }>(url, 'GET', '/v1/relays', { key: agent.key })).body.relays.find((r) => r.relay_id === relay.relayId);

    const onA = await statusOn(a.url);
    const onB = await statusOn(b.url);
    t.equal(onA?.status, 'online');
    t.equal(onB?.status, 'online', 'the replica without the tunnel says online too');
    t.equal(onB?.version, onA?.version, 'and the same version');
    t.ok(onA?.version, 'the relay version is known');
    const firstSeen = Date.parse(onB?.last_seen_at ?? '');
    await new Promise((r) => setTimeout(r, HEARTBEAT_MS * 2.5));
    const later = await statusOn(b.url);
    t.ok(Date.parse(later?.last_seen_at ?? '') > firstSeen, `last_seen_at moves while connected: ${onB?.last_seen_at} -> ${later?.last_seen_at}`);

    // a replica without the tunnel cannot serve it yet: the lease names the holder
    const [lease] = await a.svc.store.query<{ tunnel_replica: string; tunnel_address: string }>('SELECT tunnel_replica, tunnel_address FROM relays WHERE id = $1', [relay.relayId]);
    t.match(lease?.tunnel_replica, /^rep_/, 'the holder is recorded');
    t.match(lease?.tunnel_address, /^127\.0\.0\.1:\d+$/, 'with the address other replicas dial');

    t.ok(a.svc.services.tunnels.online(relay.relayId) && !b.svc.services.tunnels.online(relay.relayId), 'a holds the tunnel, b does not');

    // any replica answers a relay query: b forwards to a over mutual TLS with its replica certificate
    const conn = await openConnection(b.url, agent.key, 'postgres-relay', [`relay:${relay.relayId}`, 'read:public.orders', 'filter:public.orders.region=eu']);
    const ask = async (url: string, sql: string) => api<QueryBody>(url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql } });
    for (const url of [a.url, b.url]) {
      const r = await ask(url, 'SELECT id, region FROM orders WHERE id < 4 ORDER BY id');
      t.equal(r.status, 200, `answered through ${url === a.url ? 'the holder' : 'the other replica'}`);
      t.same(r.body.rows, [{ id: 1, region: 'eu' }, { id: 3, region: 'eu' }], 'only in-scope rows, whichever replica answers');
    }
    const capped = await ask(b.url, 'SELECT id FROM orders');
    t.equal(capped.status, 200);
    t.equal(capped.body.row_count, 100, 'the row cap holds through a forward');
    t.equal(capped.body.truncated, true);
    const bad = await ask(b.url, 'SELECT no_such_column FROM orders');
    t.equal(bad.status, 400, 'an error of the relay’s database comes back as the API error it is');
    t.equal(bad.body.error?.code, 'invalid_sql');
    const forwards = await Promise.all(Array.from({ length: 12 }, (_, i) => ask(b.url, `SELECT count(*)::int AS n FROM orders WHERE id > ${i % 3}`)));
    t.ok(forwards.every((r) => r.status === 200), `twelve forwarded at once all answered: ${forwards.map((r) => r.status).join(' ')}`);
    if (customer.kind === 'postgres') {
      const slow = await ask(b.url, 'SELECT count(*) FROM orders a, orders b, orders c, orders d');
      t.equal(slow.body.error?.code, 'query_timeout', 'the deadline holds through a forward (cancelled at the relay’s database)');
      // revoked through the holder while b's forward runs: b stops asking, the holder cancels the statement
      const other = await openConnection(b.url, agent.key, 'postgres-relay', [`relay:${relay.relayId}`, 'read:public.orders']);
      const started = Date.now();
      const running = api<QueryBody>(b.url, 'POST', `/v1/connections/${other}/query`, { key: agent.key, body: { sql: 'SELECT count(*) FROM orders a, orders b, orders c, orders d' } });
      await new Promise((r) => setTimeout(r, 300));
      t.equal((await api(a.url, 'POST', `/v1/connections/${other}/revoke`, { key: agent.key })).status, 200);
      const stopped = await running;
      t.equal(stopped.status, 410, 'the forwarded statement ends with the revocation');
      t.ok(Date.now() - started < 1900, `before its deadline: ${Date.now() - started} ms`);
    } else t.comment('the deadline through a forward needs a real PostgreSQL behind the relay (PGlite cannot cancel a statement)');

    // the internal endpoint takes a replica certificate only: a relay's certificate from the same CA is refused
    const ring = await loadMasterKeyRing(env.SVC_MASTER_KEY, [], a.svc.services.config.dataDir);
    const ca = await loadOrCreateStoredCa(a.svc.store, ring.all);
    const port = (await a.svc.startTunnel()).port;
    const relayKey = generateKeyAndCsr();
    const relayCert = issueClientCertificate(ca, relayKey.csrPem, { relayId: relay.relayId, orgId: agent.orgId });
    const replicaCert = issueReplicaCertificate(ca, { replicaId: 'rep_test' });
    const post = (cert: { certPem: string; keyPem: string } | undefined, body: string) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = https.request(
          { host: '127.0.0.1', port, path: FORWARD_PATH, method: 'POST', ca: ca.certPem, ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}), headers: { 'content-type': 'application/json' } },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const forward = (connectionId: string, sql: string, limits = { timeoutMs: 5000, maxRows: 10, maxBytes: 100000 }) => JSON.stringify({ relay_id: relay.relayId, connection_id: connectionId, sql, limits });
    const query = forward(conn, 'SELECT * FROM public.secrets');
    t.equal((await post({ certPem: relayCert.certPem, keyPem: relayKey.keyPem }, query)).status, 403, "a relay's certificate cannot send statements to another relay's tunnel");
    t.equal((await post(undefined, query)).status, 403, 'no certificate: refused');
    t.equal((await post(replicaCert, '{"relay_id": 1}')).status, 400, 'a malformed forward is refused');
    t.equal((await post(replicaCert, 'x'.repeat(1100 * 1024)).catch(() => ({ status: 0, text: '' }))).status, 413, 'an oversized body is refused, not read');
    // a replica certificate is trusted to have checked the statement, not to pick the connection or the limits
    const stranger = await signupAgent(b.url, 'Stranger Org');
    const strangerConn = await openConnection(b.url, stranger.key, 'demo-healthcare', ['read:patients']);
    const foreign = await post(replicaCert, forward(strangerConn, 'SELECT 1 AS x'));
    // (a forward's answer is 200 with the heartbeat's headers at once; its outcome is in the JSON, after the beats' spaces)
    t.equal(foreign.status, 200);
    t.equal((JSON.parse(foreign.text) as { error?: { code?: string } }).error?.code, 'connection_revoked', "a connection that does not read through this relay is refused (nothing runs): " + foreign.text.trim().slice(0, 80));
    const wide = await post(replicaCert, forward(conn, 'SELECT id FROM public.orders', { timeoutMs: 3_600_000, maxRows: 100_000_000, maxBytes: 4 * 1024 ** 3 }));
    t.equal(wide.status, 200);
    t.equal((JSON.parse(wide.text) as { rows: unknown[] }).rows.length, 100, "the holder's own row cap (100) holds whatever the forward asks");

    // deletion through the replica without the tunnel cuts the tunnel held by the other
    const deletedAt = Date.now();
    t.equal((await api(b.url, 'DELETE', `/v1/relays/${relay.relayId}`, { key: agent.key })).status, 200);
    t.ok(await eventually(async () => !a.svc.services.tunnels.online(relay.relayId), HEARTBEAT_MS * 3), 'the holding replica closed the tunnel of a relay deleted elsewhere');
    const cutAfter = Date.now() - deletedAt;
    t.ok(cutAfter <= 1000, `within a second (a heartbeat is ${HEARTBEAT_MS} ms): ${cutAfter} ms`);
    t.equal((await statusOn(a.url))?.status, 'revoked');
    t.equal((await statusOn(b.url))?.status, 'revoked');

    // the holder shuts down: its lease is given up, every other replica says offline at once
    const second = await startRelay(a, agent.key, customer.url, { name: 'second' });
    t.teardown(() => second.close());
    const secondOn = async (url: string): Promise<string | undefined> =>
      (await api<{ relays: Relay[] }>(url, 'GET', '/v1/relays', { key: agent.key })).body.relays.find((r) => r.relay_id === second.relayId)?.status;
    t.equal(await secondOn(b.url), 'online');
    await a.close();
    aClosed = true;
    t.equal(await secondOn(b.url), 'offline', 'offline on the other replica as soon as the holder closed');
    t.ok(LEASE_MS > HEARTBEAT_MS * 2, 'a lease outlives two missed beats');
  });

  t.test('a replica listening on every interface without SVC_REPLICA_ADDRESS says so at start', async (t) => {
    // review: it told the other replicas 127.0.0.1, so on other machines every forward came back to the sender (503), silently
    const db = await freshDatabase('svc_test_replica_address');
    t.teardown(() => db.drop());
    const masterKey = randomBytes(32).toString('hex'); // one for the three starts (the CA is sealed with it)
    const warned = async (env: Record<string, string>): Promise<boolean> => {
      const logs = new PassThrough();
      const lines: string[] = [];
      logs.on('data', (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
      const srv = await startServer({ databaseUrl: db.url, env: { LOG_LEVEL: 'warn', SVC_MASTER_KEY: masterKey, ...env }, logStream: logs });
      try {
        await srv.svc.startTunnel();
      } finally {
        await srv.close();
      }
      return lines.some((l) => /SVC_REPLICA_ADDRESS is not set/.test(l));
    };
    t.equal(await warned({ HOST: '0.0.0.0' }), true, 'HOST=0.0.0.0 and no SVC_REPLICA_ADDRESS: a warning');
    t.equal(await warned({ HOST: '0.0.0.0', SVC_REPLICA_ADDRESS: '10.0.0.7:8443' }), false, 'with SVC_REPLICA_ADDRESS: none');
    t.equal(await warned({}), false, 'on loopback only (one machine): none');
  });
}
