/**
 * The embedded store serves one process at a time. PGlite takes no lock of its own: a second
 * control plane started on a data dir in use came up beside the first (each signing up
 * organizations the other could not see) and both wrote the same files. It is refused now, with
 * a message that says why; a lock left by a process killed with SIGKILL does not keep the next
 * start out.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { openEmbeddedStore } from '../../control-plane/store/embedded.js';
import { api, CACHE, demoImage, signupAgent, storeTemplateDir, tempDir } from '../helpers/server.js';
import { exitOf, startControlPlane, type ControlPlaneProcess } from '../helpers/control-plane-process.js';

t.test('a second store opened on a directory in use is refused until the first closes', async (t) => {
  const dir = await tempDir('svc-lock-');
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const state = path.join(dir, 'state');
  await fs.cp(await storeTemplateDir(), state, { recursive: true });
  const first = await openEmbeddedStore(state);
  const second = await openEmbeddedStore(state).catch((err: unknown) => err as Error);
  if (!(second instanceof Error)) await second.close();
  t.match(second, { code: 'STORE_ERR_LOCKED', message: /in use by another control-plane process \(pid \d+\)/ }, 'the second is refused');
  await first.query("INSERT INTO orgs (id, name, created_at, trial_expires_at) VALUES ('org_l', 'L', now(), now())");
  await first.close();
  const again = await openEmbeddedStore(state);
  t.same(await again.query('SELECT id FROM orgs'), [{ id: 'org_l' }], 'opened once the first closed, with what it wrote');
  await again.close();
});

t.test('a second control plane on the same data dir is refused; after a SIGKILL the next one starts', async (t) => {
  const dataDir = await tempDir('svc-lock-');
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  await demoImage();
  await fs.cp(path.join(CACHE, 'demo'), path.join(dataDir, 'demo'), { recursive: true });
  await fs.cp(await storeTemplateDir(), path.join(dataDir, 'state'), { recursive: true });
  const env = { SVC_DATA_DIR: dataDir, PORT: '0', SVC_TUNNEL_PORT: '0', LOG_LEVEL: 'info' };
  const running: ControlPlaneProcess[] = [];
  t.teardown(async () => {
    for (const p of running) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGKILL');
        await exitOf(p.child);
      }
    }
  });

  const first = await startControlPlane(env);
  running.push(first);
  const a = await signupAgent(first.url, 'First Co');
  await api(first.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 500 } });

  const refused = await startControlPlane(env).then(
    (p) => (running.push(p), ''),
    (err: Error) => err.message,
  );
  t.match(refused, /exited 1 before ready/, 'the second process does not start');
  t.match(refused, /cannot open the state store .*is in use by another control-plane process \(pid \d+\)/, 'and says why');
  t.equal(first.child.exitCode, null, 'the first one still runs');
  const usage = await api<{ wallet_balance_cents: number }>(first.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(usage.body.wallet_balance_cents, 500, 'and still serves its organizations');

  first.child.kill('SIGKILL');
  await exitOf(first.child);
  const next = await startControlPlane(env);
  running.push(next);
  const after = await api<{ wallet_balance_cents: number }>(next.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(after.status, 200, 'the lock the killed process left does not keep the next start out');
  t.equal(after.body.wallet_balance_cents, 500, 'and the store is the one the first process wrote');
  next.child.kill('SIGTERM');
  t.equal(await exitOf(next.child), 0);
  await t.rejects(fs.access(path.join(dataDir, 'state.lock')), 'a clean stop leaves no lock behind');
});
