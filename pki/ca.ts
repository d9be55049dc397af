/**
 * The control plane's certificate authority: generated once into a directory (key 0600,
 * certificate 0644) and loaded from there on every later start.
 *
 * The CA key is RSA 3072 by default (about 128-bit security, NIST SP 800-57, good past 2030; it is
 * made once, so the extra generation time — about a second — costs nothing, and node:crypto signs each
 * certificate with it in a few milliseconds). Issued relay and listener keys are RSA 2048.
 */
import { createPrivateKey, randomBytes, X509Certificate, type KeyObject } from 'node:crypto';
import { chmodSync, existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import forge from 'node-forge';
import { PkiError } from './errors.js';
import {
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

/** File names inside the CA directory. */
export const CA_KEY_FILE = 'ca-key.pem';
export const CA_CERT_FILE = 'ca-cert.pem';

export const DEFAULT_CA_KEY_BITS = 3072;
export const DEFAULT_CA_VALIDITY_DAYS = 3650;
export const DEFAULT_CA_COMMON_NAME = 'svc relay CA';

/**
 * A loaded CA. Its private key is deliberately not a property (it lives in a module-private
 * WeakMap), so logging or serializing a `Ca` can never leak it.
 */
export interface Ca {
  /** The CA certificate, PEM: what relays pin (`ca_certificate_pem`) and what the listener trusts. */
  readonly certPem: string;
  readonly certificate: X509Certificate;
  /** Lower-case hex, no colons. */
  readonly serial: string;
  /** Lower-case hex SHA-256 of the DER, no colons. */
  readonly fingerprint256: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** The directory it was loaded from or created in, if any. */
  readonly dir: string | undefined;
}

export interface CaOptions {
  /** RSA modulus length of a newly created CA key: 2048, 3072 (default) or 4096. */
  keyBits?: number;
  /** Subject CN of a newly created CA. Default "svc relay CA". */
  commonName?: string;
  /** Validity of a newly created CA certificate, in days. Default 3650. */
  validityDays?: number;
  /** Clock for creation (tests). */
  now?: Date;
}

interface CaSecrets {
  readonly forgeKey: forge.pki.rsa.PrivateKey;
  readonly forgeCert: forge.pki.Certificate;
  readonly keyObject: KeyObject;
}

const secrets = new WeakMap<Ca, CaSecrets>();

/** pki/-internal: the signing material of a CA. */
export function caSecrets(ca: Ca): CaSecrets {
  const s = secrets.get(ca);
  if (!s) throw new PkiError('PKI_ERR_INVALID_OPTIONS', 'not a CA made by pki/ (use loadOrCreateCa, createCa or caFromPem)');
  return s;
}

/** Makes a new self-signed CA and returns its PEMs (the key as unencrypted PKCS#8). Nothing is written. */
export function generateCaPem(options: CaOptions = {}): { keyPem: string; certPem: string } {
  const bits = assertKeyBits(options.keyBits ?? DEFAULT_CA_KEY_BITS, [2048, 3072, 4096]);
  const days = assertValidityDays(options.validityDays ?? DEFAULT_CA_VALIDITY_DAYS, 36500);
  const now = assertNow(options.now ?? new Date());
  const commonName = options.commonName ?? DEFAULT_CA_COMMON_NAME;
  if (typeof commonName !== 'string' || commonName.length < 1 || commonName.length > 64) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', 'commonName must be 1 to 64 characters');
  }

  const { keyPem, publicKeyPem } = generateRsaKeyPem(bits);
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(publicKeyPem);
  cert.serialNumber = forgeSerial(randomSerialHex());
  cert.validity.notBefore = new Date(now.getTime() - CLOCK_SKEW_MS);
  cert.validity.notAfter = new Date(now.getTime() + days * DAY_MS);
  const name = [
    { name: 'commonName', value: commonName, valueTagClass: UTF8_STRING },
    { name: 'organizationName', value: 'svc', valueTagClass: UTF8_STRING },
  ];
  cert.setSubject(name);
  cert.setIssuer(name);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(forge.pki.privateKeyFromPem(keyPem), forge.md.sha256.create());
  return { keyPem, certPem: forge.pki.certificateToPem(cert).replace(/\r\n/g, '\n') };
}

/** Loads a CA from its PEMs, checking that the key is RSA, matches the certificate, and the certificate is a CA. */
export function caFromPem(pems: { keyPem: string; certPem: string }, dir?: string): Ca {
  let keyObject: KeyObject;
  let certificate: X509Certificate;
  try {
    keyObject = createPrivateKey(pems.keyPem);
    certificate = new X509Certificate(pems.certPem);
  } catch (err) {
    throw new PkiError('PKI_ERR_CA_LOAD', `the CA key or certificate does not parse: ${(err as Error).message}`, { cause: err });
  }
  if (keyObject.asymmetricKeyType !== 'rsa') {
    throw new PkiError('PKI_ERR_CA_LOAD', `the CA key must be RSA (node-forge signs with RSA only), not ${String(keyObject.asymmetricKeyType)}`);
  }
  if (!certificate.checkPrivateKey(keyObject)) {
    throw new PkiError('PKI_ERR_CA_LOAD', 'the CA key does not match the CA certificate');
  }
  if (!certificate.ca) throw new PkiError('PKI_ERR_CA_LOAD', 'the CA certificate is not a CA certificate (basicConstraints CA:FALSE)');
  if (!certificate.verify(certificate.publicKey)) throw new PkiError('PKI_ERR_CA_LOAD', 'the CA certificate is not self-signed by its key');

  let forgeKey: forge.pki.rsa.PrivateKey;
  let forgeCert: forge.pki.Certificate;
  try {
    forgeKey = forge.pki.privateKeyFromPem(keyObject.export({ type: 'pkcs8', format: 'pem' }).toString());
    forgeCert = forge.pki.certificateFromPem(pems.certPem);
  } catch (err) {
    throw new PkiError('PKI_ERR_CA_LOAD', `node-forge cannot read the CA: ${(err as Error).message}`, { cause: err });
  }

  const ca: Ca = Object.freeze({
    certPem: certificate.toString(),
    certificate,
    serial: serialOfX509(certificate),
    fingerprint256: fingerprintOfX509(certificate),
    notBefore: parseOpenSslDate(certificate.validFrom),
    notAfter: parseOpenSslDate(certificate.validTo),
    dir,
  });
  secrets.set(ca, Object.freeze({ forgeKey, forgeCert, keyObject }));
  return ca;
}

/** A new CA held in memory only (tests, tools). */
export function createCa(options: CaOptions = {}): Ca {
  return caFromPem(generateCaPem(options));
}

/**
 * The CA in `dir`: loaded when both files exist; created (directory 0700 if new, key 0600,
 * certificate 0644) when neither does. Exactly one of the two present is refused
 * (`PKI_ERR_CA_LOAD`) rather than overwritten: a CA key is never replaced silently. Files are
 * written to temporary names and hard-linked into place, so a concurrent creator or a crash
 * can never leave a half-written key under the real name, and an existing key is never clobbered.
 */
export function loadOrCreateCa(dir: string, options: CaOptions = {}): Ca {
  const keyPath = join(dir, CA_KEY_FILE);
  const certPath = join(dir, CA_CERT_FILE);
  const hasKey = existsSync(keyPath);
  const hasCert = existsSync(certPath);
  if (hasKey && hasCert) return loadCa(dir);
  if (hasKey !== hasCert) {
    throw new PkiError(
      'PKI_ERR_CA_LOAD',
      `the CA directory ${dir} holds ${hasKey ? CA_KEY_FILE : CA_CERT_FILE} but not ${hasKey ? CA_CERT_FILE : CA_KEY_FILE}; restore it or remove both`,
    );
  }

  const pems = generateCaPem(options);
  const ca = caFromPem(pems, dir); // check before anything reaches the disk
  try {
    writeCaFiles(dir, keyPath, certPath, pems);
  } catch (err) {
    if (err instanceof PkiError) throw err;
    throw new PkiError('PKI_ERR_CA_LOAD', `cannot write the CA into ${dir}: ${(err as Error).message}`, { cause: err });
  }
  return ca;
}

function writeCaFiles(dir: string, keyPath: string, certPath: string, pems: { keyPem: string; certPem: string }): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tag = `.tmp-${process.pid}-${randomBytes(6).toString('hex')}`;
  const keyTmp = keyPath + tag;
  const certTmp = certPath + tag;
  try {
    writeFileSync(keyTmp, pems.keyPem, { mode: 0o600, flag: 'wx' });
    chmodSync(keyTmp, 0o600);
    writeFileSync(certTmp, pems.certPem, { mode: 0o644, flag: 'wx' });
    chmodSync(certTmp, 0o644); // the umask may have narrowed it
    try {
      linkSync(keyTmp, keyPath);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
        throw new PkiError('PKI_ERR_CA_LOAD', `another process created the CA in ${dir} at the same time; start again to load it`, { cause: err });
      }
      throw err;
    }
    linkSync(certTmp, certPath);
  } finally {
    for (const tmp of [keyTmp, certTmp]) {
      try {
        unlinkSync(tmp);
      } catch {
        // already gone
      }
    }
  }
}

/** Loads the CA from `dir` (both files must exist). */
export function loadCa(dir: string): Ca {
  let keyPem: string;
  let certPem: string;
  try {
    keyPem = readFileSync(join(dir, CA_KEY_FILE), 'utf8');
    certPem = readFileSync(join(dir, CA_CERT_FILE), 'utf8');
  } catch (err) {
    throw new PkiError('PKI_ERR_CA_LOAD', `cannot read the CA from ${dir}: ${(err as Error).message}`, { cause: err });
  }
  return caFromPem({ keyPem, certPem }, dir);
}
