/**
 * Master-key rotation keeps webhook signing working: a receiver secret set under key A, then a
 * restart with key B (A listed as previous) re-seals it under B at start-up, then a restart with
 * B alone: every delivery is still signed with the same secret, verified by a real receiver.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import t from 'tap';
import { masterKeyFrom } from '../../control-plane/secrets/index.js';
import { api, signupAgent, startServer, tempDir, type Agent, type TestServer } from '../helpers/server.js';
import { Receiver } from './receiver.js';

const keyA = randomBytes(32).toString('hex');
const keyB = randomBytes(32).toString('hex');
const SECRET = `svcsec_${randomBytes(24).toString('base64url')}`;

t.test('a webhook secret survives A → B(+A) → B', async (t) => {
  const dataDir = await tempDir();
  const rx = await Receiver.start();
  t.teardown(() => rx.close());
  rx.secret = SECRET;
  rx.whsec = `whsec_${Buffer.from(SECRET).toString('base64')}`;
  const env = { SVC_WEBHOOK_ALLOW_PRIVATE: '1', SVC_WEBHOOK_RETRY_DELAYS: '100ms' };
  let srv: TestServer | undefined;
  t.teardown(async () => (await srv?.close(), await fs.rm(dataDir, { recursive: true, force: true })));
  const boot = async (keys: Record<string, string>): Promise<TestServer> => (srv = await startServer({ dataDir, demoWorkers: 1, env: { ...env, ...keys } }));
  const sealedKeyIds = async (s: TestServer): Promise<string[]> =>
    (await s.svc.services.store.query<{ secret_sealed: string }>('SELECT secret_sealed FROM webhook_endpoints')).map((r) => r.secret_sealed.split('.')[1] ?? '');

  async function deliversSigned(s: TestServer, agent: Agent, step: string): Promise<void> {
    const q = await api<{ delivery_id: string }>(s.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: agent.key, body: { scenario_id: 'claim.submitted' } });
    t.equal(q.status, 202, `${step}: event accepted`);
    await rx.until(() => rx.of(q.body.delivery_id).length >= 1);
    const got = rx.of(q.body.delivery_id)[0]!;
    t.ok(got.serviceOk, `${step}: X-Service-Signature verifies with the secret set under key A`);
    t.ok(got.standardOk, `${step}: webhook-signature verifies too`);
    const d = await api<{ status: string; attempts: { error_class: string | null }[] }>(s.url, 'GET', `/v1/webhooks/deliveries/${q.body.delivery_id}`, { key: agent.key });
    t.match(d.body.attempts[0], { error_class: null }, `${step}: the first attempt succeeded (no secret_unavailable)`);
  }

  // 1. key A: the secret is set, sealed under A
  let s = await boot({ SVC_MASTER_KEY: keyA });
  const agent = await signupAgent(s.url, 'Rotating Health');
  const set = await api(s.url, 'POST', '/v1/agent/webhook', { key: agent.key, body: { url: rx.url, secret: SECRET } });
  t.equal(set.status, 200);
  t.same(await sealedKeyIds(s), [masterKeyFrom(keyA).id], 'sealed under A');
  await deliversSigned(s, agent, 'key A');
  await s.close();
  srv = undefined;

  // 2. key B, A as previous: re-sealed under B at start-up
  s = await boot({ SVC_MASTER_KEY: keyB, SVC_MASTER_KEY_PREVIOUS: keyA });
  t.same(await sealedKeyIds(s), [masterKeyFrom(keyB).id], 're-sealed under B before the server was ready');
  await deliversSigned(s, agent, 'key B + previous A');
  await s.close();
  srv = undefined;

  // 3. key B alone: A is gone, and nothing needed it any more
  s = await boot({ SVC_MASTER_KEY: keyB });
  t.same(await sealedKeyIds(s), [masterKeyFrom(keyB).id]);
  await deliversSigned(s, agent, 'key B alone');
  const cfg = await api(s.url, 'GET', '/v1/agent/webhook', { key: agent.key });
  t.notMatch(cfg.text, SECRET.slice(7), 'the secret is still never shown');
});

t.test('a sealed receiver secret is bound to its row: copied to another organization it does not open', async (t) => {
  const rx = await Receiver.start();
  t.teardown(() => rx.close());
  rx.secret = SECRET;
  rx.whsec = `whsec_${Buffer.from(SECRET).toString('base64')}`;
  const s = await startServer({ demoWorkers: 1, env: { SVC_MASTER_KEY: keyA, SVC_WEBHOOK_ALLOW_PRIVATE: '1', SVC_WEBHOOK_RETRY_DELAYS: '10s' } });
  t.teardown(() => s.close());
  const victim = await signupAgent(s.url, 'Victim');
  const thief = await signupAgent(s.url, 'Thief');
  t.equal((await api(s.url, 'POST', '/v1/agent/webhook', { key: victim.key, body: { url: rx.url, secret: SECRET } })).status, 200);
  t.equal((await api(s.url, 'POST', '/v1/agent/webhook', { key: thief.key, body: { url: rx.url } })).status, 200);
  const store = s.svc.services.store;
  const [row] = await store.query<{ secret_sealed: string }>("SELECT secret_sealed FROM webhook_endpoints WHERE org_id = $1 AND connection_id = ''", [victim.orgId]);
  t.match(row?.secret_sealed, /^v2\./, 'sealed in the row-bound format');
  // someone with write access to the store copies the victim's sealed secret into their own row
  await store.query("UPDATE webhook_endpoints SET secret_sealed = $1 WHERE org_id = $2 AND connection_id = ''", [row?.secret_sealed, thief.orgId]);
  const q = await api<{ delivery_id: string }>(s.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: thief.key, body: { scenario_id: 'claim.submitted' } });
  t.equal(q.status, 202);
  let d: { status: string; attempts: { error_class: string | null }[] } = { status: '', attempts: [] };
  for (let i = 0; i < 200 && d.attempts.length === 0; i++) {
    d = (await api<typeof d>(s.url, 'GET', `/v1/webhooks/deliveries/${q.body.delivery_id}`, { key: thief.key })).body;
    if (d.attempts.length === 0) await new Promise((r) => setTimeout(r, 50));
  }
  t.equal(d.attempts[0]?.error_class, 'secret_unavailable', 'the copied secret does not open in another row');
  t.equal(rx.of(q.body.delivery_id).length, 0, 'nothing was signed with the victim’s secret');
  const ok = await api<{ delivery_id: string }>(s.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: victim.key, body: { scenario_id: 'claim.submitted' } });
  await rx.until(() => rx.of(ok.body.delivery_id).length >= 1);
  t.ok(rx.of(ok.body.delivery_id)[0]?.serviceOk, 'the victim’s own deliveries still verify');
});
