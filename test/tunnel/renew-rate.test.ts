/**
 * A relay is customer-controlled, and every certificate our CA issues is signed in this process
 * (milliseconds of the event loop each) and kept in the store. A hostile relay renewing in a loop
 * through POST /v1/relay/renew (each time with the certificate it just got and a new key) would
 * take the control plane's time and grow its certificate list without end. A relay renews at about half its certificate's lifetime,
 * so a few certificates per lifetime are all a real one ever needs: past
 * MAX_RENEWALS_PER_LIFETIME within one lifetime its renewals are refused `429 rate_limited`
 * with Retry-After (the relay's renewer retries those), nothing is issued, and its current
 * certificate stays current. Real mutual TLS on port 0, certificates from the API.
 */
import t from 'tap';
import { generateKeyAndCsr } from '../../pki/index.js';
import { MAX_RENEWALS_PER_LIFETIME } from '../../control-plane/relays/index.js';
import { RenewError, requestRenewal } from '../../relay-agent/index.js';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
let tunnelUrl: string;
t.before(async () => {
  srv = await startServer();
  tunnelUrl = `wss://127.0.0.1:${(await srv.svc.startTunnel()).port}`;
});
t.teardown(() => srv.close());

t.test('renewals past a few per certificate lifetime are refused 429 and issue nothing', async (t) => {
  const a = await signupAgent(srv.url);
  const k = generateKeyAndCsr();
  const tok = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: {} })).body.token;
  const reg = await api<{ relay_id: string; certificate_pem: string; ca_certificate_pem: string }>(srv.url, 'POST', '/v1/relays/register', {
    body: { enroll_token: tok, csr_pem: k.csrPem, name: 'db' },
  });
  t.equal(reg.status, 201);
  let current = { tunnel_url: tunnelUrl, certPem: reg.body.certificate_pem, keyPem: k.keyPem, caCertPem: reg.body.ca_certificate_pem };

  for (let i = 0; i < MAX_RENEWALS_PER_LIFETIME; i++) {
    const r = await requestRenewal(current, { retry: { retries: 0 } });
    current = { ...current, certPem: r.certPem, keyPem: r.keyPem };
  }
  const certificates = async (): Promise<string[]> =>
    (await api<{ certificates: { state: string }[] }>(srv.url, 'GET', `/v1/relays/${reg.body.relay_id}`, { key: a.key })).body.certificates.map((c) => c.state);
  const before = await certificates();
  t.equal(before.length, MAX_RENEWALS_PER_LIFETIME + 1, 'the registration\'s certificate and the renewals allowed');

  const refused = await requestRenewal(current, { retry: { retries: 0 } }).catch((e: unknown) => e);
  t.ok(refused instanceof RenewError, 'the next renewal is refused');
  t.match(refused, { status: 429, message: /renewed its certificate \d+ times within one certificate lifetime/ });
  t.same(await certificates(), before, 'nothing issued, and the certificate in use is still the current one');

  // the refusal is a retryable one a relay can wait out: Retry-After, in the API's error shape
  const raw = await rawRenewal(current);
  t.equal(raw.status, 429);
  t.ok(Number(raw.retryAfter) >= 1, `Retry-After: ${raw.retryAfter}`);
  t.match(JSON.parse(raw.body), { error: { code: 'rate_limited' } });
});

async function rawRenewal(c: { certPem: string; keyPem: string; caCertPem: string }): Promise<{ status: number; retryAfter: string | undefined; body: string }> {
  const https = await import('node:https');
  const body = JSON.stringify({ csr_pem: generateKeyAndCsr().csrPem });
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${tunnelUrl.replace('wss:', 'https:')}/v1/relay/renew`,
      { method: 'POST', key: c.keyPem, cert: c.certPem, ca: c.caCertPem, agent: false, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
