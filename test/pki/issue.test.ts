import { createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import forge from 'node-forge';
import t from 'tap';
import {
  createCa,
  createCsr,
  generateKeyAndCsr,
  identityOf,
  issueClientCertificate,
  issueServerCertificate,
  PkiError,
  type PkiErrorCode,
} from '../../pki/index.js';
import { ecCsr, forgeCsr, forgeExtension, rsaKeyPem, tamperPem } from './fixtures/forge-helpers.js';

// One CA (2048 to keep the run short; the 3072 default is exercised in ca.test.ts) and one relay
// key reused across cases: nothing here depends on keys being fresh.
const ca = createCa({ keyBits: 2048 });
const relay = generateKeyAndCsr({ commonName: 'relay-host' });

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';

function codeOf(fn: () => unknown): PkiErrorCode | 'no error' | 'not a PkiError' {
  try {
    fn();
    return 'no error';
  } catch (err) {
    return err instanceof PkiError ? err.code : 'not a PkiError';
  }
}

t.test('a client certificate chains to our CA and verifies with node:crypto', async (t) => {
  const issued = issueClientCertificate(ca, relay.csrPem, { relayId: 'rly_abc', orgId: 'org_xyz' });
  const cert = new X509Certificate(issued.certPem);
  t.ok(cert.checkIssued(ca.certificate), 'checkIssued by our CA');
  t.ok(cert.verify(ca.certificate.publicKey), 'signature verifies with the CA public key');
  t.notOk(cert.verify(cert.publicKey), 'and not with its own key (not self-signed)');
  t.ok(cert.checkPrivateKey(createPrivateKey(relay.keyPem)), 'the certificate is for the key in the CSR');
  t.equal(forgeCertSigAlg(issued.certPem), 'sha256WithRSAEncryption');
  t.equal(issued.serial, cert.serialNumber.toLowerCase());
  t.match(issued.fingerprint256, /^[0-9a-f]{64}$/);
  t.equal(issued.fingerprint256, cert.fingerprint256.replace(/:/g, '').toLowerCase());
  t.notOk(issued.certPem.includes('\r'), 'PEM with LF line ends');
});

t.test('the identity is ours: CN, O and SAN URIs, whatever the CSR asks', async (t) => {
  const key = rsaKeyPem(2048);
  const greedy = forgeCsr({
    keyPem: key,
    subject: [
      { name: 'commonName', value: 'other-relay' },
      { name: 'organizationName', value: 'other-org' },
    ],
    extensions: [
      { name: 'subjectAltName', altNames: [{ type: 6, value: 'urn:svc:relay:other-relay' }, { type: 6, value: 'urn:svc:org:other-org' }, { type: 2, value: 'evil.example' }] },
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true },
      { name: 'extKeyUsage', serverAuth: true, codeSigning: true },
    ],
  });
  const issued = issueClientCertificate(ca, greedy, { relayId: 'rly_mine', orgId: 'org_mine' });
  const cert = new X509Certificate(issued.certPem);
  t.equal(cert.subject, 'CN=rly_mine\nO=org_mine');
  t.equal(cert.subjectAltName, 'URI:urn:svc:relay:rly_mine, URI:urn:svc:org:org_mine');
  t.equal(cert.ca, false, 'not a CA although the CSR asked');
  t.same(cert.keyUsage, [CLIENT_AUTH], 'EKU is clientAuth only');
  const ku = forgeExtension(issued.certPem, 'keyUsage');
  t.match(ku, { digitalSignature: true, keyEncipherment: true, keyCertSign: false, cRLSign: false, critical: true });
  t.match(forgeExtension(issued.certPem, 'basicConstraints'), { cA: false, critical: true });
  t.notOk(issued.certPem.includes('other'), 'nothing of the requested identity');
  const id = identityOf(issued.certPem);
  t.equal(id.relayId, 'rly_mine');
  t.equal(id.orgId, 'org_mine');
});

t.test('validity: 30 days by default, back-dated 5 minutes, options honoured, never past the CA', async (t) => {
  const now = new Date('2030-01-01T12:00:00Z');
  const longCa = createCa({ keyBits: 2048, now: new Date('2029-12-01T00:00:00Z'), validityDays: 90 });
  const a = issueClientCertificate(longCa, relay.csrPem, { relayId: 'r1', orgId: 'o1', now });
  t.equal(a.notBefore.toISOString(), '2030-01-01T11:55:00.000Z');
  t.equal(a.notAfter.toISOString(), '2030-01-31T12:00:00.000Z');
  const b = issueClientCertificate(longCa, relay.csrPem, { relayId: 'r1', orgId: 'o1', now, validityDays: 7 });
  t.equal(b.notAfter.toISOString(), '2030-01-08T12:00:00.000Z');
  const capped = issueClientCertificate(longCa, relay.csrPem, { relayId: 'r1', orgId: 'o1', now, validityDays: 365 });
  t.equal(capped.notAfter.getTime(), longCa.notAfter.getTime(), 'capped at the CA notAfter');
  t.equal(codeOf(() => issueClientCertificate(longCa, relay.csrPem, { relayId: 'r1', orgId: 'o1', now: new Date('2031-01-01T00:00:00Z') })), 'PKI_ERR_CA_EXPIRED');
  t.equal(codeOf(() => issueClientCertificate(longCa, relay.csrPem, { relayId: 'r1', orgId: 'o1', now: new Date('2020-01-01T00:00:00Z') })), 'PKI_ERR_CA_EXPIRED');
  for (const validityDays of [0, -1, Number.NaN, 10_000]) {
    t.equal(codeOf(() => issueClientCertificate(ca, relay.csrPem, { relayId: 'r1', orgId: 'o1', validityDays })), 'PKI_ERR_INVALID_OPTIONS', `validityDays ${validityDays}`);
  }
});

t.test('serials are random, unique, positive and 128 bits long', async (t) => {
  const serials = new Set<string>();
  for (let i = 0; i < 40; i++) {
    const issued = issueClientCertificate(ca, relay.csrPem, { relayId: `r${i}`, orgId: 'o' });
    t.match(issued.serial, /^[89a-f][0-9a-f]{31}$/, 'exactly 128 bits: 32 hex digits, top bit set');
    serials.add(issued.serial);
  }
  t.equal(serials.size, 40, 'no two serials alike');
  // Positive: the DER INTEGER carries a leading 00 byte before the high bit.
  const issued = issueClientCertificate(ca, relay.csrPem, { relayId: 'r', orgId: 'o' });
  t.equal(forge.pki.certificateFromPem(issued.certPem).serialNumber, `00${issued.serial}`);
});

t.test('a CSR whose signature does not verify is refused (no proof of possession)', async (t) => {
  const key = rsaKeyPem(2048);
  const csr = forgeCsr({ keyPem: key, subject: [{ name: 'commonName', value: 'relay-host' }] });
  t.equal(codeOf(() => issueClientCertificate(ca, csr, { relayId: 'r', orgId: 'o' })), 'no error', 'the untouched CSR is fine');
  const renamed = tamperPem(csr, 'CERTIFICATE REQUEST', 'relay-host', 'evil-hostx');
  t.equal(codeOf(() => issueClientCertificate(ca, renamed, { relayId: 'r', orgId: 'o' })), 'PKI_ERR_CSR_SIGNATURE', 'subject changed after signing');
  // A CSR carrying someone else's public key, signed with a key the requester does hold.
  const victim = generateKeyAndCsr();
  const victimPublic = createPublicKey(victim.keyPem).export({ type: 'spki', format: 'pem' }).toString();
  const stolen = forgeCsr({ keyPem: key, publicKeyPem: victimPublic });
  t.equal(codeOf(() => issueClientCertificate(ca, stolen, { relayId: 'r', orgId: 'o' })), 'PKI_ERR_CSR_SIGNATURE', 'key not possessed');
});

t.test('CSR keys: RSA of at least 2048 bits, signed with SHA-256 or better', async (t) => {
  const small = createCsr(rsaKeyPem(1024));
  const err = (() => {
    try {
      issueClientCertificate(ca, small, { relayId: 'r', orgId: 'o' });
    } catch (e) {
      return e as PkiError;
    }
    return undefined;
  })();
  t.equal(err?.code, 'PKI_ERR_CSR_KEY_TOO_SMALL');
  t.match(err?.message, /1024 bits/);
  t.equal(codeOf(() => issueClientCertificate(ca, ecCsr(), { relayId: 'r', orgId: 'o' })), 'PKI_ERR_CSR_KEY_NOT_RSA');
  const sha1 = forgeCsr({ keyPem: rsaKeyPem(2048), md: forge.md.sha1.create() });
  t.equal(codeOf(() => issueClientCertificate(ca, sha1, { relayId: 'r', orgId: 'o' })), 'PKI_ERR_CSR_WEAK_SIGNATURE');
  const bigger = generateKeyAndCsr({ keyBits: 3072 });
  t.equal(codeOf(() => issueClientCertificate(ca, bigger.csrPem, { relayId: 'r', orgId: 'o' })), 'no error', '3072 is fine');
});

t.test('what is not a CSR is refused as PKI_ERR_CSR_INVALID', async (t) => {
  const issued = issueClientCertificate(ca, relay.csrPem, { relayId: 'r', orgId: 'o' });
  const cases: [string, unknown][] = [
    ['empty', ''],
    ['text', 'hello'],
    ['a certificate', issued.certPem],
    ['truncated', relay.csrPem.slice(0, 200) + '\n-----END CERTIFICATE REQUEST-----\n'],
    ['two CSRs', relay.csrPem + relay.csrPem],
    ['not a string', 42],
  ];
  for (const [name, input] of cases) {
    t.equal(codeOf(() => issueClientCertificate(ca, input as string, { relayId: 'r', orgId: 'o' })), 'PKI_ERR_CSR_INVALID', name);
  }
});

t.test('relay and org ids must be of the id alphabet', async (t) => {
  for (const bad of ['', 'a:b', 'a b', 'x'.repeat(65), '-lead', 'é', 'a,b', 'a/b']) {
    t.equal(codeOf(() => issueClientCertificate(ca, relay.csrPem, { relayId: bad, orgId: 'o' })), 'PKI_ERR_INVALID_OPTIONS', `relayId ${JSON.stringify(bad)}`);
    t.equal(codeOf(() => issueClientCertificate(ca, relay.csrPem, { relayId: 'r', orgId: bad })), 'PKI_ERR_INVALID_OPTIONS', `orgId ${JSON.stringify(bad)}`);
  }
  const ok = issueClientCertificate(ca, relay.csrPem, { relayId: '3f2b1c9e-0000-4a4a-8b8b-123456789abc', orgId: 'org_A.b-c' });
  t.equal(identityOf(ok.certPem).relayId, '3f2b1c9e-0000-4a4a-8b8b-123456789abc');
});

t.test('the server certificate has the requested SANs, serverAuth, and its own fresh key', async (t) => {
  const server = issueServerCertificate(ca, { dnsNames: ['localhost', 'tunnel.example.com'], ipAddresses: ['127.0.0.1', '::1'] });
  const cert = new X509Certificate(server.certPem);
  t.equal(cert.subjectAltName, 'DNS:localhost, DNS:tunnel.example.com, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
  t.same(cert.keyUsage, [SERVER_AUTH]);
  t.equal(cert.ca, false);
  t.equal(cert.subject, 'CN=localhost');
  t.ok(cert.checkIssued(ca.certificate) && cert.verify(ca.certificate.publicKey));
  const key = createPrivateKey(server.keyPem);
  t.ok(cert.checkPrivateKey(key), 'the returned key matches');
  t.equal(key.asymmetricKeyDetails?.modulusLength, 2048);
  t.equal(cert.checkHost('localhost'), 'localhost');
  t.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
  t.equal(cert.checkIP('::1'), '::1');
  t.equal(cert.checkHost('evil.example'), undefined);
  t.match(forgeExtension(server.certPem, 'keyUsage'), { digitalSignature: true, keyEncipherment: true, keyCertSign: false });
  const again = issueServerCertificate(ca, { ipAddresses: ['127.0.0.1'] });
  t.not(again.keyPem, server.keyPem, 'a fresh key each time');
  t.equal(new X509Certificate(again.certPem).subject, 'CN=127.0.0.1');
  t.equal(Math.round((again.notAfter.getTime() - again.notBefore.getTime()) / 60_000), 90 * 24 * 60 + 5, '90 days + 5 min back-dating');

  t.equal(codeOf(() => issueServerCertificate(ca, {})), 'PKI_ERR_INVALID_OPTIONS', 'no SAN');
  t.equal(codeOf(() => issueServerCertificate(ca, { dnsNames: ['bad name'] })), 'PKI_ERR_INVALID_OPTIONS');
  t.equal(codeOf(() => issueServerCertificate(ca, { ipAddresses: ['256.0.0.1'] })), 'PKI_ERR_INVALID_OPTIONS');
});

t.test('generateKeyAndCsr makes an RSA-2048 key and a CSR for it that our CA accepts', async (t) => {
  const key = createPrivateKey(relay.keyPem);
  t.equal(key.asymmetricKeyType, 'rsa');
  t.equal(key.asymmetricKeyDetails?.modulusLength, 2048);
  t.match(relay.keyPem, /^-----BEGIN PRIVATE KEY-----\n/);
  t.match(relay.csrPem, /^-----BEGIN CERTIFICATE REQUEST-----\n/);
  const csr = forge.pki.certificationRequestFromPem(relay.csrPem);
  t.ok(csr.verify(), 'forge verifies it');
  t.equal(csr.subject.getField('CN').value, 'relay-host');
  t.equal(forge.pki.oids[csr.signatureOid ?? ''], 'sha256WithRSAEncryption');
  t.equal(new X509Certificate(issueClientCertificate(ca, relay.csrPem, { relayId: 'r', orgId: 'o' }).certPem).checkPrivateKey(key), true);
  t.match(generateKeyAndCsr().csrPem, /CERTIFICATE REQUEST/, 'commonName is optional');
  t.equal(codeOf(() => createCsr('not a key')), 'PKI_ERR_INVALID_OPTIONS');
});

function forgeCertSigAlg(pem: string): string | undefined {
  return forge.pki.oids[forge.pki.certificateFromPem(pem).siginfo.algorithmOid];
}
