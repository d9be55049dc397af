/**
 * Certification requests: made on the relay (key from node:crypto, CSR built and signed by
 * node-forge) and checked by the CA before it issues anything.
 */
import { constants, createPrivateKey, createPublicKey, verify as cryptoVerify } from 'node:crypto';
import forge from 'node-forge';
import { PkiError } from './errors.js';
import { assertKeyBits, generateRsaKeyPem, UTF8_STRING } from './internal.js';

export const MIN_CSR_KEY_BITS = 2048;
export const MAX_CSR_KEY_BITS = 8192;
export const DEFAULT_RELAY_KEY_BITS = 2048;

const RSA_ENCRYPTION_OID = '1.2.840.113549.1.1.1';
/** RSA PKCS#1 v1.5 with SHA-256, -384, -512: the CSR signatures we accept. */
const ACCEPTED_CSR_SIGNATURES: ReadonlyMap<string, string> = new Map([
  ['1.2.840.113549.1.1.11', 'sha256WithRSAEncryption'],
  ['1.2.840.113549.1.1.12', 'sha384WithRSAEncryption'],
  ['1.2.840.113549.1.1.13', 'sha512WithRSAEncryption'],
]);
/** the digest of each accepted signature, as node:crypto names it */
const CSR_SIGNATURE_DIGESTS: ReadonlyMap<string, string> = new Map([
  ['1.2.840.113549.1.1.11', 'sha256'],
  ['1.2.840.113549.1.1.12', 'sha384'],
  ['1.2.840.113549.1.1.13', 'sha512'],
]);

export interface CsrOptions {
  /** Subject CN of the request. Informative only: the CA never copies it. Default "svc-relay". */
  commonName?: string;
}

/** Builds and signs (SHA-256) a PKCS#10 request for an existing RSA private key (PEM, PKCS#1 or PKCS#8). */
export function createCsr(keyPem: string, options: CsrOptions = {}): string {
  const commonName = options.commonName ?? 'svc-relay';
  if (typeof commonName !== 'string' || commonName.length < 1 || commonName.length > 64) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', 'commonName must be 1 to 64 characters');
  }
  let key: forge.pki.rsa.PrivateKey;
  try {
    const keyObject = createPrivateKey(keyPem);
    if (keyObject.asymmetricKeyType !== 'rsa') throw new Error(`the key is ${String(keyObject.asymmetricKeyType)}, not RSA`);
    key = forge.pki.privateKeyFromPem(keyObject.export({ type: 'pkcs8', format: 'pem' }).toString());
  } catch (err) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', `not an unencrypted RSA private key: ${(err as Error).message}`, { cause: err });
  }
  const csr = forge.pki.createCertificationRequest();
  csr.publicKey = forge.pki.setRsaPublicKey(key.n, key.e);
  csr.setSubject([{ name: 'commonName', value: commonName, valueTagClass: UTF8_STRING }]);
  csr.sign(key, forge.md.sha256.create());
  return forge.pki.certificationRequestToPem(csr).replace(/\r\n/g, '\n');
}

/** The relay side of enrollment: a fresh RSA key (node:crypto) and a CSR for it (node-forge). */
export function generateKeyAndCsr(options: CsrOptions & { keyBits?: number } = {}): { keyPem: string; csrPem: string } {
  const bits = assertKeyBits(options.keyBits ?? DEFAULT_RELAY_KEY_BITS, [2048, 3072, 4096]);
  const { keyPem } = generateRsaKeyPem(bits);
  return { keyPem, csrPem: createCsr(keyPem, options) };
}

/** A CSR that passed every check: only its public key is used by the CA. */
export interface CheckedCsr {
  readonly publicKey: forge.pki.rsa.PublicKey;
  readonly keyBits: number;
  /** What the requester asked for, for logs only: never copied into a certificate. */
  readonly requestedSubject: string;
}

/**
 * Parses a PEM CSR and checks it: PKCS#10, RSA key of 2048..8192 bits with an ordinary public
 * exponent, signed with RSA PKCS#1 v1.5 + SHA-256/384/512, and the signature verifies with the
 * CSR's own key (proof of possession). Throws a {@link PkiError} otherwise.
 */
export function checkCsr(csrPem: string): CheckedCsr {
  if (typeof csrPem !== 'string') throw new PkiError('PKI_ERR_CSR_INVALID', 'the CSR must be a PEM string');
  let der: string;
  try {
    const blocks = forge.pem.decode(csrPem);
    const block = blocks[0];
    if (blocks.length !== 1 || !block) throw new Error(`expected exactly one PEM block, found ${blocks.length}`);
    if (block.type !== 'CERTIFICATE REQUEST' && block.type !== 'NEW CERTIFICATE REQUEST') {
      throw new Error(`the PEM block is a ${block.type}, not a CERTIFICATE REQUEST`);
    }
    if (block.procType?.type === 'ENCRYPTED') throw new Error('the PEM block is encrypted');
    der = block.body;
  } catch (err) {
    throw new PkiError('PKI_ERR_CSR_INVALID', `not a PEM certification request: ${(err as Error).message}`, { cause: err });
  }

  let asn: forge.asn1.Asn1;
  let keyAlgorithmOid: string;
  let spkiDer: Buffer;
  try {
    asn = forge.asn1.fromDer(der, true); // strict; forge also insists that every byte is parsed
    // CertificationRequest ::= SEQUENCE { certificationRequestInfo SEQUENCE { version, subject,
    //   subjectPKInfo SEQUENCE { algorithm SEQUENCE { OID, params }, BIT STRING }, attributes }, ... }
    const cri = childAt(asn, 0);
    const spki = childAt(cri, 2);
    const algorithm = childAt(spki, 0);
    const oid = childAt(algorithm, 0);
    if (oid.type !== forge.asn1.Type.OID || typeof oid.value !== 'string') throw new Error('no key algorithm OID');
    keyAlgorithmOid = forge.asn1.derToOid(forge.util.createBuffer(oid.value));
    spkiDer = Buffer.from(forge.asn1.toDer(spki).getBytes(), 'binary');
  } catch (err) {
    throw new PkiError('PKI_ERR_CSR_INVALID', `not a PKCS#10 certification request: ${(err as Error).message}`, { cause: err });
  }
  if (keyAlgorithmOid !== RSA_ENCRYPTION_OID) {
    throw new PkiError('PKI_ERR_CSR_KEY_NOT_RSA', `the CSR's key algorithm is ${keyAlgorithmOid}; only RSA (${RSA_ENCRYPTION_OID}) is accepted`);
  }

  let csr: forge.pki.CertificateSigningRequest;
  try {
    csr = forge.pki.certificationRequestFromAsn1(asn, false) as forge.pki.CertificateSigningRequest;
  } catch (err) {
    throw new PkiError('PKI_ERR_CSR_INVALID', `not a PKCS#10 certification request: ${(err as Error).message}`, { cause: err });
  }
  const publicKey = csr.publicKey as forge.pki.rsa.PublicKey | null;
  if (!publicKey) throw new PkiError('PKI_ERR_CSR_INVALID', 'the CSR has no public key');

  const keyBits = publicKey.n.bitLength();
  if (keyBits < MIN_CSR_KEY_BITS) {
    throw new PkiError('PKI_ERR_CSR_KEY_TOO_SMALL', `the CSR's RSA key has ${keyBits} bits; at least ${MIN_CSR_KEY_BITS} are required`);
  }
  const e = publicKey.e;
  if (keyBits > MAX_CSR_KEY_BITS || e.bitLength() > 32 || !e.testBit(0) || e.bitLength() < 2) {
    throw new PkiError(
      'PKI_ERR_CSR_KEY_UNSUPPORTED',
      `the CSR's RSA key (${keyBits} bits, exponent of ${e.bitLength()} bits) is outside 2048..${MAX_CSR_KEY_BITS} bits with an odd exponent of at most 32 bits`,
    );
  }

  const signatureOid = csr.signatureOid ?? '';
  if (!ACCEPTED_CSR_SIGNATURES.has(signatureOid)) {
    throw new PkiError(
      'PKI_ERR_CSR_WEAK_SIGNATURE',
      `the CSR is signed with ${forge.pki.oids[signatureOid] ?? signatureOid}; accepted: ${[...ACCEPTED_CSR_SIGNATURES.values()].join(', ')}`,
    );
  }

  let verified = false;
  try {
    // the DER of the CertificationRequestInfo exactly as it was received, verified by node:crypto:
    // forge's JavaScript RSA took 20-45 ms of the event loop for an 8192-bit key with a 32-bit
    // exponent, and an agent key may send CSRs at the API's rate limit
    const info = (csr as unknown as { certificationRequestInfo: forge.asn1.Asn1 }).certificationRequestInfo;
    verified = cryptoVerify(
      CSR_SIGNATURE_DIGESTS.get(signatureOid) ?? 'sha256',
      Buffer.from(forge.asn1.toDer(info).getBytes(), 'binary'),
      { key: createPublicKey({ key: spkiDer, format: 'der', type: 'spki' }), padding: constants.RSA_PKCS1_PADDING },
      Buffer.from(String(csr.signature), 'binary'),
    );
  } catch {
    verified = false;
  }
  if (!verified) {
    throw new PkiError('PKI_ERR_CSR_SIGNATURE', "the CSR's signature does not verify with its public key");
  }

  const requestedSubject = csr.subject.attributes
    .map((a) => `${a.shortName ?? a.name ?? a.type ?? '?'}=${typeof a.value === 'string' ? a.value : '?'}`)
    .join(',');
  return Object.freeze({ publicKey, keyBits, requestedSubject });
}

function childAt(node: forge.asn1.Asn1, index: number): forge.asn1.Asn1 {
  if (!Array.isArray(node.value)) throw new Error('unexpected ASN.1 structure');
  const child = node.value[index];
  if (!child) throw new Error('unexpected ASN.1 structure');
  return child;
}
