/**
 * SSRF through the API with SVC_WEBHOOK_ALLOW_PRIVATE off (the default): private receivers are
 * refused at configuration, and a private address met at delivery time (the check on the
 * resolved IP at connect) fails the attempt without a byte reaching it.
 */
import t from 'tap';
import { seal, loadMasterKey } from '../../control-plane/secrets/index.js';
import { api, signupAgent, startServer } from '../helpers/server.js';
import { Receiver } from './receiver.js';

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
  let d: { status: string; attempts: { error_class: string; status_code: number | null }[] } | undefined;
  for (let i = 0; i < 200; i++) {
    d = (await api<typeof d & object>(srv.url, 'GET', `/v1/webhooks/deliveries/${q.body.delivery_id}`, { key: agent.key })).body;
    if (d.status === 'failed') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  t.equal(d?.status, 'failed');
  t.equal(d?.attempts.length, 5);
  t.ok(d?.attempts.every((a) => a.error_class === 'forbidden_address' && a.status_code === null), 'every attempt refused at connect');
  t.equal(rx.received.length, 0, 'the loopback receiver never saw a request');
});
