/**
 * Operators' certificates for one relay (POST /v1/relays/{id}/renew and /rotate-cert, agent key)
 * are limited to MAX_OPERATOR_REISSUES_PER_DAY in 24 hours: each is signed by the control plane
 * and kept, and the API's per-key rate alone let one key add a hundred a second to a relay's list
 * (helper-93's walk). Past the limit: `429 rate_limited` with Retry-After, nothing issued. Sent at
 * once, the renewals are counted one after another (the relay's row is locked first): no more
 * than the limit get through. Another relay of the organization is not affected.
 */
import t from 'tap';
import { generateKeyAndCsr } from '../../pki/index.js';
import { MAX_OPERATOR_REISSUES_PER_DAY } from '../../control-plane/relays/index.js';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

type Err = { error: { code: string; message: string; details?: Record<string, unknown> } };

const key = generateKeyAndCsr();

async function relayOf(agentKey: string): Promise<string> {
  const tok = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key: agentKey, body: {} })).body.token;
  const r = await api<{ relay_id: string }>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok, csr_pem: key.csrPem } });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.relay_id;
}

t.test('renewals past the day\'s limit are refused 429 and issue nothing; sent at once, no more than the limit get through', async (t) => {
  const a = await signupAgent(srv.url);
  const relayId = await relayOf(a.key);
  const renew = (id = relayId) => api<Err>(srv.url, 'POST', `/v1/relays/${id}/renew`, { key: a.key, body: { csr_pem: key.csrPem } });
  const certificates = async (): Promise<number> => (await api<{ certificates: unknown[] }>(srv.url, 'GET', `/v1/relays/${relayId}`, { key: a.key })).body.certificates.length;

  for (let i = 0; i < MAX_OPERATOR_REISSUES_PER_DAY - 2; i++) t.equal((await renew()).status, 200, `renewal ${i + 1}`);
  // the last two places, asked for five times at once
  const together = await Promise.all(Array.from({ length: 5 }, () => renew()));
  t.same(
    together.map((r) => r.status).sort(),
    [200, 200, 429, 429, 429],
    'two of five sent at once get the last two places',
  );
  const issued = await certificates();
  t.equal(issued, MAX_OPERATOR_REISSUES_PER_DAY + 1, "the registration's certificate and the renewals allowed");

  const refused = await renew();
  t.equal(refused.status, 429, refused.text);
  t.equal(refused.body.error.code, 'rate_limited');
  t.match(refused.body.error.message, /renewed or rotated \d+ times through the API in the last 24 hours/);
  t.ok(Number(refused.headers.get('retry-after')) > 0, `Retry-After: ${refused.headers.get('retry-after')}`);
  const rotate = await api<Err>(srv.url, 'POST', `/v1/relays/${relayId}/rotate-cert`, { key: a.key, body: { csr_pem: generateKeyAndCsr().csrPem } });
  t.equal(rotate.status, 429, 'rotate-cert counts too');
  t.equal(await certificates(), issued, 'nothing issued past the limit');

  const other = await relayOf(a.key);
  t.equal((await renew(other)).status, 200, "another relay of the organization has its own day's limit");
});
