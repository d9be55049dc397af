/**
 * A CSR's signature (its proof of possession) is verified by node:crypto, not by node-forge's
 * JavaScript RSA. A CSR may carry an RSA key of up to 8192 bits with a 32-bit public exponent:
 * forge took 20-45 ms of the event loop to verify one, and any agent key may send CSRs
 * (POST /v1/relays/{id}/renew, the same CSR each time) at the API's rate limit of 100 a second,
 * several seconds of work per second. Here forge's verification is made to throw: a good CSR must
 * still be accepted, and one changed after signing, or carrying a key its signer does not hold,
 * still refused.
 */
import { createPublicKey } from 'node:crypto';
import forge from 'node-forge';
import t from 'tap';
import { checkCsr, generateKeyAndCsr } from '../../pki/index.js';
import { forgeCsr, rsaKeyPem, tamperPem } from './fixtures/forge-helpers.js';

t.test("CSR signatures are verified without forge's JavaScript RSA", async (t) => {
  const parse = forge.pki.certificationRequestFromAsn1;
  let forgeVerified = 0;
  forge.pki.certificationRequestFromAsn1 = ((asn: forge.asn1.Asn1, computeHash?: boolean) => {
    const csr = parse(asn, computeHash);
    csr.verify = () => {
      forgeVerified++;
      throw new Error("forge's RSA verification was used");
    };
    return csr;
  }) as typeof parse;
  t.teardown(() => {
    forge.pki.certificationRequestFromAsn1 = parse;
  });

  const key = rsaKeyPem(2048);
  const csr = forgeCsr({ keyPem: key, subject: [{ name: 'commonName', value: 'relay-host' }] });
  t.equal(checkCsr(csr).keyBits, 2048, 'a good CSR is accepted');
  t.equal(checkCsr(generateKeyAndCsr().csrPem).keyBits, 2048, "and one svc-relay makes");

  t.throws(() => checkCsr(tamperPem(csr, 'CERTIFICATE REQUEST', 'relay-host', 'evil-hostx')), { code: 'PKI_ERR_CSR_SIGNATURE' }, 'subject changed after signing');
  const victim = createPublicKey(generateKeyAndCsr().keyPem).export({ type: 'spki', format: 'pem' }).toString();
  t.throws(() => checkCsr(forgeCsr({ keyPem: key, publicKeyPem: victim })), { code: 'PKI_ERR_CSR_SIGNATURE' }, 'a key its signer does not hold');
  t.equal(forgeVerified, 0);
});
