/**
 * The one registry of pki/ error codes. Every code is documented in pki/README.md (a test checks
 * that each code here is unique and appears there). Functions that refuse throw a {@link PkiError};
 * {@link verifyClientCertificate} returns the code instead of throwing, since refusing a client is
 * an expected outcome at the tunnel listener.
 */

export const PKI_ERRORS = {
  PKI_ERR_CA_LOAD: 'The CA directory holds an unreadable, incomplete or inconsistent key/certificate pair.',
  PKI_ERR_CA_EXPIRED: 'The CA certificate is outside its validity period; it cannot issue.',
  PKI_ERR_INVALID_OPTIONS: 'An option is out of range (validity, key size, SAN entry, relay or org id).',
  PKI_ERR_CSR_INVALID: 'The CSR is not a PEM-encoded PKCS#10 certification request.',
  PKI_ERR_CSR_KEY_NOT_RSA: "The CSR's public key is not an RSA key.",
  PKI_ERR_CSR_KEY_TOO_SMALL: "The CSR's RSA key is shorter than 2048 bits.",
  PKI_ERR_CSR_KEY_UNSUPPORTED: "The CSR's RSA key is longer than 8192 bits or its public exponent is unusual (even, 1, or over 32 bits).",
  PKI_ERR_CSR_WEAK_SIGNATURE: 'The CSR is signed with an algorithm other than RSA PKCS#1 v1.5 with SHA-256/384/512.',
  PKI_ERR_CSR_SIGNATURE: "The CSR's signature does not verify with its own public key (no proof of possession).",
  PKI_ERR_CERT_INVALID: 'The certificate is not a parseable PEM/DER X.509 certificate.',
  PKI_ERR_WRONG_ISSUER: 'The certificate was not issued (signed) by our CA.',
  PKI_ERR_EXPIRED: "The certificate's notAfter is in the past.",
  PKI_ERR_NOT_YET_VALID: "The certificate's notBefore is in the future.",
  PKI_ERR_REVOKED: "The certificate's serial or fingerprint is on the caller's deny list.",
  PKI_ERR_NOT_CLIENT_CERT: 'The certificate is a CA certificate or lacks the clientAuth extended key usage.',
  PKI_ERR_NO_IDENTITY: 'The certificate lacks exactly one urn:svc:relay: and one urn:svc:org: SAN URI.',
} as const satisfies Record<`PKI_ERR_${string}`, string>;

export type PkiErrorCode = keyof typeof PKI_ERRORS;

export class PkiError extends Error {
  readonly code: PkiErrorCode;

  constructor(code: PkiErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PkiError';
    this.code = code;
  }
}

export function isPkiError(err: unknown): err is PkiError {
  return err instanceof PkiError;
}
