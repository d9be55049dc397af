/**
 * Credentials are sealed bound to their row (organization + kind): a sealed value copied into
 * another organization's row, or into another kind's row, does not open. Values sealed before the
 * binding existed (format v1) still open, and start-up re-seals them into the bound format.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import t from 'tap';
import { masterKeyFrom, seal } from '../../control-plane/secrets/index.js';
import { api, openConnection, signupAgent, startServer, tempDir } from '../helpers/server.js';

const STRIPE_A = 'rk_test_OrgAaaaaaaaaaaaaaaaaaaa1111';
const STRIPE_B = 'rk_test_OrgBbbbbbbbbbbbbbbbbbbbb2222';

t.test('a sealed credential copied into another organization’s row does not open', async (t) => {
  const srv = await startServer({ demoWorkers: 1 });
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url, 'Org A');
  const b = await signupAgent(srv.url, 'Org B');
  for (const [who, secret] of [[a, STRIPE_A], [b, STRIPE_B]] as const) {
    t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: who.key, body: { connector_kind: 'stripe', secret } })).status, 201);
  }
  const creds = srv.svc.services.credentials;
  t.equal((await creds.resolve(b.orgId, 'stripe')).secret, STRIPE_B, 'each row opens in place');
  const [rowA] = await srv.svc.store.query<{ sealed: string; key_id: string }>("SELECT sealed, key_id FROM credentials WHERE org_id = $1 AND connector_kind = 'stripe'", [a.orgId]);
  t.match(rowA?.sealed, /^v2\./, 'new credentials are sealed in the bound format');

  // someone with write access to the store copies org A's sealed value over org B's
  await srv.svc.store.query("UPDATE credentials SET sealed = $2, key_id = $3 WHERE org_id = $1 AND connector_kind = 'stripe'", [b.orgId, rowA?.sealed, rowA?.key_id]);
  await t.rejects(creds.resolve(b.orgId, 'stripe'), { code: 'invalid_request', details: { reason: 'credential_unreadable', connector_kind: 'stripe' } });
  // through the API: opening org B's stripe connection and querying fails cleanly, with no secret in the answer
  const conn = await openConnection(srv.url, b.key, 'stripe', ['read:customers']);
  const q = await api<{ error: { details: { reason: string } } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: b.key, body: { sql: 'SELECT id FROM customers' } });
  t.equal(q.status, 400, q.text);
  t.equal(q.body.error.details.reason, 'credential_unreadable');
  t.notMatch(q.text, /OrgA|OrgB/);

  // the same value under org A's other kind does not open either
  await srv.svc.store.query("INSERT INTO credentials (org_id, connector_kind, sealed, key_id, hint, created_at) VALUES ($1, 'github', $2, $3, '', now())", [a.orgId, rowA?.sealed, rowA?.key_id]);
  await t.rejects(creds.resolve(a.orgId, 'github'), { code: 'invalid_request', details: { reason: 'credential_unreadable' } }, 'another kind of the same organization');
  t.equal((await creds.resolve(a.orgId, 'stripe')).secret, STRIPE_A, 'the original row still opens');
});

t.test('a v1 credential (sealed before rows were bound) still opens, and start-up re-seals it bound to its row', async (t) => {
  const dir = await tempDir();
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const keyText = randomBytes(32).toString('hex');
  const key = masterKeyFrom(keyText);
  let srv = await startServer({ dataDir: dir, demoWorkers: 1, env: { SVC_MASTER_KEY: keyText } });
  const a = await signupAgent(srv.url);
  t.equal((await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'stripe', secret: STRIPE_A } })).status, 201);
  // what an earlier release wrote: the v1 format, no associated data
  const v1 = seal(key, JSON.stringify({ secret: STRIPE_A, options: {} }));
  await srv.svc.store.query("UPDATE credentials SET sealed = $2 WHERE org_id = $1 AND connector_kind = 'stripe'", [a.orgId, v1]);
  t.equal((await srv.svc.services.credentials.resolve(a.orgId, 'stripe')).secret, STRIPE_A, 'v1 opens');
  await srv.close();

  srv = await startServer({ dataDir: dir, demoWorkers: 1, env: { SVC_MASTER_KEY: keyText } });
  t.teardown(() => srv.close());
  const [row] = await srv.svc.store.query<{ sealed: string; key_id: string }>("SELECT sealed, key_id FROM credentials WHERE org_id = $1 AND connector_kind = 'stripe'", [a.orgId]);
  t.match(row?.sealed, new RegExp(`^v2\\.${key.id}\\.`), 're-sealed at start-up in the bound format, same key');
  t.equal(row?.key_id, key.id);
  t.equal((await srv.svc.services.credentials.resolve(a.orgId, 'stripe')).secret, STRIPE_A, 'and it opens');
  t.equal(await srv.svc.services.credentials.reseal(), 0, 'nothing is left to re-seal');
});
