/**
 * POST /v1/relay/renew on the tunnel port, over real mutual TLS with certificates from the real
 * API: a relay renews with its current certificate and a CSR for a new key; hostile callers
 * (no certificate, another CA's, a revoked or expired one, a key used before) are refused with
 * the same reasons as the tunnel upgrade. And the registry drains a replaced tunnel instead of
 * cutting it: its running stream finishes.
 */
import https from 'node:https';
import t from 'tap';
import WebSocket from 'ws';
import { createCa, createCsr, generateKeyAndCsr, issueClientCertificate } from '../../pki/index.js';
import { Session, type IncomingQuery } from '../../protocol/index.js';
import { loadOrCreateStoredCa } from '../../control-plane/relays/ca.js';
import { loadMasterKey } from '../../control-plane/secrets/index.js';
import type { TunnelListener } from '../../control-plane/tunnel/index.js';
import { wsTransport } from '../../protocol/relay-contract.js';
import { RenewError, requestRenewal } from '../../relay-agent/index.js';
import { metricSample } from '../helpers/metrics.js';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
let tunnel: TunnelListener;
let tunnelUrl: string;
t.before(async () => {
  srv = await startServer();
  tunnel = await srv.svc.startTunnel();
  tunnelUrl = `wss://127.0.0.1:${tunnel.port}`;
});
t.teardown(() => srv.close());

interface Reg {
  relay_id: string;
  certificate_pem: string;
  ca_certificate_pem: string;
  keyPem: string;
  csrPem: string;
}

async function registerRelay(key: string): Promise<Reg> {
  const k = generateKeyAndCsr();
  const tok = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key, body: {} })).body.token;
  const r = await api<Omit<Reg, 'keyPem' | 'csrPem'>>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok, csr_pem: k.csrPem, name: 'db' } });
  if (r.status !== 201) throw new Error(r.text);
  return { ...r.body, ...k };
}

const material = (r: { certificate_pem: string; keyPem: string; ca_certificate_pem: string }) => ({
  tunnel_url: tunnelUrl,
  certPem: r.certificate_pem,
  keyPem: r.keyPem,
  caCertPem: r.ca_certificate_pem,
});

async function refusal(p: Promise<unknown>): Promise<{ status: number | undefined; reason: string | undefined; message: string }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof RenewError) return { status: err.status, reason: err.reason, message: err.message };
    throw err;
  }
  throw new Error('the renewal was not refused');
}

async function connect(r: { certificate_pem: string; keyPem: string; ca_certificate_pem: string }, handler: (q: IncomingQuery) => Promise<void>): Promise<{ session: Session; ws: WebSocket }> {
  const ws = new WebSocket(tunnelUrl, { key: r.keyPem, cert: r.certificate_pem, ca: r.ca_certificate_pem, minVersion: 'TLSv1.3' });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const session = new Session(wsTransport(ws), { role: 'client', agent: 'svc-relay/test' });
  session.onStream(handler);
  await session.ready;
  return { session, ws };
}

t.test('a relay renews with its current certificate and a new key; the old one is superseded', async (t) => {
  const a = await signupAgent(srv.url);
  const reg = await registerRelay(a.key);
  const renewed = await requestRenewal(material(reg));
  t.not(renewed.keyPem, reg.keyPem, 'a new key pair, made here');
  t.not(renewed.certPem, reg.certificate_pem);
  t.equal(renewed.caCertPem, reg.ca_certificate_pem);
  const view = await api<{ certificates: { serial: string; state: string }[]; events: { kind: string }[] }>(srv.url, 'GET', `/v1/relays/${reg.relay_id}`, { key: a.key });
  t.same(
    view.body.certificates.map((c) => c.state),
    ['superseded', 'active'],
    'the previous certificate stays valid for the overlap window',
  );
  t.equal(view.body.certificates[1]?.serial, renewed.serial);
  t.ok(view.body.events.some((e) => e.kind === 'certificate.rotated'));

  // the new certificate opens a tunnel; once it is in use the previous one is revoked
  const live = await connect({ ...reg, certificate_pem: renewed.certPem, keyPem: renewed.keyPem }, async (q) => q.end());
  t.teardown(() => live.session.close());
  while (!tunnel.registry.online(reg.relay_id)) await new Promise((r) => setTimeout(r, 10));
  t.equal(tunnel.registry.get(reg.relay_id)?.serial, renewed.serial);
  let states: string[] = [];
  for (let i = 0; i < 100; i++) {
    const v = await api<{ certificates: { state: string }[] }>(srv.url, 'GET', `/v1/relays/${reg.relay_id}`, { key: a.key });
    states = v.body.certificates.map((c) => c.state);
    if (states[0] === 'revoked') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  t.same(states, ['revoked', 'active']);

  const revoked = await refusal(requestRenewal(material(reg)));
  t.match(revoked, { status: 403, reason: 'certificate_revoked' }, 'the revoked certificate cannot renew');

  // a CSR for a key this relay used before is refused (a rotation needs a new key)
  const reused = await refusal(requestRenewal(material({ ...reg, certificate_pem: renewed.certPem, keyPem: renewed.keyPem }), { csr: { keyPem: reg.keyPem, csrPem: reg.csrPem } }));
  t.match(reused, { status: 400, reason: 'invalid_request', message: /new key pair/ });
  // walk-through: the relay's own renewal was told to "use renew to keep the key" (the operators' rotate-cert message)
  t.notMatch(reused.message, /rotate-cert|use renew/, "the relay's renewal is not pointed at the operators' endpoints");
  const current = await refusal(requestRenewal(material({ ...reg, certificate_pem: renewed.certPem, keyPem: renewed.keyPem }), { csr: { keyPem: renewed.keyPem, csrPem: createCsr(renewed.keyPem) } }));
  t.match(current, { status: 400, reason: 'invalid_request' }, 'nor the key in use now');
});

t.test('a superseded certificate (inside its overlap window) cannot renew, though it still opens a tunnel', async (t) => {
  const a = await signupAgent(srv.url);
  const reg = await registerRelay(a.key);
  const states = async (): Promise<string[]> =>
    (await api<{ certificates: { state: string }[] }>(srv.url, 'GET', `/v1/relays/${reg.relay_id}`, { key: a.key })).body.certificates.map((c) => c.state);
  // the legitimate relay renews; the old certificate (say, stolen earlier) is superseded, not revoked
  const renewed = await requestRenewal(material(reg));
  t.same(await states(), ['superseded', 'active']);

  const stolen = await refusal(requestRenewal(material(reg)));
  t.match(stolen, { status: 403, reason: 'certificate_superseded', message: /only the relay's current certificate can renew/ }, 'the replaced certificate is refused with a clear reason');
  t.same(await states(), ['superseded', 'active'], 'no certificate was issued for the replaced one');

  // the overlap window is for switching tunnels: the replaced certificate still connects
  const old = await connect(reg, async (q) => q.end());
  t.equal(old.session.state, 'open', 'the superseded certificate opens a tunnel during the overlap');
  old.session.close();
  await old.session.closed;
  t.same(await states(), ['superseded', 'active'], "the replaced certificate's tunnel does not disturb the current one");

  // the current certificate still renews
  const again = await requestRenewal(material({ ...reg, certificate_pem: renewed.certPem, keyPem: renewed.keyPem }));
  t.not(again.serial, renewed.serial);
});

/** svc_relay_certificates_issued_total{event} on this server's GET /metrics */
const issuedMetric = (event: string): Promise<number> => metricSample(srv.url, 'svc_relay_certificates_issued_total', `{event="${event}"}`);

t.test('two renewals racing with one certificate: exactly one gets a new certificate', async (t) => {
  const a = await signupAgent(srv.url);
  const registeredBefore = await issuedMetric('relay.registered');
  const reg = await registerRelay(a.key);
  t.equal(await issuedMetric('relay.registered'), registeredBefore + 1, 'GET /metrics counts the enrollment');
  const rotatedBefore = await issuedMetric('certificate.rotated');
  const results = await Promise.allSettled([requestRenewal(material(reg)), requestRenewal(material(reg)), requestRenewal(material(reg))]);
  const won = results.filter((r) => r.status === 'fulfilled');
  t.equal(won.length, 1, 'one winner');
  for (const r of results) {
    if (r.status === 'rejected') t.match(r.reason, { status: 403, reason: 'certificate_superseded' }, 'the others are refused as superseded');
  }
  const view = await api<{ certificates: { state: string }[] }>(srv.url, 'GET', `/v1/relays/${reg.relay_id}`, { key: a.key });
  t.same(
    view.body.certificates.map((c) => c.state),
    ['superseded', 'active'],
    'one new certificate, not three',
  );
  t.equal(await issuedMetric('certificate.rotated'), rotatedBefore + 1, 'GET /metrics counts the one renewal issued, not the refused ones');
});

t.test('hostile renewals are refused with the upgrade reasons', async (t) => {
  const a = await signupAgent(srv.url);
  const reg = await registerRelay(a.key);

  const other = createCa({ keyBits: 2048 });
  const foreign = issueClientCertificate(other, reg.csrPem, { relayId: reg.relay_id, orgId: a.orgId });
  t.match(await refusal(requestRenewal(material({ ...reg, certificate_pem: foreign.certPem }))), { status: 403, reason: 'PKI_ERR_WRONG_ISSUER' }, "another CA's certificate, same identity");

  // ours, expired: issued 4 minutes ago for 1 minute
  const ours = await loadOrCreateStoredCa(srv.svc.store, [await loadMasterKey(undefined, srv.config.dataDir)]);
  const expired = issueClientCertificate(ours, reg.csrPem, { relayId: reg.relay_id, orgId: a.orgId, validityDays: 1 / 1440, now: new Date(Date.now() - 4 * 60_000) });
  const e = await refusal(requestRenewal(material({ ...reg, certificate_pem: expired.certPem })));
  t.match(e, { status: 401, reason: 'certificate_expired: enroll again', message: /enroll again/ }, 'an expired certificate cannot renew itself');

  const unknown = issueClientCertificate(ours, reg.csrPem, { relayId: reg.relay_id, orgId: a.orgId });
  t.match(await refusal(requestRenewal(material({ ...reg, certificate_pem: unknown.certPem }))), { status: 403, reason: 'certificate_unknown' }, 'ours but never issued through the API');

  // no client certificate at all
  const none = await new Promise<{ status: number; body: string; reason: unknown }>((resolve, reject) => {
    const req = https.request(`https://127.0.0.1:${tunnel.port}/v1/relay/renew`, { method: 'POST', ca: reg.ca_certificate_pem, headers: { 'content-type': 'application/json' } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, reason: res.headers['x-svc-reason'] }));
    });
    req.on('error', reject);
    req.end(JSON.stringify({ csr_pem: generateKeyAndCsr().csrPem }));
  });
  t.equal(none.status, 401);
  t.equal(none.reason, 'client_certificate_required');
  t.match(JSON.parse(none.body), { error: { code: 'unauthorized', reason: 'client_certificate_required' } });

  // a deleted relay: its certificate renews nothing
  t.equal((await api(srv.url, 'DELETE', `/v1/relays/${reg.relay_id}`, { key: a.key })).status, 200);
  t.match(await refusal(requestRenewal(material(reg))), { status: 403, reason: 'relay_revoked' });
});

t.test('bad requests on the renewal path', async (t) => {
  const a = await signupAgent(srv.url);
  const reg = await registerRelay(a.key);
  const call = (method: string, path: string, body?: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = https.request(`https://127.0.0.1:${tunnel.port}${path}`, { method, key: reg.keyPem, cert: reg.certificate_pem, ca: reg.ca_certificate_pem, headers: { 'content-type': 'application/json' } }, (res) => {
        let b = '';
        res.on('data', (c: Buffer) => (b += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: b }));
      });
      req.on('error', reject);
      req.end(body);
    });
  t.equal((await call('GET', '/v1/relay/renew')).status, 405);
  t.equal((await call('POST', '/elsewhere', '{}')).status, 426, 'anything else on the tunnel port asks for WebSocket');
  const notJson = await call('POST', '/v1/relay/renew', 'csr please');
  t.equal(notJson.status, 400);
  t.match(JSON.parse(notJson.body), { error: { code: 'invalid_request' } });
  t.equal((await call('POST', '/v1/relay/renew', JSON.stringify({ csr_pem: 'x'.repeat(70_000) }))).status, 413);
  const garbage = await call('POST', '/v1/relay/renew', JSON.stringify({ csr_pem: '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n' }));
  t.equal(garbage.status, 400);
  t.match(JSON.parse(garbage.body), { error: { code: 'invalid_request', message: /csr_pem/ } });
});

t.test('a replaced tunnel drains: its running stream finishes, new streams go to the new tunnel', async (t) => {
  const a = await signupAgent(srv.url);
  const reg = await registerRelay(a.key);
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const first = await connect(reg, async (q) => {
    await q.sendColumns([{ name: 'n' }]);
    await q.sendRows([[1]]);
    await held; // a long result still streaming
    await q.sendRows([[2]]);
    await q.end();
  });
  while (!tunnel.registry.online(reg.relay_id)) await new Promise((r) => setTimeout(r, 10));
  const running = tunnel.registry.get(reg.relay_id)!.session.openStream({ statement: 'long' }).collect();
  const goaway = new Promise<void>((r) => first.session.onGoaway(() => r()));

  // the same relay connects again (as after a renewal)
  const second = await connect(reg, async (q) => {
    await q.sendColumns([{ name: 'via' }]);
    await q.sendRows([['second']]);
    await q.end();
  });
  t.teardown(() => second.session.close());
  await goaway;
  t.pass('the replaced tunnel got GOAWAY');
  t.equal(tunnel.registry.get(reg.relay_id)?.session.state, 'open');
  t.not(tunnel.registry.get(reg.relay_id)?.session, undefined);
  t.equal(tunnel.registry.drainingOf(reg.relay_id).length, 1, 'the previous tunnel is draining, not cut');
  const fresh = await tunnel.registry.get(reg.relay_id)!.session.openStream({ statement: 'x' }).collect();
  t.same(fresh.rows, [['second']], 'new streams go to the new tunnel');
  t.equal(first.session.state, 'open', 'still open while its stream runs');
  release();
  const done = await running;
  t.same(done.rows, [[1], [2]], 'the running stream finished on the drained tunnel');
  const info = await first.session.closed;
  t.match(info, { code: 1000, reason: 'drained' });
  t.equal(tunnel.registry.drainingOf(reg.relay_id).length, 0);
  t.equal(tunnel.registry.online(reg.relay_id), true, 'the relay stays online throughout');
});
