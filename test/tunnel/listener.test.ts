/**
 * The tunnel listener over real mutual TLS on port 0, with certificates our CA issued through the
 * relay API: a registered relay connects and is online, streams run over the tunnel, deleting the
 * relay closes its tunnel at once and refuses its reconnects, foreign and expired certificates
 * are refused with reasons a relay can act on.
 */
import t from 'tap';
import WebSocket from 'ws';
import { createCa, generateCaPem, generateKeyAndCsr, issueClientCertificate } from '../../pki/index.js';
import { Session } from '../../protocol/index.js';
import { loadOrCreateStoredCa } from '../../control-plane/relays/ca.js';
import { loadMasterKey, seal } from '../../control-plane/secrets/index.js';
import type { TunnelListener } from '../../control-plane/tunnel/index.js';
import { wsTransport } from '../../protocol/relay-contract.js';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
let tunnel: TunnelListener;
t.before(async () => {
  srv = await startServer();
  // the control plane's CA, made a month ago (so the test can also issue an already-expired certificate)
  const pem = generateCaPem({ keyBits: 2048, now: new Date(Date.now() - 30 * 86_400_000) });
  await srv.svc.store.query('INSERT INTO ca (id, cert_pem, key_sealed, created_at) VALUES (1, $1, $2, now())', [
    pem.certPem,
    seal(await loadMasterKey(undefined, srv.config.dataDir), pem.keyPem),
  ]);
  tunnel = await srv.svc.startTunnel();
});
t.teardown(() => srv.close());

const relayKey = generateKeyAndCsr();

async function registerRelay(key: string): Promise<{ relay_id: string; certificate_pem: string; ca_certificate_pem: string }> {
  const tok = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key, body: {} })).body.token;
  const r = await api<{ relay_id: string; certificate_pem: string; ca_certificate_pem: string }>(srv.url, 'POST', '/v1/relays/register', {
    body: { enroll_token: tok, csr_pem: relayKey.csrPem, name: 'db-1' },
  });
  if (r.status !== 201) throw new Error(r.text);
  return r.body;
}

type Dial = { ws: WebSocket; opened: Promise<void>; refused: Promise<{ status: number; reason: string } | { error: string }> };

function dial(certPem: string, keyPem: string, caPem: string): Dial {
  const ws = new WebSocket(`wss://127.0.0.1:${tunnel.port}/`, { key: keyPem, cert: certPem, ca: caPem, minVersion: 'TLSv1.3' });
  const opened = new Promise<void>((resolve) => ws.once('open', () => resolve()));
  const refused = new Promise<{ status: number; reason: string } | { error: string }>((resolve) => {
    ws.once('unexpected-response', (_req, res) => resolve({ status: res.statusCode ?? 0, reason: String(res.headers['x-svc-reason'] ?? '') }));
    ws.once('error', (err) => resolve({ error: err.message }));
  });
  return { ws, opened, refused };
}

t.test('a registered relay connects over mutual TLS, is online, and carries streams', async (t) => {
  const a = await signupAgent(srv.url);
  const reg = await registerRelay(a.key);
  const d = dial(reg.certificate_pem, relayKey.keyPem, reg.ca_certificate_pem);
  await d.opened;
  const relay = new Session(wsTransport(d.ws), { role: 'client', agent: 'svc-relay/test' });
  relay.onStream(async (q) => {
    await q.sendColumns([{ name: 'echo', type: 'text' }]);
    await q.sendRows([[q.open.statement]]);
    await q.end();
  });
  await relay.ready;
  // the server side is registered once its HELLO exchange completes
  while (!tunnel.registry.online(reg.relay_id)) await new Promise((r) => setTimeout(r, 10));
  const listed = await api<{ relays: { relay_id: string; status: string; version: string | null; last_seen_at: string | null }[] }>(srv.url, 'GET', '/v1/relays', { key: a.key });
  t.equal(listed.body.relays[0]?.status, 'online');

  const live = tunnel.registry.get(reg.relay_id);
  t.equal(live?.orgId, a.orgId, 'the certificate decides which relay and organization it is');
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) => (live as NonNullable<typeof live>).session.openStream({ statement: `SELECT ${i}` }).collect()),
  );
  t.same(results.map((r) => r.rows[0]?.[0]), Array.from({ length: 20 }, (_, i) => `SELECT ${i}`), '20 multiplexed streams over one tunnel');
  const row = (await srv.svc.store.query<{ version: string }>('SELECT version FROM relays WHERE id = $1', [reg.relay_id]))[0];
  t.equal(row?.version, 'svc-relay/test', 'the version the relay announced is recorded');

  // deleting the relay closes its live tunnel at once, with a reason that says not to come back
  const closed = new Promise<{ code: number; reason: string }>((resolve) => d.ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  t.equal((await api(srv.url, 'DELETE', `/v1/relays/${reg.relay_id}`, { key: a.key })).status, 200);
  t.match(await closed, { reason: 'relay_revoked' });
  t.equal(tunnel.registry.online(reg.relay_id), false);
  const again = dial(reg.certificate_pem, relayKey.keyPem, reg.ca_certificate_pem);
  t.same(await again.refused, { status: 403, reason: 'relay_revoked' }, 'and its reconnects are refused');
});

t.test('certificates we did not issue, or that expired, are refused with a reason', async (t) => {
  const a = await signupAgent(srv.url);
  const reg = await registerRelay(a.key);

  const other = createCa({ keyBits: 2048 });
  const foreign = issueClientCertificate(other, relayKey.csrPem, { relayId: reg.relay_id, orgId: a.orgId });
  const f = dial(foreign.certPem, relayKey.keyPem, reg.ca_certificate_pem);
  t.match(await f.refused, { status: 403, reason: 'PKI_ERR_WRONG_ISSUER' }, 'another CA, same identity');

  const ours = await loadOrCreateStoredCa(srv.svc.store, [await loadMasterKey(undefined, srv.config.dataDir)]);
  const expired = issueClientCertificate(ours, relayKey.csrPem, { relayId: reg.relay_id, orgId: a.orgId, validityDays: 1, now: new Date(Date.now() - 3 * 86_400_000) });
  const e = dial(expired.certPem, relayKey.keyPem, reg.ca_certificate_pem);
  t.match(await e.refused, { status: 401, reason: /certificate_expired: enroll again/ });

  const unknown = issueClientCertificate(ours, relayKey.csrPem, { relayId: reg.relay_id, orgId: a.orgId });
  const u = dial(unknown.certPem, relayKey.keyPem, reg.ca_certificate_pem);
  t.match(await u.refused, { status: 403, reason: 'certificate_unknown' }, 'ours, but not recorded: never issued through the API');

  const none = new WebSocket(`wss://127.0.0.1:${tunnel.port}/`, { ca: reg.ca_certificate_pem });
  const noneResult = await new Promise<unknown>((resolve) => {
    none.once('unexpected-response', (_req, res) => resolve({ status: res.statusCode, reason: res.headers['x-svc-reason'] }));
    none.once('error', (err) => resolve({ error: err.message }));
  });
  t.same(noneResult, { status: 401, reason: 'client_certificate_required' });
});
