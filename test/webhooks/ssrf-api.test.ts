/**
 * SSRF through the API with SVC_WEBHOOK_ALLOW_PRIVATE off (the default): private receivers are
 * refused at configuration, and a private address met at delivery time (the check on the
 * resolved IP at connect) fails the attempt without a byte reaching it. With it on, loopback and
 * private receivers are allowed, and link-local, cloud metadata and reserved ones still refused.
 */
import t from 'tap';
import { seal, loadMasterKey } from '../../control-plane/secrets/index.js';
import { api, signupAgent, startServer } from '../helpers/server.js';
import { Receiver } from './receiver.js';

interface Delivery {
  readonly status: string;
  readonly attempts: readonly { readonly error_class: string; readonly status_code: number | null }[];
}

/** the delivery once it has failed (or as it is after 10 s) */
async function untilFailed(url: string, key: string, id: string): Promise<Delivery | undefined> {
  let d: Delivery | undefined;
  for (let i = 0; i < 200; i++) {
    d = (await api<Delivery>(url, 'GET', `/v1/webhooks/deliveries/${id}`, { key })).body;
    if (d.status === 'failed') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return d;
}

t.test('private, loopback, link-local and metadata receivers are refused', async (t) => {
  const srv = await startServer({ env: { SVC_WEBHOOK_RETRY_DELAYS: '50ms,50ms,50ms,50ms', SVC_WEBHOOK_TIMEOUT_MS: '1000' } });
  t.teardown(() => srv.close());
  t.equal(srv.config.webhookAllowPrivate, false);
  const agent = await signupAgent(srv.url, 'SSRF Co');
  const refused = ['http://127.0.0.1:9/hook', 'http://10.1.2.3/hook', 'http://169.254.169.254/latest/meta-data/', 'http://[::1]:9/hook', 'http://localhost:9/hook', 'http://[::ffff:127.0.0.1]/', 'http://0.0.0.0/', 'http://100.64.1.1/', 'http://[fd00::1]/', 'http://2130706433/'];
  for (const url of refused) {
    const r = await api<{ error: { code: string; details: { field: string; reason: string } } }>(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url } });
    t.equal(r.status, 400, url);
    t.match(r.body.error, { code: 'invalid_request', details: { field: 'url', reason: 'NET_ERR_FORBIDDEN_ADDRESS' } }, url);
  }

  // a receiver stored while it was public (here: written straight into the store) that now
  // resolves to loopback: every attempt is refused at connect, nothing reaches the receiver
  const rx = await Receiver.start();
  t.teardown(() => rx.close());
  const key = await loadMasterKey(srv.config.masterKey, srv.config.dataDir);
  const url = rx.url.replace('127.0.0.1', 'localhost');
  await srv.svc.store.query(`INSERT INTO webhook_endpoints (org_id, connection_id, url, secret_sealed, created_at, updated_at) VALUES ($1, '', $2, $3, now(), now())`, [
    agent.orgId,
    url,
    seal(key, `svcsec_${'s'.repeat(43)}`),
  ]);
  const q = await api<{ delivery_id: string }>(srv.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body: {} });
  t.equal(q.status, 202);
  const d = await untilFailed(srv.url, agent.key, q.body.delivery_id);
  t.equal(d?.status, 'failed');
  t.equal(d?.attempts.length, 5);
  t.ok(d?.attempts.every((a) => a.error_class === 'forbidden_address' && a.status_code === null), 'every attempt refused at connect');
  t.equal(rx.received.length, 0, 'the loopback receiver never saw a request');
});

t.test('with SVC_WEBHOOK_ALLOW_PRIVATE=1, loopback and private receivers are allowed; link-local, metadata and reserved ones still are not', async (t) => {
  const srv = await startServer({ env: { SVC_WEBHOOK_ALLOW_PRIVATE: '1', SVC_WEBHOOK_RETRY_DELAYS: '50ms,50ms,50ms,50ms', SVC_WEBHOOK_TIMEOUT_MS: '1000' } });
  t.teardown(() => srv.close());
  const agent = await signupAgent(srv.url, 'SSRF Private Co');
  const set = (url: string) => api<{ error: { code: string; details: { field: string; reason: string } } }>(srv.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url } });
  for (const url of ['http://169.254.169.254/latest', 'http://[fe80::1]/x', 'http://[::ffff:169.254.169.254]/x', 'http://0.0.0.0:9/zero', 'http://224.0.0.1/x', 'http://100.100.100.200/x', 'http://[fd00:ec2::254]/x']) {
    const r = await set(url);
    t.equal(r.status, 400, url);
    t.match(r.body.error, { code: 'invalid_request', details: { field: 'url', reason: 'NET_ERR_FORBIDDEN_ADDRESS' } }, url);
  }
  for (const url of ['http://127.0.0.1:9/hook', 'http://localhost:9/hook', 'http://10.1.2.3/hook', 'http://[fd12::1]/hook']) t.equal((await set(url)).status, 200, `${url} allowed`);

  // a metadata receiver already stored (written straight into the store): every attempt is refused at connect
  await srv.svc.store.query(`UPDATE webhook_endpoints SET url = $2 WHERE org_id = $1`, [agent.orgId, 'http://169.254.169.254/latest']);
  const q = await api<{ delivery_id: string }>(srv.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body: {} });
  t.equal(q.status, 202);
  const d = await untilFailed(srv.url, agent.key, q.body.delivery_id);
  t.equal(d?.status, 'failed');
  t.ok(d?.attempts.length && d.attempts.every((a) => a.error_class === 'forbidden_address' && a.status_code === null), 'every attempt refused at connect');
});
