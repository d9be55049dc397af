import { X509Certificate } from 'node:crypto';
import t from 'tap';
import {
  caFromPem,
  fingerprintOf,
  generateCaPem,
  generateKeyAndCsr,
  identityOf,
  issueClientCertificate,
  issueReplicaCertificate,
  issueServerCertificate,
  serialOf,
  verifyClientCertificate,
  verifyReplicaCertificate,
  type PkiErrorCode,
} from '../../pki/index.js';
import { forgeLeaf, rsaKeyPem } from './fixtures/forge-helpers.js';

// Our CA was made a year ago (so certificates can be issued in the past); its PEMs are kept so the
// test can also sign hand-made certificates with our key. Keys are reused across cases.
const DAY = 86_400_000;
const ourPems = generateCaPem({ keyBits: 2048, now: new Date(Date.now() - 365 * DAY) });
const ca = caFromPem(ourPems);
const otherPems = generateCaPem({ keyBits: 2048, commonName: 'svc relay CA' }); // same name, other key
const otherCa = caFromPem(otherPems);
const relay = generateKeyAndCsr();
const never = () => false;

function issue(extra: { now?: Date; validityDays?: number } = {}) {
  return issueClientCertificate(ca, relay.csrPem, { relayId: 'rly_1', orgId: 'org_1', ...extra });
}

function codeOf(r: ReturnType<typeof verifyClientCertificate>): PkiErrorCode | 'ok' {
  return r.ok ? 'ok' : r.code;
}

t.test('a certificate from our CA verifies and yields its identity', async (t) => {
  const issued = issue();
  const r = verifyClientCertificate(ca, issued.certPem, { isRevoked: never });
  t.ok(r.ok);
  if (!r.ok) return;
  t.same(r.identity, {
    relayId: 'rly_1',
    orgId: 'org_1',
    serial: issued.serial,
    fingerprint256: issued.fingerprint256,
    notBefore: issued.notBefore,
    notAfter: issued.notAfter,
  });
  // X509Certificate and DER inputs too
  t.ok(verifyClientCertificate(ca, new X509Certificate(issued.certPem), { isRevoked: never }).ok);
  t.ok(verifyClientCertificate(ca, new X509Certificate(issued.certPem).raw, { isRevoked: never }).ok);
});

t.test('a certificate from another CA is refused, even one with the same CA name', async (t) => {
  const foreign = issueClientCertificate(otherCa, relay.csrPem, { relayId: 'rly_1', orgId: 'org_1' });
  t.equal(codeOf(verifyClientCertificate(otherCa, foreign.certPem, { isRevoked: never })), 'ok', 'fine for its own CA');
  t.equal(codeOf(verifyClientCertificate(ca, foreign.certPem, { isRevoked: never })), 'PKI_ERR_WRONG_ISSUER');
  // Without an authorityKeyIdentifier the issuer names match, so only the signature tells.
  const noAkid = forgeLeaf({
    issuerKeyPem: otherPems.keyPem,
    issuerCertPem: otherPems.certPem,
    subjectKeyPem: relay.keyPem,
    extensions: [
      { name: 'extKeyUsage', clientAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 6, value: 'urn:svc:relay:rly_1' }, { type: 6, value: 'urn:svc:org:org_1' }] },
    ],
  });
  t.ok(new X509Certificate(noAkid).checkIssued(ca.certificate), 'checkIssued alone is fooled by the name');
  t.equal(codeOf(verifyClientCertificate(ca, noAkid, { isRevoked: never })), 'PKI_ERR_WRONG_ISSUER', 'the signature is not');
  const selfSigned = otherCa.certPem;
  t.equal(codeOf(verifyClientCertificate(ca, selfSigned, { isRevoked: never })), 'PKI_ERR_WRONG_ISSUER');
});

t.test('expired and not-yet-valid certificates are refused', async (t) => {
  const old = issue({ now: new Date(Date.now() - 60 * DAY), validityDays: 30 });
  t.equal(codeOf(verifyClientCertificate(ca, old.certPem, { isRevoked: never })), 'PKI_ERR_EXPIRED');
  const future = issue({ now: new Date(Date.now() + DAY) });
  t.equal(codeOf(verifyClientCertificate(ca, future.certPem, { isRevoked: never })), 'PKI_ERR_NOT_YET_VALID');

  const fresh = issue({ validityDays: 30 });
  t.equal(codeOf(verifyClientCertificate(ca, fresh.certPem, { isRevoked: never, now: new Date(Date.now() + 31 * DAY) })), 'PKI_ERR_EXPIRED');
  t.equal(codeOf(verifyClientCertificate(ca, fresh.certPem, { isRevoked: never, now: new Date(Date.now() - 10 * 60_000) })), 'PKI_ERR_NOT_YET_VALID');
  t.equal(codeOf(verifyClientCertificate(ca, fresh.certPem, { isRevoked: never, now: new Date(Date.now() - 4 * 60_000) })), 'ok', 'within the 5-minute back-dating');
  t.equal(codeOf(verifyClientCertificate(ca, fresh.certPem, { isRevoked: never, now: fresh.notAfter })), 'ok', 'notAfter itself is still valid');
});

t.test('a revoked certificate is refused; the check gets the documented formats', async (t) => {
  const revoked = issue();
  const other = issue();
  const seen: [string, string][] = [];
  const denySerials = new Set([revoked.serial]);
  const isRevoked = (serial: string, fingerprint: string) => {
    seen.push([serial, fingerprint]);
    return denySerials.has(serial);
  };
  t.equal(codeOf(verifyClientCertificate(ca, revoked.certPem, { isRevoked })), 'PKI_ERR_REVOKED');
  t.equal(codeOf(verifyClientCertificate(ca, other.certPem, { isRevoked })), 'ok', 'another certificate of the same relay is not');
  t.same(seen[0], [revoked.serial, revoked.fingerprint256]);
  for (const [serial, fingerprint] of seen) {
    t.match(serial, /^[0-9a-f]{32}$/, 'serial: lower-case hex, no colons');
    t.match(fingerprint, /^[0-9a-f]{64}$/, 'fingerprint: lower-case hex SHA-256, no colons');
  }
  const x = new X509Certificate(revoked.certPem);
  t.equal(serialOf(revoked.certPem), x.serialNumber.toLowerCase());
  t.equal(fingerprintOf(x), x.fingerprint256.replace(/:/g, '').toLowerCase());

  const denyFingerprints = new Set([other.fingerprint256]);
  t.equal(codeOf(verifyClientCertificate(ca, other.certPem, { isRevoked: (_s, f) => denyFingerprints.has(f) })), 'PKI_ERR_REVOKED', 'by fingerprint');

  t.throws(
    () => verifyClientCertificate(ca, other.certPem, { isRevoked: () => { throw new Error('store down'); } }),
    /store down/,
    'a failing deny-list check is not swallowed (fail closed)',
  );
  t.equal(codeOf(verifyClientCertificate(ca, issue({ now: new Date(Date.now() - 60 * DAY), validityDays: 1 }).certPem, { isRevoked: () => true })), 'PKI_ERR_EXPIRED', 'expiry is reported before revocation');
});

t.test('only client certificates with our identity pass', async (t) => {
  const server = issueServerCertificate(ca, { dnsNames: ['localhost'] });
  t.equal(codeOf(verifyClientCertificate(ca, server.certPem, { isRevoked: never })), 'PKI_ERR_NOT_CLIENT_CERT', 'a server certificate');
  t.equal(codeOf(verifyClientCertificate(ca, ca.certPem, { isRevoked: never })), 'PKI_ERR_NOT_CLIENT_CERT', 'the CA itself');

  // Hand-made with OUR key, so only the identity/usage is wrong.
  const subjectKeyPem = rsaKeyPem(2048);
  const sign = (extensions: object[]) => forgeLeaf({ issuerKeyPem: ourPems.keyPem, issuerCertPem: ourPems.certPem, subjectKeyPem, extensions });
  const noSan = sign([{ name: 'basicConstraints', cA: false }, { name: 'extKeyUsage', clientAuth: true }]);
  t.equal(codeOf(verifyClientCertificate(ca, noSan, { isRevoked: never })), 'PKI_ERR_NO_IDENTITY', 'no SAN at all');
  const twoRelays = sign([
    { name: 'extKeyUsage', clientAuth: true },
    { name: 'subjectAltName', altNames: [{ type: 6, value: 'urn:svc:relay:a' }, { type: 6, value: 'urn:svc:relay:b' }, { type: 6, value: 'urn:svc:org:o' }] },
  ]);
  t.equal(codeOf(verifyClientCertificate(ca, twoRelays, { isRevoked: never })), 'PKI_ERR_NO_IDENTITY', 'two relay URIs');
  const noOrg = sign([{ name: 'extKeyUsage', clientAuth: true }, { name: 'subjectAltName', altNames: [{ type: 6, value: 'urn:svc:relay:a' }] }]);
  t.equal(codeOf(verifyClientCertificate(ca, noOrg, { isRevoked: never })), 'PKI_ERR_NO_IDENTITY', 'no org URI');
  const smuggled = sign([
    { name: 'extKeyUsage', clientAuth: true },
    { name: 'subjectAltName', altNames: [{ type: 6, value: 'urn:x:", URI:urn:svc:relay:a, URI:urn:svc:org:o, DNS:"' }] },
  ]);
  t.equal(codeOf(verifyClientCertificate(ca, smuggled, { isRevoked: never })), 'PKI_ERR_NO_IDENTITY', 'URIs smuggled inside another SAN value are not ours');
  const badId = sign([
    { name: 'extKeyUsage', clientAuth: true },
    { name: 'subjectAltName', altNames: [{ type: 6, value: 'urn:svc:relay:a b' }, { type: 6, value: 'urn:svc:org:o' }] },
  ]);
  t.equal(codeOf(verifyClientCertificate(ca, badId, { isRevoked: never })), 'PKI_ERR_NO_IDENTITY', 'an id outside the alphabet');
  const noEku = sign([{ name: 'subjectAltName', altNames: [{ type: 6, value: 'urn:svc:relay:a' }, { type: 6, value: 'urn:svc:org:o' }] }]);
  t.equal(codeOf(verifyClientCertificate(ca, noEku, { isRevoked: never })), 'PKI_ERR_NOT_CLIENT_CERT', 'no extended key usage');
  const handMadeOk = sign([
    { name: 'extKeyUsage', clientAuth: true },
    { name: 'subjectAltName', altNames: [{ type: 6, value: 'urn:svc:relay:a' }, { type: 6, value: 'urn:svc:org:o' }, { type: 2, value: 'x.example' }] },
  ]);
  t.equal(codeOf(verifyClientCertificate(ca, handMadeOk, { isRevoked: never })), 'ok', 'the check itself passes a well-formed one');
});

t.test('garbage is PKI_ERR_CERT_INVALID, never an exception', async (t) => {
  t.equal(codeOf(verifyClientCertificate(ca, 'not a certificate', { isRevoked: never })), 'PKI_ERR_CERT_INVALID');
  t.equal(codeOf(verifyClientCertificate(ca, relay.csrPem, { isRevoked: never })), 'PKI_ERR_CERT_INVALID');
  t.equal(codeOf(verifyClientCertificate(ca, Buffer.from([1, 2, 3]), { isRevoked: never })), 'PKI_ERR_CERT_INVALID');
});

t.test('identityOf reads our SAN URIs from a PEM or an X509Certificate', async (t) => {
  const issued = issueClientCertificate(ca, relay.csrPem, { relayId: 'rly_9-a.b', orgId: 'org_42' });
  const fromPem = identityOf(issued.certPem);
  const fromX509 = identityOf(new X509Certificate(issued.certPem));
  t.same(fromPem, fromX509);
  t.equal(fromPem.relayId, 'rly_9-a.b');
  t.equal(fromPem.orgId, 'org_42');
  t.equal(fromPem.notAfter.getTime() - fromPem.notBefore.getTime(), 30 * DAY + 5 * 60_000);
  t.ok(Object.isFrozen(fromPem));
  t.throws(() => identityOf('nope'), { code: 'PKI_ERR_CERT_INVALID' });
  t.throws(() => identityOf(ca.certPem), { code: 'PKI_ERR_NO_IDENTITY' });
});

t.test('replica certificates: accepted as replicas only, and nothing else passes as one', async (t) => {
  const replica = issueReplicaCertificate(ca, { replicaId: 'rep_1' });
  const ok = verifyReplicaCertificate(ca, replica.certPem);
  t.same(ok.ok && { id: ok.replicaId, serial: ok.serial }, { id: 'rep_1', serial: replica.serial }, 'our replica certificate names its replica');
  t.match(new X509Certificate(replica.certPem).subjectAltName, /^URI:urn:svc:replica:rep_1$/, 'one SAN URI, the replica');
  const asRelay = verifyClientCertificate(ca, replica.certPem, { isRevoked: never });
  t.equal(!asRelay.ok && asRelay.code, 'PKI_ERR_NO_IDENTITY', 'a replica certificate never opens a tunnel as a relay');
  const relayCert = issue();
  const asReplica = verifyReplicaCertificate(ca, relayCert.certPem);
  t.equal(!asReplica.ok && asReplica.code, 'PKI_ERR_NO_IDENTITY', "a relay's certificate is never a replica's");
  const foreign = verifyReplicaCertificate(ca, issueReplicaCertificate(otherCa, { replicaId: 'rep_1' }).certPem);
  t.equal(!foreign.ok && foreign.code, 'PKI_ERR_WRONG_ISSUER', 'another CA of the same name is refused');
  const old = issueReplicaCertificate(ca, { replicaId: 'rep_1', now: new Date(Date.now() - 30 * DAY), validityDays: 7 });
  const expired = verifyReplicaCertificate(ca, old.certPem);
  t.equal(!expired.ok && expired.code, 'PKI_ERR_EXPIRED');
  const server = issueServerCertificate(ca, { dnsNames: ['localhost'] });
  const notClient = verifyReplicaCertificate(ca, server.certPem);
  t.equal(!notClient.ok && notClient.code, 'PKI_ERR_NOT_CLIENT_CERT', 'a server certificate is not a client one');
  t.equal(verifyReplicaCertificate(ca, 'not a certificate').ok, false);
  t.throws(() => issueReplicaCertificate(ca, { replicaId: 'bad id/..' }), 'replica ids are checked like relay ids');
});
