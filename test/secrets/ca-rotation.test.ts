/**
 * Master-key rotation covers the relay CA's private key (kept sealed in the store), not only
 * credentials: start with key A and make the CA; restart with key B and A as previous (start-up
 * re-seals the CA key with B); restart with B alone: the same CA still signs, relays still enroll.
 */
import { X509Certificate, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import t from 'tap';
import { generateKeyAndCsr } from '../../pki/index.js';
import { masterKeyFrom } from '../../control-plane/secrets/index.js';
import { api, signupAgent, startServer, tempDir, type TestServer } from '../helpers/server.js';

type Registered = { relay_id: string; certificate_pem: string; ca_certificate_pem: string };

async function enroll(srv: TestServer, key: string, csrPem: string): Promise<{ status: number; body: Registered; text: string }> {
  const tok = await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key, body: {} });
  if (tok.status !== 201) throw new Error(tok.text);
  return api<Registered>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok.body.token, csr_pem: csrPem } });
}

t.test('the relay CA survives dropping the previous master key', async (t) => {
  const dir = await tempDir();
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const keyA = randomBytes(32).toString('hex');
  const keyB = randomBytes(32).toString('base64');
  const [csr1, csr2] = [generateKeyAndCsr(), generateKeyAndCsr()];
  const caRow = async (srv: TestServer): Promise<string> => {
    const [row] = await srv.svc.store.query<{ key_sealed: string }>('SELECT key_sealed FROM ca WHERE id = 1');
    return row?.key_sealed ?? '';
  };

  let srv = await startServer({ dataDir: dir, demoWorkers: 1, env: { SVC_MASTER_KEY: keyA } });
  const agent = await signupAgent(srv.url);
  const first = await enroll(srv, agent.key, csr1.csrPem);
  t.equal(first.status, 201, first.text);
  const caPem = first.body.ca_certificate_pem;
  t.match(await caRow(srv), new RegExp(`^v2\\.${masterKeyFrom(keyA).id}\\.`), 'the CA key is sealed with key A');
  t.notMatch(await caRow(srv), /PRIVATE KEY/);
  await srv.close();

  srv = await startServer({ dataDir: dir, demoWorkers: 1, env: { SVC_MASTER_KEY: keyB, SVC_MASTER_KEY_PREVIOUS: keyA } });
  t.match(await caRow(srv), new RegExp(`^v2\\.${masterKeyFrom(keyB).id}\\.`), 'start-up re-sealed the CA key with key B');
  await srv.close();

  srv = await startServer({ dataDir: dir, demoWorkers: 1, env: { SVC_MASTER_KEY: keyB } });
  t.teardown(() => srv.close());
  const second = await enroll(srv, agent.key, csr2.csrPem);
  t.equal(second.status, 201, `a relay enrolls with key B alone: ${second.text}`);
  t.equal(second.body.ca_certificate_pem, caPem, 'the same CA as before');
  const cert = new X509Certificate(second.body.certificate_pem);
  t.ok(cert.verify(new X509Certificate(caPem).publicKey), 'signed by that CA');
});
