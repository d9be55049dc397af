/**
 * Certificates are signed by node:crypto (OpenSSL), not by node-forge's JavaScript RSA. Forge
 * took 100-250 ms of the event loop per certificate with the default RSA 3072 CA key on a
 * 2-core machine, and certificates are not rare: any agent key may call
 * POST /v1/relays/{id}/renew (the key may stay, so each call costs the caller nothing) at the
 * API's rate limit, 100 a second, and each call signed one, holding every organization's requests
 * up. Here forge's private-key operation is made to throw: every kind of certificate our CA
 * issues must still be issued, and verify with the CA's key, as before.
 */
import { X509Certificate } from 'node:crypto';
import t from 'tap';
import { caSecrets } from '../../pki/ca.js';
import { createCa, generateKeyAndCsr, issueClientCertificate, issueReplicaCertificate, issueServerCertificate, verifyClientCertificate } from '../../pki/index.js';

t.test("no certificate is signed with forge's JavaScript RSA", async (t) => {
  const ca = createCa({ keyBits: 2048 });
  const forgeKey = caSecrets(ca).forgeKey as unknown as { sign: (...args: unknown[]) => string };
  let forgeSigned = 0;
  forgeKey.sign = () => {
    forgeSigned++;
    throw new Error("forge's RSA signing was used");
  };

  const relay = generateKeyAndCsr();
  const client = issueClientCertificate(ca, relay.csrPem, { relayId: 'rly_native', orgId: 'org_native' });
  const server = issueServerCertificate(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  const replica = issueReplicaCertificate(ca, { replicaId: 'rep_native' });
  t.equal(forgeSigned, 0);

  for (const [what, pem] of [['client', client.certPem], ['server', server.certPem], ['replica', replica.certPem]] as const) {
    const x = new X509Certificate(pem);
    t.ok(x.checkIssued(ca.certificate) && x.verify(ca.certificate.publicKey), `the ${what} certificate verifies with the CA key`);
  }
  const verdict = verifyClientCertificate(ca, new X509Certificate(client.certPem), { isRevoked: () => false });
  t.match(verdict, { ok: true, identity: { relayId: 'rly_native', orgId: 'org_native' } }, 'and the relay certificate is accepted as before');
});
