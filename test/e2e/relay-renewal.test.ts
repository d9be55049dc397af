/**
 * Certificate renewal end to end: a real control plane and tunnel listener, the real relay (the
 * RelayAgent in this process, and the compiled svc-relay as a child process), real certificates
 * from the control plane's CA, a real customer database (PostgreSQL, or PGlite over the wire).
 *
 *  - rotation while 12 queries run continuously in parallel: none fails, the relay's tunnel now
 *    presents the new serial, the old certificates are revoked, the files on disk are replaced (0600);
 *  - renewal triggered by time (SVC_RELAY_CERT_VALIDITY=40s: at about 20 s) in the svc-relay process;
 *  - an expired certificate: svc-relay exits 1 pointing to re-enrollment, and with the agent's own
 *    check bypassed the control plane refuses it (401 certificate_expired: enroll again).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { createCsr, issueClientCertificate, serialOf } from '../../pki/index.js';
import { loadOrCreateStoredCa } from '../../control-plane/relays/ca.js';
import { loadMasterKey } from '../../control-plane/secrets/index.js';
import { createExecutor, loadConfig, RelayAgent, RelayCredentials, renderMetrics, writeFileAtomic, wsDialer } from '../../relay-agent/index.js';
import { openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import { buildDist, enrollRelay, fundedAgent, metrics, ordersDatabase, queryFn, relayView, rmDir, runRelay, spawnNode, relayBin, until, waitStatus } from '../relay-agent/harness.js';

const mode = (dir: string, f: string): number => statSync(path.join(dir, f)).mode & 0o777;

// one control plane for the tests with the default certificate validity
let shared: TestServer;
t.before(async () => {
  shared = await startServer();
  await shared.svc.startTunnel();
});
t.teardown(() => shared.close());

t.test('rotation while 12 queries run continuously: no query fails, the new certificate is in use, the old revoked', async (t) => {
  const db = await ordersDatabase('svc_relay_rot');
  const srv = shared;
  const a = await fundedAgent(srv.url);
  const enrolled = await enrollRelay(srv.url, a.key, 'rotating');
  const dir = enrolled.configDir;
  const cfg = loadConfig(dir);
  const originalKey = cfg.keyPem;
  const credentials = new RelayCredentials(cfg, { configDir: dir });
  const executor = createExecutor({ databaseUrl: db.url, poolSize: 6 });
  const logs: string[] = [];
  const agent = new RelayAgent({
    dial: wsDialer(() => credentials.current),
    handler: executor.handle,
    renewal: { certificate: credentials.validity, renew: (signal) => credentials.renew(signal) },
    log: (l) => logs.push(l),
  });
  const exited = agent.run();
  t.teardown(async () => {
    await agent.drain();
    await exited;
    await executor.close();
    await db.drop();
    await rmDir(path.dirname(dir));
  });
  const relayId = enrolled.relay_id;
  await waitStatus(srv.url, a.key, relayId, 'online');
  const serial0 = credentials.validity.serial;
  t.equal(srv.svc.services.tunnels.get(relayId)?.serial, serial0);

  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relayId}`, 'read:public.orders']);
  const q = queryFn(srv.url, a.key, conn);
  let stop = false;
  let ok = 0;
  const failures: string[] = [];
  const worker = async (w: number): Promise<void> => {
    for (let i = 0; !stop; i++) {
      // one worker reads whole 5000-row results, so streams are mid-flight when the tunnel switches
      const id = ((w * 997 + i * 31) % 5000) + 1;
      const sql = w === 0 ? 'SELECT id, amount FROM orders ORDER BY id' : `SELECT id, tenant_id FROM orders WHERE id = ${id}`;
      const r = await q(sql).catch((err: unknown): Awaited<ReturnType<typeof q>> => ({ status: 0, body: { error: { code: 'fetch', message: (err as Error).message } } }));
      const good = r.status === 200 && (w === 0 ? r.body.row_count === 5000 : r.body.rows?.[0]?.['id'] === id);
      if (good) ok++;
      else failures.push(`${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
    }
  };
  const workers = Array.from({ length: 12 }, (_, w) => worker(w));
  const progress = async (what: string, n: number): Promise<void> => {
    await until(what, async () => ok >= n || failures.length > 0);
  };
  let first, second;
  try {
    await progress('queries running', 24);
    first = await agent.renewNow();
    await progress('queries after the first rotation', ok + 24);
    second = await agent.renewNow();
    await progress('queries after the second rotation', ok + 24);
  } finally {
    stop = true;
    await Promise.all(workers);
  }

  t.same(failures, [], 'not one query failed during two rotations');
  t.ok(ok > 72, `${ok} queries answered`);
  t.not(first.serial, serial0);
  t.not(second.serial, first.serial);
  t.equal(agent.renewals, 2);
  t.equal(agent.state, 'connected');
  t.equal(srv.svc.services.tunnels.get(relayId)?.serial, second.serial, 'the tunnel now presents the newest certificate');
  t.ok(logs.some((l) => /switched to the tunnel with the renewed certificate/.test(l)));
  t.notOk(logs.some((l) => /tunnel lost/.test(l)), 'the drained tunnel was not taken for a lost one');

  const view = await until('old certificates revoked', async () => {
    const v = await relayView(srv.url, a.key, relayId);
    return v.certificates.filter((c) => c.state === 'revoked').length === 2 ? v : undefined;
  });
  t.same(
    view.certificates.map((c) => [c.serial, c.state]),
    [
      [serial0, 'revoked'],
      [first.serial, 'revoked'],
      [second.serial, 'active'],
    ],
    'GET /v1/relays/:id: the replaced certificates are revoked',
  );

  // the files on disk: the newest key and certificate, 0600, nothing left over
  const onDisk = loadConfig(dir);
  t.equal(serialOf(onDisk.certPem), second.serial);
  t.not(onDisk.keyPem, originalKey, 'a new key pair on disk');
  t.equal(onDisk.keyPem, credentials.current.keyPem);
  t.equal(onDisk.expires_at, second.notAfter.toISOString(), 'relay.json says when the new certificate expires');
  for (const f of ['key.pem', 'cert.pem', 'ca.pem', 'relay.json']) t.equal(mode(dir, f), 0o600, `${f} is 0600`);
  t.same(readdirSync(dir).sort(), ['ca.pem', 'cert.pem', 'key.pem', 'relay.json'], 'no temporary files left');
  t.match(renderMetrics(agent), /svc_relay_certificate_renewals_total 2\n/);
  t.match(renderMetrics(agent), /process_resident_memory_bytes \d+\n/);
});

t.test('svc-relay renews by itself at about half the lifetime (SVC_RELAY_CERT_VALIDITY=40s)', async (t) => {
  buildDist();
  const db = await ordersDatabase('svc_relay_time');
  const srv = await startServer({ env: { SVC_RELAY_CERT_VALIDITY: '40s' } });
  await srv.svc.startTunnel();
  const a = await signupAgent(srv.url);
  const enrolled = await enrollRelay(srv.url, a.key, 'short-lived');
  const enrolledAt = Date.now();
  const dir = enrolled.configDir;
  const serial0 = serialOf(readFileSync(path.join(dir, 'cert.pem'), 'utf8'));
  const lifetime = new Date(enrolled.expires_at).getTime() - enrolledAt;
  t.ok(lifetime > 30_000 && lifetime <= 40_000, `the certificate lives 40 s (${lifetime} ms left)`);

  const relay = await runRelay(dir, db.url);
  t.teardown(async () => {
    await relay.kill('SIGKILL');
    await srv.close();
    await db.drop();
    await rmDir(path.dirname(dir));
  });
  t.match((await relay.waitFor(/renews itself at about (\S+)/))[1], /^\d{4}-/);
  await waitStatus(srv.url, a.key, enrolled.relay_id, 'online');
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${enrolled.relay_id}`, 'read:public.orders']);
  const q = queryFn(srv.url, a.key, conn);
  t.equal((await q('SELECT count(*) AS n FROM orders')).status, 200);

  const m = await relay.waitFor(/certificate renewed: serial ([0-9a-f]+)/, 45_000);
  const renewedAfter = Date.now() - enrolledAt;
  const serial1 = m[1] as string;
  t.not(serial1, serial0);
  t.ok(renewedAfter >= 15_000, `renewed at about half the lifetime, not at once (${renewedAfter} ms after enrollment)`);
  await relay.waitFor(/switched to the tunnel with the renewed certificate/);
  await until('the tunnel presents the new serial', async () => srv.svc.services.tunnels.get(enrolled.relay_id)?.serial === serial1);
  const view = await until('the old certificate revoked', async () => {
    const v = await relayView(srv.url, a.key, enrolled.relay_id);
    return v.certificates.find((c) => c.serial === serial0)?.state === 'revoked' ? v : undefined;
  });
  t.equal(view.certificates.find((c) => c.serial === serial1)?.state, 'active');
  t.equal(view.status, 'online');
  t.equal(serialOf(readFileSync(path.join(dir, 'cert.pem'), 'utf8')), serial1, 'cert.pem on disk is the renewed one');
  t.equal(mode(dir, 'key.pem'), 0o600);
  const r = await q('SELECT count(*) AS n FROM orders');
  t.same(r.body.rows, [{ n: 5000 }], 'queries still answer after the switch');
  const mx = await metrics(relay.healthPort);
  t.ok((mx['svc_relay_certificate_renewals_total'] ?? 0) >= 1, 'the renewal is counted in /metrics');
  t.ok((mx['svc_relay_certificate_expiry_seconds'] ?? 0) > 20, 'the expiry gauge follows the new certificate');
  t.ok((mx['process_resident_memory_bytes'] ?? 0) > 0);
  relay.child.kill('SIGTERM');
  t.equal(await relay.exited, 0, 'SIGTERM drains and exits 0');
});

t.test('an expired certificate: svc-relay exits 1 pointing to re-enrollment; the control plane refuses it too', async (t) => {
  buildDist();
  const srv = shared;
  const a = await signupAgent(srv.url);
  const enrolled = await enrollRelay(srv.url, a.key, 'expired');
  const dir = enrolled.configDir;
  t.teardown(() => rmDir(path.dirname(dir)));
  // our own CA issues a certificate for the relay's own key that expired 3 minutes ago
  const ca = await loadOrCreateStoredCa(srv.svc.store, [await loadMasterKey(undefined, srv.config.dataDir)]);
  const keyPem = readFileSync(path.join(dir, 'key.pem'), 'utf8');
  const expired = issueClientCertificate(ca, createCsr(keyPem), { relayId: enrolled.relay_id, orgId: a.orgId, validityDays: 1 / 1440, now: new Date(Date.now() - 4 * 60_000) });
  writeFileAtomic(dir, 'cert.pem', expired.certPem);

  const p = spawnNode(relayBin, ['run', '--config-dir', dir, '--database-url', 'postgres://nobody@127.0.0.1:1/none']);
  t.equal(await p.exited, 1, 'exit status 1');
  t.match(p.output(), /RELAY_ERR_PERMANENT_REFUSAL: the relay certificate expired at .*re-enroll with `svc-relay enroll --force`/);

  // bypass the agent's own expiry check: the control plane refuses the certificate at the upgrade
  const logs: string[] = [];
  const agent = new RelayAgent({ dial: wsDialer(loadConfig(dir)), handler: async (q) => q.end(), log: (l) => logs.push(l) });
  const exit = await agent.run();
  t.equal(exit.reason, 'permanent');
  t.match(exit.message, /HTTP 401.*certificate_expired: enroll again/);
  t.equal(srv.svc.services.tunnels.online(enrolled.relay_id), false);
  t.equal((await relayView(srv.url, a.key, enrolled.relay_id)).status, 'offline');
});
