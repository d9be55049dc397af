/**
 * Nothing lives only in memory: the compiled control plane (as `npm start` runs it) is SIGKILLed
 * with deliveries pending and some attempts in flight, started again on the same data dir, and
 * every delivery arrives, at most once more with the same delivery id. Then SIGTERM with
 * attempts in flight: they finish (or are released) and the process exits 0.
 */
import t from 'tap';
import { api } from '../helpers/server.js';
import { Receiver } from './receiver.js';
import { dataDirWithDemo, exitOf, startControlPlane as start } from '../helpers/control-plane-process.js';

t.test('SIGKILL with deliveries pending: after a restart every delivery arrives, at most duplicated with the same id', async (t) => {
  const dataDir = await dataDirWithDemo(t);
  const env = {
    SVC_DATA_DIR: dataDir,
    PORT: '0',
    SVC_TUNNEL_PORT: '0',
    LOG_LEVEL: 'info',
    SVC_WEBHOOK_ALLOW_PRIVATE: '1',
    SVC_WEBHOOK_RETRY_DELAYS: '200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms',
    SVC_WEBHOOK_TIMEOUT_MS: '1000',
  };
  const rx = await Receiver.start();
  t.teardown(() => rx.close());
  let healthy = false;
  const accepted = new Map<string, number>();
  rx.answer = (r) => {
    if (!healthy) return { status: 503, delayMs: 150 }; // slow failures: some attempts are in flight at the kill
    accepted.set(r.deliveryId, (accepted.get(r.deliveryId) ?? 0) + 1);
    return { status: 200 };
  };

  const first = await start(env);
  t.teardown(() => {
    if (first.child.exitCode === null) first.child.kill('SIGKILL');
  });
  const signup = await api<{ apiKey: string }>(first.url, 'POST', '/v1/agent/account', { body: { orgName: 'Kill Co', agentName: 'bot', headless: true } });
  const key = signup.body.apiKey;
  const set = await api<{ secret: string; standard_webhooks_secret: string }>(first.url, 'POST', '/v1/agent/webhook', { key, body: { url: rx.url } });
  rx.secret = set.body.secret;
  rx.whsec = set.body.standard_webhooks_secret;
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const q = await api<{ delivery_id: string }>(first.url, 'POST', '/v1/webhooks/trigger-mock-event', { key, body: { scenario_id: 'claim.submitted' } });
    t.equal(q.status, 202);
    ids.push(q.body.delivery_id);
  }
  await rx.until(() => rx.received.length >= 25);
  first.child.kill('SIGKILL');
  await exitOf(first.child);
  t.equal(accepted.size, 0, 'nothing was accepted before the kill');

  healthy = true;
  const second = await start(env);
  t.teardown(async () => {
    if (second.child.exitCode === null) {
      second.child.kill('SIGKILL');
      await exitOf(second.child);
    }
  });
  // leases of attempts cut off by the kill run out after 2 × timeout + 5 s
  await rx.until(() => ids.every((id) => accepted.has(id)), 30_000);
  t.equal(ids.filter((id) => accepted.has(id)).length, 20, 'every delivery arrived');
  t.ok(ids.every((id) => (accepted.get(id) ?? 0) <= 2), 'at most one duplicate, with the same id');
  t.ok(rx.received.every((r) => r.serviceOk && r.standardOk), 'every request signed, the secret opened again after the restart');
  const byId = new Map(rx.received.map((r) => [r.deliveryId, r.raw] as const));
  t.ok(rx.received.every((r) => r.raw.equals(byId.get(r.deliveryId)!)), 'byte-identical across the restart');

  // SIGTERM with attempts in flight: they finish, the process exits 0
  rx.answer = () => ({ status: 200, delayMs: 400 });
  const q = await api<{ delivery_id: string }>(second.url, 'POST', '/v1/webhooks/trigger-mock-event', { key, body: {} });
  await rx.until(() => rx.of(q.body.delivery_id).length === 1);
  second.child.kill('SIGTERM');
  t.equal(await exitOf(second.child), 0, 'SIGTERM drains and exits 0');

  const third = await start(env);
  t.teardown(async () => {
    if (third.child.exitCode === null) {
      third.child.kill('SIGTERM');
      await exitOf(third.child);
    }
  });
  const d = await api<{ status: string; attempts: unknown[] }>(third.url, 'GET', `/v1/webhooks/deliveries/${q.body.delivery_id}`, { key });
  t.equal(d.body.status, 'delivered', 'the in-flight attempt finished and was recorded before the exit');
  t.equal(d.body.attempts.length, 1);
});
