/**
 * Issuing certificates with our CA: relay client certificates from a CSR, and the tunnel
 * listener's server certificate with a fresh key. Built by node-forge, signed (SHA-256) by
 * node:crypto, checked with node:crypto before they are handed out.
 */
import { sign as cryptoSign, X509Certificate, type KeyObject } from 'node:crypto';
import forge from 'node-forge';
import { caSecrets, type Ca } from './ca.js';
import { checkCsr } from './csr.js';
import { PkiError } from './errors.js';
import {
  assertDnsName,
  assertId,
  assertIpAddress,
  assertKeyBits,
  assertNow,
  assertValidityDays,
  CLOCK_SKEW_MS,
  DAY_MS,
  fingerprintOfX509,
  forgeSerial,
  generateRsaKeyPem,
  parseOpenSslDate,
  randomSerialHex,
  serialOfX509,
  UTF8_STRING,
} from './internal.js';

export const DEFAULT_CLIENT_VALIDITY_DAYS = 30;
export const DEFAULT_SERVER_VALIDITY_DAYS = 90;
/** Longest validity we issue; a certificate never outlives the CA either. */
export const MAX_LEAF_VALIDITY_DAYS = 825;

export const RELAY_URI_PREFIX = 'urn:svc:relay:';
/** SAN URI of a control-plane replica's client certificate (replicas forwarding relay queries to each other) */
export const REPLICA_URI_PREFIX = 'urn:svc:replica:';
export const DEFAULT_REPLICA_VALIDITY_DAYS = 7;
export const ORG_URI_PREFIX = 'urn:svc:org:';

/** A certificate just issued. `serial` and `fingerprint256` are in the revocation formats. */
export interface IssuedCertificate {
  readonly certPem: string;
  /** Lower-case hex, no colons (32 digits for the serials we make). */
  readonly serial: string;
  /** Lower-case hex SHA-256 of the DER, no colons. */
  readonly fingerprint256: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
}

export interface ClientCertificateOptions {
  /** Becomes subject CN and SAN URI urn:svc:relay:<relayId>. [A-Za-z0-9][A-Za-z0-9._-]{0,63}. */
  relayId: string;
  /** Becomes subject O and SAN URI urn:svc:org:<orgId>. Same alphabet. */
  orgId: string;
  /** Default 30. notBefore is back-dated 5 minutes for clock skew. */
  validityDays?: number;
  /** Issuance time (tests; default now). */
  now?: Date;
}

export interface ServerCertificateOptions {
  /** SAN dNSName entries, e.g. ["localhost"]. */
  dnsNames?: readonly string[];
  /** SAN iPAddress entries, v4 or v6, e.g. ["127.0.0.1", "::1"]. */
  ipAddresses?: readonly string[];
  /** Subject CN; default the first DNS name, else the first IP address. */
  commonName?: string;
  /** Default 90. */
  validityDays?: number;
  /** Default 2048. */
  keyBits?: number;
  now?: Date;
}

/**
 * Issues a relay's client certificate for the key in `csrPem`. The identity is ours: the CSR's
 * subject and its requested extensions are ignored; only its (verified, RSA >= 2048) public key
 * is used. Throws a {@link PkiError} (`PKI_ERR_CSR_*`, `PKI_ERR_INVALID_OPTIONS`, `PKI_ERR_CA_EXPIRED`).
 */
export function issueClientCertificate(ca: Ca, csrPem: string, options: ClientCertificateOptions): IssuedCertificate {
  const relayId = assertId('relayId', options.relayId);
  const orgId = assertId('orgId', options.orgId);
  const days = assertValidityDays(options.validityDays ?? DEFAULT_CLIENT_VALIDITY_DAYS, MAX_LEAF_VALIDITY_DAYS);
  const now = assertNow(options.now ?? new Date());
  const csr = checkCsr(csrPem);
  return sign(ca, {
    publicKey: csr.publicKey,
    subject: [
      // UTF8String: ids may hold '_', which PrintableString (forge's default) does not allow.
      { name: 'commonName', value: relayId, valueTagClass: UTF8_STRING },
      { name: 'organizationName', value: orgId, valueTagClass: UTF8_STRING },
    ],
    extensions: [
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', clientAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 6, value: RELAY_URI_PREFIX + relayId },
          { type: 6, value: ORG_URI_PREFIX + orgId },
        ],
      },
    ],
    days,
    now,
  });
}

/**
 * Issues a control-plane replica's client certificate with a fresh RSA 2048 key: subject
 * CN=svc replica <replicaId>, EKU clientAuth, exactly one SAN URI urn:svc:replica:<replicaId>
 * and no relay or organization identity, so it can never pass as a relay and a relay's
 * certificate never passes as a replica ({@link verifyReplicaCertificate}).
 */
export function issueReplicaCertificate(ca: Ca, options: { replicaId: string; validityDays?: number; now?: Date }): IssuedCertificate & { readonly keyPem: string } {
  const replicaId = assertId('replicaId', options.replicaId);
  const days = assertValidityDays(options.validityDays ?? DEFAULT_REPLICA_VALIDITY_DAYS, MAX_LEAF_VALIDITY_DAYS);
  const now = assertNow(options.now ?? new Date());
  const { keyPem, publicKeyPem } = generateRsaKeyPem(2048);
  const issued = sign(ca, {
    publicKey: forge.pki.publicKeyFromPem(publicKeyPem),
    subject: [{ name: 'commonName', value: `svc replica ${replicaId}`, valueTagClass: UTF8_STRING }],
    extensions: [
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', clientAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 6, value: REPLICA_URI_PREFIX + replicaId }] },
    ],
    days,
    now,
  });
  return Object.freeze({ ...issued, keyPem });
}

/**
 * Issues the tunnel listener's server certificate with a fresh RSA key (node:crypto). Returns the
 * key (unencrypted PKCS#8 PEM) with the certificate.
 */
export function issueServerCertificate(ca: Ca, options: ServerCertificateOptions): IssuedCertificate & { readonly keyPem: string } {
  const dnsNames = (options.dnsNames ?? []).map(assertDnsName);
  const ipAddresses = (options.ipAddresses ?? []).map(assertIpAddress);
  if (dnsNames.length + ipAddresses.length === 0) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', 'a server certificate needs at least one DNS name or IP address');
  }
  const commonName = options.commonName ?? dnsNames[0] ?? ipAddresses[0] ?? '';
  if (typeof commonName !== 'string' || commonName.length < 1 || commonName.length > 64) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', 'commonName must be 1 to 64 characters');
  }
  const days = assertValidityDays(options.validityDays ?? DEFAULT_SERVER_VALIDITY_DAYS, MAX_LEAF_VALIDITY_DAYS);
  const now = assertNow(options.now ?? new Date());
  const bits = assertKeyBits(options.keyBits ?? 2048, [2048, 3072, 4096]);
  const { keyPem, publicKeyPem } = generateRsaKeyPem(bits);
  const issued = sign(ca, {
    publicKey: forge.pki.publicKeyFromPem(publicKeyPem),
    subject: [{ name: 'commonName', value: commonName, valueTagClass: UTF8_STRING }],
    extensions: [
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [...dnsNames.map((value) => ({ type: 2, value })), ...ipAddresses.map((ip) => ({ type: 7, ip }))],
      },
    ],
    days,
    now,
  });
  return Object.freeze({ ...issued, keyPem });
}

interface Leaf {
  publicKey: forge.pki.rsa.PublicKey;
  subject: forge.pki.CertificateField[];
  extensions: object[];
  days: number;
  now: Date;
}

/**
 * What forge's `cert.sign(key, sha256)` does, with the RSA operation (PKCS#1 v1.5, SHA-256) done by
 * node:crypto: forge's JavaScript RSA took 100-250 ms of the event loop per certificate with a 3072
 * bit CA key, and any agent key may ask for certificates at the API's rate limit (operators' renew).
 * The signature is the same bytes (PKCS#1 v1.5 is deterministic).
 */
function signNatively(cert: forge.pki.Certificate, key: KeyObject): void {
  cert.signatureOid = cert.siginfo.algorithmOid = forge.pki.oids['sha256WithRSAEncryption'] as string;
  // (in forge since 0.6, not in @types/node-forge)
  cert.tbsCertificate = (forge.pki as unknown as { getTBSCertificate(c: forge.pki.Certificate): forge.asn1.Asn1 }).getTBSCertificate(cert);
  const tbs = Buffer.from(forge.asn1.toDer(cert.tbsCertificate).getBytes(), 'binary');
  cert.signature = cryptoSign('sha256', tbs, key).toString('binary');
}

function sign(ca: Ca, leaf: Leaf): IssuedCertificate {
  const { forgeCert, keyObject } = caSecrets(ca);
  const nowMs = leaf.now.getTime();
  if (nowMs < ca.notBefore.getTime() || nowMs >= ca.notAfter.getTime()) {
    throw new PkiError('PKI_ERR_CA_EXPIRED', `the CA is valid from ${ca.notBefore.toISOString()} to ${ca.notAfter.toISOString()}; it cannot issue at ${leaf.now.toISOString()}`);
  }

  const cert = forge.pki.createCertificate();
  cert.publicKey = leaf.publicKey;
  cert.serialNumber = forgeSerial(randomSerialHex());
  cert.validity.notBefore = new Date(Math.max(nowMs - CLOCK_SKEW_MS, ca.notBefore.getTime()));
  cert.validity.notAfter = new Date(Math.min(nowMs + leaf.days * DAY_MS, ca.notAfter.getTime()));
  cert.setSubject(leaf.subject);
  cert.setIssuer(forgeCert.subject.attributes);

  const caSki = (forgeCert.getExtension('subjectKeyIdentifier') as { subjectKeyIdentifier?: string } | undefined)?.subjectKeyIdentifier;
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    ...leaf.extensions,
    { name: 'subjectKeyIdentifier' },
    {
      name: 'authorityKeyIdentifier',
      keyIdentifier: caSki ? forge.util.hexToBytes(caSki) : forgeCert.generateSubjectKeyIdentifier().getBytes(),
    },
  ]);
  signNatively(cert, keyObject);
  const x509 = new X509Certificate(forge.pki.certificateToPem(cert));
  if (!x509.checkIssued(ca.certificate) || !x509.verify(ca.certificate.publicKey)) {
    // Never expected; guards against a forge regression handing out a certificate we would refuse.
    throw new Error('pki: the certificate just issued does not verify against the CA');
  }
  return Object.freeze({
    certPem: x509.toString(), // node's PEM: LF line ends (forge writes CRLF)
    serial: serialOfX509(x509),
    fingerprint256: fingerprintOfX509(x509),
    notBefore: parseOpenSslDate(x509.validFrom),
    notAfter: parseOpenSslDate(x509.validTo),
  });
}
