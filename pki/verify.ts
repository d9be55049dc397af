/**
 * What the tunnel listener asks of a client certificate: who is it (our SAN URIs), and may it
 * connect (our CA, in its validity period, a client certificate, an identity, not revoked).
 *
 * Formats used for revocation (the deny list lives in the store, not here):
 * - serial: lower-case hex of the certificate's serial number, no colons, no leading zero bytes
 *   (32 digits for every serial we issue), e.g. "9f3c…";
 * - fingerprint256: lower-case hex SHA-256 of the certificate's DER, no colons (64 digits).
 */
import { X509Certificate } from 'node:crypto';
import type { Ca } from './ca.js';
import { PkiError, type PkiErrorCode } from './errors.js';
import { ORG_URI_PREFIX, RELAY_URI_PREFIX, REPLICA_URI_PREFIX } from './issue.js';
import { fingerprintOfX509, ID_PATTERN, parseOpenSslDate, serialOfX509 } from './internal.js';

const CLIENT_AUTH_OID = '1.3.6.1.5.5.7.3.2';

export interface RelayIdentity {
  readonly relayId: string;
  readonly orgId: string;
  /** Lower-case hex, no colons. */
  readonly serial: string;
  /** Lower-case hex SHA-256 of the DER, no colons. */
  readonly fingerprint256: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
}

/** The deny-list check the caller provides: true when the certificate is revoked. */
export type RevocationCheck = (serial: string, fingerprint256: string) => boolean;

export interface VerifyClientOptions {
  /** Clock (default now). */
  now?: Date;
  isRevoked: RevocationCheck;
}

export type ClientVerification =
  | { readonly ok: true; readonly identity: RelayIdentity }
  | { readonly ok: false; readonly code: PkiErrorCode; readonly message: string };

export type CertificateInput = string | Buffer | X509Certificate;

/** Parses a PEM string, DER buffer or X509Certificate. Throws `PKI_ERR_CERT_INVALID`. */
export function toX509(cert: CertificateInput): X509Certificate {
  if (cert instanceof X509Certificate) return cert;
  try {
    return new X509Certificate(cert);
  } catch (err) {
    throw new PkiError('PKI_ERR_CERT_INVALID', `not an X.509 certificate: ${(err as Error).message}`, { cause: err });
  }
}

/** Serial in the revocation format (lower-case hex, no colons). */
export function serialOf(cert: CertificateInput): string {
  return serialOfX509(toX509(cert));
}

/** Fingerprint in the revocation format (lower-case hex SHA-256 of the DER, no colons). */
export function fingerprintOf(cert: CertificateInput): string {
  return fingerprintOfX509(toX509(cert));
}

/**
 * The relay identity a certificate carries in OUR SAN URIs: exactly one `urn:svc:relay:<id>` and
 * exactly one `urn:svc:org:<id>`, each id matching [A-Za-z0-9][A-Za-z0-9._-]{0,63}. The subject
 * (CN/O) is not consulted. This does not check the issuer: use {@link verifyClientCertificate}
 * for anything presented by a peer. Throws `PKI_ERR_CERT_INVALID` or `PKI_ERR_NO_IDENTITY`.
 */
export function identityOf(cert: CertificateInput): RelayIdentity {
  const x509 = toX509(cert);
  const uris = subjectAltNameUris(x509);
  const relayIds = uris.filter((u) => u.startsWith(RELAY_URI_PREFIX)).map((u) => u.slice(RELAY_URI_PREFIX.length));
  const orgIds = uris.filter((u) => u.startsWith(ORG_URI_PREFIX)).map((u) => u.slice(ORG_URI_PREFIX.length));
  const relayId = relayIds[0];
  const orgId = orgIds[0];
  if (relayIds.length !== 1 || orgIds.length !== 1 || relayId === undefined || orgId === undefined) {
    throw new PkiError(
      'PKI_ERR_NO_IDENTITY',
      `expected one ${RELAY_URI_PREFIX} and one ${ORG_URI_PREFIX} SAN URI, found ${relayIds.length} and ${orgIds.length}`,
    );
  }
  if (!ID_PATTERN.test(relayId) || !ID_PATTERN.test(orgId)) {
    throw new PkiError('PKI_ERR_NO_IDENTITY', 'the SAN URIs do not hold well-formed relay and org ids');
  }
  return Object.freeze({
    relayId,
    orgId,
    serial: serialOfX509(x509),
    fingerprint256: fingerprintOfX509(x509),
    notBefore: parseOpenSslDate(x509.validFrom),
    notAfter: parseOpenSslDate(x509.validTo),
  });
}

/**
 * Decides whether a client certificate may open a tunnel. Checks, in order: parses
 * (`PKI_ERR_CERT_INVALID`), issued and signed by `ca` (`PKI_ERR_WRONG_ISSUER`), not a CA and has
 * the clientAuth EKU (`PKI_ERR_NOT_CLIENT_CERT`), carries our identity (`PKI_ERR_NO_IDENTITY`),
 * `now` within its validity (`PKI_ERR_NOT_YET_VALID`, `PKI_ERR_EXPIRED`), not on the caller's deny
 * list (`PKI_ERR_REVOKED`). Returns the identity or the first failing code; never throws for a bad
 * certificate (an exception from `isRevoked` propagates: fail closed).
 *
 * The TLS handshake (see tlsServerOptions) already refuses certificates not chaining to our CA;
 * call this after it, on `tlsSocket.getPeerX509Certificate()`, for identity and revocation.
 */
export function verifyClientCertificate(ca: Ca, cert: CertificateInput, options: VerifyClientOptions): ClientVerification {
  const now = options.now ?? new Date();
  let x509: X509Certificate;
  try {
    x509 = toX509(cert);
  } catch (err) {
    return refuse(err);
  }

  if (!issuedBy(ca, x509)) return { ok: false, code: 'PKI_ERR_WRONG_ISSUER', message: 'the certificate was not issued by our CA' };

  if (x509.ca) return { ok: false, code: 'PKI_ERR_NOT_CLIENT_CERT', message: 'a CA certificate is not a client certificate' };
  const eku = x509.keyUsage; // node:crypto's name for the extended key usage OIDs
  if (!Array.isArray(eku) || !eku.includes(CLIENT_AUTH_OID)) {
    return { ok: false, code: 'PKI_ERR_NOT_CLIENT_CERT', message: 'the certificate lacks the clientAuth extended key usage' };
  }

  let identity: RelayIdentity;
  try {
    identity = identityOf(x509);
  } catch (err) {
    return refuse(err);
  }

  if (now.getTime() < identity.notBefore.getTime()) {
    return { ok: false, code: 'PKI_ERR_NOT_YET_VALID', message: `the certificate is valid from ${identity.notBefore.toISOString()}` };
  }
  if (now.getTime() > identity.notAfter.getTime()) {
    return { ok: false, code: 'PKI_ERR_EXPIRED', message: `the certificate expired at ${identity.notAfter.toISOString()}` };
  }
  if (options.isRevoked(identity.serial, identity.fingerprint256)) {
    return { ok: false, code: 'PKI_ERR_REVOKED', message: `the certificate ${identity.serial} is revoked` };
  }
  return { ok: true, identity };
}

/** A replica's client certificate, checked: its replica id, or why it is refused. */
export type ReplicaVerification = { ok: true; replicaId: string; serial: string } | { ok: false; code: PkiErrorCode; message: string };

/**
 * Decides whether a client certificate is a control-plane replica's (issued by
 * issueReplicaCertificate): issued and signed by `ca`, not a CA, clientAuth EKU, within its
 * validity, exactly one `urn:svc:replica:<id>` SAN URI and no relay or organization URI (a relay's
 * certificate is never a replica's). Never throws for a bad certificate.
 */
export function verifyReplicaCertificate(ca: Ca, cert: CertificateInput, now = new Date()): ReplicaVerification {
  let x509: X509Certificate;
  try {
    x509 = toX509(cert);
  } catch {
    return { ok: false, code: 'PKI_ERR_CERT_INVALID', message: 'the certificate cannot be read' };
  }
  if (!issuedBy(ca, x509)) return { ok: false, code: 'PKI_ERR_WRONG_ISSUER', message: 'the certificate was not issued by our CA' };
  const eku = x509.keyUsage;
  if (x509.ca || !Array.isArray(eku) || !eku.includes(CLIENT_AUTH_OID)) return { ok: false, code: 'PKI_ERR_NOT_CLIENT_CERT', message: 'not a client certificate' };
  const uris = subjectAltNameUris(x509);
  const ids = uris.filter((u) => u.startsWith(REPLICA_URI_PREFIX)).map((u) => u.slice(REPLICA_URI_PREFIX.length));
  const id = ids[0];
  if (ids.length !== 1 || id === undefined || !ID_PATTERN.test(id) || uris.some((u) => u.startsWith(RELAY_URI_PREFIX) || u.startsWith(ORG_URI_PREFIX))) {
    return { ok: false, code: 'PKI_ERR_NO_IDENTITY', message: `expected exactly one ${REPLICA_URI_PREFIX} SAN URI and no relay identity` };
  }
  if (now.getTime() < parseOpenSslDate(x509.validFrom).getTime()) return { ok: false, code: 'PKI_ERR_NOT_YET_VALID', message: 'the certificate is not yet valid' };
  if (now.getTime() > parseOpenSslDate(x509.validTo).getTime()) return { ok: false, code: 'PKI_ERR_EXPIRED', message: 'the certificate expired' };
  return { ok: true, replicaId: id, serial: serialOfX509(x509) };
}

/** issued by `ca` and signed with its key */
function issuedBy(ca: Ca, x509: X509Certificate): boolean {
  try {
    return x509.checkIssued(ca.certificate) && x509.verify(ca.certificate.publicKey);
  } catch {
    return false;
  }
}

function refuse(err: unknown): ClientVerification {
  if (err instanceof PkiError) return { ok: false, code: err.code, message: err.message };
  throw err;
}

/**
 * The URI entries of the subjectAltName, from node:crypto's text form: entries separated by ", ",
 * each "TYPE:value", a value with special characters (including any comma) written as a JSON
 * string. Unquoted values never contain ", ", so splitting there is exact.
 */
function subjectAltNameUris(x509: X509Certificate): string[] {
  const text = x509.subjectAltName;
  if (!text) return [];
  const uris: string[] = [];
  for (const entry of text.split(', ')) {
    if (!entry.startsWith('URI:')) continue;
    let value = entry.slice(4);
    if (value.startsWith('"')) {
      try {
        const parsed: unknown = JSON.parse(value);
        if (typeof parsed !== 'string') continue;
        value = parsed;
      } catch {
        continue; // not well-formed: never ours
      }
    }
    uris.push(value);
  }
  return uris;
}
