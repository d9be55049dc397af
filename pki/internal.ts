/**
 * Helpers shared by the files of pki/ and not exported from its index.
 */
import { createHash, generateKeyPairSync, randomBytes, type X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import forge from 'node-forge';
import { PkiError } from './errors.js';

/**
 * Tag for name attributes encoded as UTF8String (forge's default, PrintableString, has no '_').
 * @types/node-forge declares `valueTagClass` as an asn1.Class, but forge uses it as the value's
 * universal tag (an asn1.Type), hence the cast.
 */
export const UTF8_STRING = forge.asn1.Type.UTF8 as unknown as forge.asn1.Class;

/** Certificates are back-dated by this much so that a peer whose clock is a little behind accepts them. */
export const CLOCK_SKEW_MS = 5 * 60 * 1000;
export const DAY_MS = 86_400_000;

/** Relay and organization ids: what may sit in a CN and after `urn:svc:relay:` / `urn:svc:org:`. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function assertId(what: string, id: unknown): string {
  if (typeof id !== 'string' || !ID_PATTERN.test(id)) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', `${what} must match ${ID_PATTERN} (got ${JSON.stringify(id)})`);
  }
  return id;
}

export function assertValidityDays(days: unknown, max: number): number {
  if (typeof days !== 'number' || !Number.isFinite(days) || days <= 0 || days > max) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', `validityDays must be a number in (0, ${max}] (got ${String(days)})`);
  }
  return days;
}

export function assertNow(now: unknown): Date {
  if (!(now instanceof Date) || Number.isNaN(now.getTime())) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', 'now must be a valid Date');
  }
  return now;
}

export function assertKeyBits(bits: unknown, allowed: readonly number[]): number {
  if (typeof bits !== 'number' || !allowed.includes(bits)) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', `keyBits must be one of ${allowed.join(', ')} (got ${String(bits)})`);
  }
  return bits;
}

/** A fresh RSA key pair from node:crypto (forge's own key generation is far slower). */
export function generateRsaKeyPem(bits: number): { keyPem: string; publicKeyPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: bits,
    publicExponent: 0x10001,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return { keyPem: privateKey, publicKeyPem: publicKey };
}

/**
 * A random 128-bit positive serial, as 32 lower-case hex digits: 16 random bytes with the top bit
 * set, so the value is always exactly 128 bits long (2^127 <= s < 2^128, 127 random bits) and its
 * canonical hex form always has 32 digits.
 */
export function randomSerialHex(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) | 0x80;
  return bytes.toString('hex');
}

/** forge takes the serial as the hex of the DER INTEGER's content: a leading 00 keeps it positive. */
export function forgeSerial(serialHex: string): string {
  return /^[89a-f]/.test(serialHex) ? `00${serialHex}` : serialHex;
}

/** Canonical serial: lower-case hex, no colons, no leading zero bytes (what OpenSSL prints, lower-cased). */
export function serialOfX509(cert: X509Certificate): string {
  return cert.serialNumber.replace(/:/g, '').toLowerCase();
}

/** Canonical fingerprint: lower-case hex SHA-256 of the certificate's DER, no colons. */
export function fingerprintOfX509(cert: X509Certificate): string {
  return createHash('sha256').update(cert.raw).digest('hex');
}

/** node:crypto (Node 20) reports validity as OpenSSL text such as "Nov 22 17:46:14 2026 GMT". */
export function parseOpenSslDate(text: string): Date {
  const d = new Date(text);
  if (Number.isNaN(d.getTime())) throw new PkiError('PKI_ERR_CERT_INVALID', `unparseable certificate date ${JSON.stringify(text)}`);
  return d;
}

const DNS_NAME = /^(?=.{1,253}$)(\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

export function assertDnsName(name: unknown): string {
  if (typeof name !== 'string' || !DNS_NAME.test(name)) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', `not a DNS name: ${JSON.stringify(name)}`);
  }
  return name;
}

export function assertIpAddress(ip: unknown): string {
  if (typeof ip !== 'string' || isIP(ip) === 0) {
    throw new PkiError('PKI_ERR_INVALID_OPTIONS', `not an IP address: ${JSON.stringify(ip)}`);
  }
  return ip;
}
