/**
 * Webhook receivers over HTTPS, end to end: real TLS receivers on 127.0.0.1 (port 0) with
 * certificates issued here by a CA of our own (pki/), events sent by the real delivery worker
 * through the SSRF guard (control-plane/net/ssrf.ts guardedRequest).
 *
 * The product has no setting of its own for a private CA: an operator adds it to Node's trust
 * store with NODE_EXTRA_CA_CERTS, which Node reads at process start. So the trusted cases run
 * against one compiled control plane in a child process started with it (and
 * SVC_WEBHOOK_ALLOW_PRIVATE=1, the receivers being on loopback). The SSRF case runs in-process,
 * without that flag.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { createCa, issueServerCertificate, tlsServerOptions, type Ca } from '../../pki/index.js';
import { loadMasterKey, seal } from '../../control-plane/secrets/index.js';
import { childEnv, dataDirWithDemo, exitOf, startControlPlane, type ControlPlaneProcess } from '../helpers/control-plane-process.js';
import { api, signupAgent, startServer, type Agent } from '../helpers/server.js';
import type { TapTest } from '../helpers/tap.js';
import { forgeLeaf, rsaKeyPem } from '../pki/fixtures/forge-helpers.js';
import { Receiver } from './receiver.js';

interface Attempt {
  readonly attempt: number;
  readonly kind: string;
  readonly at: string;
  readonly duration_ms: number;
  readonly url: string | null;
  readonly status_code: number | null;
  readonly error_class: string | null;
  readonly error: string | null;
}
interface Delivery {
  readonly delivery_id: string;
  readonly event: string;
  readonly status: string;
  readonly next_attempt_at: string | null;
  readonly attempt_count: number;
  readonly attempts: readonly Attempt[];
}

/** the CA the child control plane trusts (NODE_EXTRA_CA_CERTS) */
const trusted = createCa({ keyBits: 2048, commonName: 'receiver test CA' });
/** a CA nobody trusts */
const unknown = createCa({ keyBits: 2048, commonName: 'unknown receiver CA' });

/**
 * An HTTPS receiver with a certificate `ca` issues for `names`, set up from the pki/ server
 * options (our CA's TLS floor) minus the client certificate the relay tunnel demands: a webhook
 * sender presents none. With `chain`, the issuing CA's certificate is sent after the leaf.
 */
async function tlsReceiver(t: TapTest, ca: Ca, names: { dnsNames?: string[]; ipAddresses?: string[] }, chain = false): Promise<Receiver> {
  const leaf = issueServerCertificate(ca, { ...names, keyBits: 2048 });
  const base = tlsServerOptions({ keyPem: leaf.keyPem, certPem: leaf.certPem, caCertPem: ca.certPem });
  const rx = await Receiver.start({ key: base.key, cert: chain ? leaf.certPem + ca.certPem : base.cert, minVersion: base.minVersion, requestCert: false, rejectUnauthorized: false });
  t.teardown(() => rx.close());
  return rx;
}

/** a server certificate for localhost signed with its own key (its issuer is its subject), and that key */
function selfSignedLocalhost(): { key: string; cert: string } {
  const key = rsaKeyPem(2048);
  const subject = [{ name: 'commonName', value: 'localhost' }];
  const extensions = [
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    { name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }] },
  ];
  const named = forgeLeaf({ issuerKeyPem: key, issuerCertPem: trusted.certPem, subjectKeyPem: key, subject, extensions });
  return { key, cert: forgeLeaf({ issuerKeyPem: key, issuerCertPem: named, subjectKeyPem: key, subject, extensions }) };
}

/** `rx` as the organization's receiver at `url` (default: its own, by the name localhost); the receiver learns the secret */
async function useReceiver(t: TapTest, base: string, agent: Agent, rx: Receiver, url = `https://localhost:${rx.port}/hook`): Promise<void> {
  const r = await api<{ secret: string; standard_webhooks_secret: string }>(base, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url } });
  t.equal(r.status, 200, r.status === 200 ? `receiver ${url} configured` : r.text);
  rx.secret = r.body.secret;
  rx.whsec = r.body.standard_webhooks_secret;
}

async function trigger(base: string, agent: Agent, scenario = 'claim.adjudicated'): Promise<string> {
  const r = await api<{ delivery_id: string }>(base, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body: { scenario_id: scenario } });
  if (r.status !== 202) throw new Error(`trigger: ${r.status} ${r.text}`);
  return r.body.delivery_id;
}

/** the delivery once `ready` holds for it (polled through the API) */
async function deliveryWhen(base: string, agent: Agent, id: string, ready: (d: Delivery) => boolean, ms = 15_000): Promise<Delivery> {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await api<Delivery>(base, 'GET', `/v1/webhooks/deliveries/${id}`, { key: agent.key });
    if (r.status !== 200) throw new Error(`delivery: ${r.status} ${r.text}`);
    if (ready(r.body)) return r.body;
    if (Date.now() > deadline) throw new Error(`delivery ${id}: condition not met within ${ms} ms: ${r.text}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const attempted = (n: number) => (d: Delivery) => d.attempt_count >= n;

let cp: ControlPlaneProcess;
t.before(async () => {
  const dataDir = await dataDirWithDemo(t);
  const caFile = path.join(dataDir, 'receiver-ca.pem');
  await fs.writeFile(caFile, trusted.certPem);
  // the documented retry policy (30 s, 2 min, 10 min, 30 min): a failed first attempt stays scheduled
  cp = await startControlPlane({ ...childEnv(dataDir), SVC_WEBHOOK_ALLOW_PRIVATE: '1', NODE_EXTRA_CA_CERTS: caFile });
});
t.teardown(async () => {
  if (cp && cp.child.exitCode === null && cp.child.signalCode === null) {
    cp.child.kill('SIGTERM');
    await exitOf(cp.child);
  }
});

t.test('a receiver whose certificate chains to a CA trusted through NODE_EXTRA_CA_CERTS is delivered to, signed, with SNI = the URL host', async (t) => {
  const agent = await signupAgent(cp.url, 'TLS Trusted Co');
  const rx = await tlsReceiver(t, trusted, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  await useReceiver(t, cp.url, agent, rx);

  const id = await trigger(cp.url, agent);
  await rx.until(() => rx.of(id).length === 1);
  const got = rx.of(id)[0]!;
  t.ok(got.serviceOk, 'X-Service-Signature verifies as docs/webhooks.md tells receivers to');
  t.ok(got.standardOk, 'webhook-signature verifies (Standard Webhooks, whsec_ form of the secret)');
  t.match(got.body, { id, event: 'claim.adjudicated', data: { resource: { resourceType: 'ClaimResponse' } } });
  t.equal(got.servername, 'localhost', "SNI is the URL's host name, not the address connected to");
  t.same(rx.handshakes, ['localhost'], 'one handshake, with SNI localhost');

  const d = await deliveryWhen(cp.url, agent, id, (x) => x.status !== 'pending');
  t.equal(d.status, 'delivered');
  t.match(d.attempts, [{ attempt: 1, kind: 'initial', url: `https://localhost:${rx.port}/hook`, status_code: 200, error_class: null, error: null }]);
  const list = await api<{ deliveries: Delivery[] }>(cp.url, 'GET', '/v1/webhooks/deliveries?status=delivered', { key: agent.key });
  t.equal(list.status, 200);
  t.match(
    list.body.deliveries.find((x) => x.delivery_id === id),
    { status: 'delivered', attempt_count: 1, attempts: [{ status_code: 200, error_class: null }] },
    'the listing shows it delivered',
  );

  // an IP-literal URL: no SNI is sent (RFC 6066 names hosts only), the certificate is checked against its IP address
  await useReceiver(t, cp.url, agent, rx, `https://127.0.0.1:${rx.port}/hook`);
  const byIp = await trigger(cp.url, agent, 'adt.admission');
  await rx.until(() => rx.of(byIp).length === 1);
  t.equal(rx.of(byIp)[0]!.servername, false, 'no SNI for an IP address');
  t.ok(rx.of(byIp)[0]!.serviceOk && rx.of(byIp)[0]!.standardOk, 'signed');
  t.equal((await deliveryWhen(cp.url, agent, byIp, (x) => x.status !== 'pending')).status, 'delivered');
});

t.test('a receiver with a certificate from an unknown CA, or self-signed, is not delivered to: a tls failure, retried on schedule; fixing the URL and replaying delivers', async (t) => {
  const agent = await signupAgent(cp.url, 'TLS Unknown CA Co');
  // the leaf alone (the usual "unable to verify the first certificate"), then leaf + its self-signed root, then a self-signed certificate
  const leafOnly = await tlsReceiver(t, unknown, { dnsNames: ['localhost'] });
  const withRoot = await tlsReceiver(t, unknown, { dnsNames: ['localhost'] }, true);
  await useReceiver(t, cp.url, agent, leafOnly);

  const id = await trigger(cp.url, agent);
  const first = await deliveryWhen(cp.url, agent, id, attempted(1));
  t.equal(first.status, 'pending', 'not delivered, not given up');
  const a1 = first.attempts[0]!;
  t.match(a1, { attempt: 1, kind: 'initial', status_code: null, error_class: 'tls', error: /UNABLE_TO_VERIFY_LEAF_SIGNATURE/ });
  // the first retry is due 30 s (±10 % jitter) after the attempt was recorded
  const next = Date.parse(first.next_attempt_at ?? '');
  const ended = Date.parse(a1.at) + a1.duration_ms;
  t.ok(next >= ended + 27_000 && next <= ended + 33_000 + 5_000, `the next attempt is scheduled per the retry policy (${first.next_attempt_at}, attempt at ${a1.at})`);
  t.equal(leafOnly.received.length, 0, 'no request reached the receiver');
  t.ok(leafOnly.connections >= 1, 'the TLS connection was really tried');

  // the URL is read again at each attempt: a replay goes to the second untrusted receiver
  await useReceiver(t, cp.url, agent, withRoot);
  t.equal((await api(cp.url, 'POST', `/v1/webhooks/deliveries/${id}/replay`, { key: agent.key })).status, 202);
  const second = await deliveryWhen(cp.url, agent, id, attempted(2));
  t.match(second.attempts[1], { attempt: 2, kind: 'replay', status_code: null, error_class: 'tls', error: /SELF_SIGNED_CERT_IN_CHAIN/ });
  t.equal(second.status, 'pending');
  t.equal(withRoot.received.length, 0, 'no request reached it either');

  // a self-signed server certificate for localhost
  const selfSigned = await Receiver.start(selfSignedLocalhost());
  t.teardown(() => selfSigned.close());
  await useReceiver(t, cp.url, agent, selfSigned);
  t.equal((await api(cp.url, 'POST', `/v1/webhooks/deliveries/${id}/replay`, { key: agent.key })).status, 202);
  const third = await deliveryWhen(cp.url, agent, id, attempted(3));
  t.match(third.attempts[2], { attempt: 3, kind: 'replay', status_code: null, error_class: 'tls', error: /DEPTH_ZERO_SELF_SIGNED_CERT/ });
  t.equal(selfSigned.received.length, 0, 'nor this one');

  // nothing else broken: with a trusted receiver configured, the same delivery arrives on replay
  const good = await tlsReceiver(t, trusted, { dnsNames: ['localhost'] });
  await useReceiver(t, cp.url, agent, good);
  t.equal((await api(cp.url, 'POST', `/v1/webhooks/deliveries/${id}/replay`, { key: agent.key })).status, 202);
  await good.until(() => good.of(id).length === 1);
  t.ok(good.of(id)[0]!.serviceOk && good.of(id)[0]!.standardOk, 'the same delivery id arrives signed');
  const done = await deliveryWhen(cp.url, agent, id, (x) => x.status !== 'pending');
  t.equal(done.status, 'delivered');
  t.match(done.attempts[3], { attempt: 4, kind: 'replay', status_code: 200, error_class: null });
  t.equal(cp.child.exitCode, null, 'the control plane is still running');
});

t.test('a certificate from the trusted CA for another host name is refused as a tls failure, though it names the address connected to', async (t) => {
  const agent = await signupAgent(cp.url, 'TLS Wrong Name Co');
  // right CA; it names 127.0.0.1, the address the guard resolves localhost to and connects to, but not localhost
  const rx = await tlsReceiver(t, trusted, { dnsNames: ['other.example'], ipAddresses: ['127.0.0.1'] });
  await useReceiver(t, cp.url, agent, rx);
  const id = await trigger(cp.url, agent);
  const d = await deliveryWhen(cp.url, agent, id, attempted(1));
  t.equal(d.status, 'pending');
  t.match(d.attempts[0], { attempt: 1, status_code: null, error_class: 'tls', error: /ERR_TLS_CERT_ALTNAME_INVALID.*Host: localhost\b/ });
  t.equal(rx.received.length, 0, 'no request reached the receiver');
  t.ok(rx.connections >= 1, 'the TLS connection was really tried');
});

t.test('https does not get past the SSRF guard: forbidden addresses are refused before any connection', async (t) => {
  // with SVC_WEBHOOK_ALLOW_PRIVATE=1 (the child): link-local and metadata receivers stay refused
  const agent = await signupAgent(cp.url, 'TLS SSRF Co');
  for (const url of ['https://169.254.169.254/latest/meta-data/', 'https://[fe80::1]/hook', 'https://100.100.100.200/hook']) {
    const r = await api<{ error: { details: { reason: string } } }>(cp.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url } });
    t.equal(r.status, 400, url);
    t.equal(r.body.error.details.reason, 'NET_ERR_FORBIDDEN_ADDRESS', url);
  }

  // without it (in-process, the default): an https receiver on loopback
  const srv = await startServer({ env: { SVC_WEBHOOK_TIMEOUT_MS: '2000' } });
  t.teardown(() => srv.close());
  t.equal(srv.config.webhookAllowPrivate, false);
  const other = await signupAgent(srv.url, 'TLS SSRF Default Co');
  const rx = await tlsReceiver(t, trusted, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  const url = `https://localhost:${rx.port}/hook`;
  for (const refused of [url, rx.url]) {
    const r = await api<{ error: { details: { reason: string } } }>(srv.url, 'POST', '/v1/agent/webhook', { key: other.key, body: { url: refused } });
    t.equal(r.status, 400, refused);
    t.equal(r.body.error.details.reason, 'NET_ERR_FORBIDDEN_ADDRESS', refused);
  }
  // stored while it resolved elsewhere (written straight into the store): refused at connect, at every attempt
  const key = await loadMasterKey(srv.config.masterKey, srv.config.dataDir);
  await srv.svc.store.query(`INSERT INTO webhook_endpoints (org_id, connection_id, url, secret_sealed, created_at, updated_at) VALUES ($1, '', $2, $3, now(), now())`, [
    other.orgId,
    url,
    seal(key, `svcsec_${'t'.repeat(43)}`),
  ]);
  const id = await trigger(srv.url, other);
  const d = await deliveryWhen(srv.url, other, id, attempted(1));
  t.match(d.attempts[0], { attempt: 1, url, status_code: null, error_class: 'forbidden_address' });
  t.equal(rx.connections, 0, 'not even a TCP connection reached the receiver, so no TLS handshake');
  t.same(rx.handshakes, []);
});
