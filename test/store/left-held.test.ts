/**
 * On the embedded store only one process runs (its data dir is locked: store/dir-lock.ts), so a
 * start after a kill gives back at once what the killed process held: the money (here a trial's
 * egress) of the query it was running, and the lease of the webhook attempt it was making. Before,
 * both waited until stale as on a PostgreSQL store shared by replicas: the reservation for twice
 * the statement deadline plus a minute (three minutes here), the delivery for its lease (twice
 * the attempt deadline plus 5 s: two minutes here), so the organization's trial egress stayed held
 * and the delivery did not arrive meanwhile.
 */
import t from 'tap';
import { api, openConnection, signupAgent, startServer } from '../helpers/server.js';
import { dataDirWithDemo, exitOf, startControlPlane } from '../helpers/control-plane-process.js';
import { Receiver } from '../webhooks/receiver.js';

interface Usage {
  readonly wallet_held_cents: number;
  readonly trial: { readonly egress_bytes_held: number };
}

t.test('a start after a SIGKILL gives back at once the reservation and the webhook lease the killed process held', async (t) => {
  const dataDir = await dataDirWithDemo(t);
  const env = {
    SVC_DATA_DIR: dataDir,
    PORT: '0',
    SVC_TUNNEL_PORT: '0',
    LOG_LEVEL: 'info',
    SVC_WEBHOOK_ALLOW_PRIVATE: '1',
    SVC_WEBHOOK_TIMEOUT_MS: '60000',
    SVC_QUERY_TIMEOUT_MS: '60000',
  };
  const rx = await Receiver.start();
  t.teardown(() => rx.close());
  let hold = true;
  const held = new Promise<void>((resolve) => t.teardown(resolve));
  // the first attempt is held unanswered (in flight at the kill); later ones answered
  rx.answer = () => (hold ? { status: 200, gate: held } : { status: 200 });

  const first = await startControlPlane(env);
  t.teardown(() => {
    if (first.child.exitCode === null) first.child.kill('SIGKILL');
  });
  const a = await signupAgent(first.url);
  t.equal((await api(first.url, 'POST', '/v1/agent/webhook', { key: a.key, body: { url: rx.url } })).status, 200);
  const mock = await api<{ delivery_id: string }>(first.url, 'POST', '/v1/webhooks/trigger-mock-event', { key: a.key, body: {} });
  t.equal(mock.status, 202, mock.text);
  const id = mock.body.delivery_id;
  await rx.until(() => rx.of(id).length === 1);

  // a statement that runs until its deadline, its trial egress held meanwhile
  const conn = await openConnection(first.url, a.key, 'demo-healthcare', ['read:patients']);
  void api(first.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) AS n FROM patients a, patients b, patients c' } }).catch(() => undefined);
  let before: Usage | undefined;
  for (let i = 0; i < 200 && !(before && before.trial.egress_bytes_held > 0); i++) {
    await new Promise((r) => setTimeout(r, 50));
    before = (await api<Usage>(first.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  }
  t.ok((before?.trial.egress_bytes_held ?? 0) > 0, `the running statement holds trial egress (${before?.trial.egress_bytes_held})`);

  first.child.kill('SIGKILL');
  await exitOf(first.child);
  hold = false;

  const second = await startServer({ dataDir, env: { SVC_WEBHOOK_ALLOW_PRIVATE: '1', SVC_WEBHOOK_TIMEOUT_MS: '60000', SVC_QUERY_TIMEOUT_MS: '60000' } });
  t.teardown(() => second.close());
  const after = await api<Usage>(second.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(after.status, 200);
  t.equal(after.body.trial.egress_bytes_held, 0, 'nothing is held once the store is open again');
  t.equal(after.body.wallet_held_cents, 0);
  t.same(await second.svc.services.store.query('SELECT count(*)::int AS n FROM reservations'), [{ n: 0 }], 'no reservation is left');
  // (its lease would have held it two minutes)
  await rx.until(() => rx.of(id).length === 2, 20_000);
  t.pass('the delivery in flight at the kill is made again, with the same delivery id');
});
