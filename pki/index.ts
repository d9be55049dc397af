/**
 * pki/ — the control plane's certificate authority: create/load, issue relay client certificates
 * from CSRs and the tunnel listener's server certificate, verify client certificates, and the
 * revocation formats. Imports only node: built-ins and node-forge. See pki/README.md.
 */
export { PKI_ERRORS, PkiError, isPkiError, type PkiErrorCode } from './errors.js';
export {
  CA_CERT_FILE,
  CA_KEY_FILE,
  DEFAULT_CA_COMMON_NAME,
  DEFAULT_CA_KEY_BITS,
  DEFAULT_CA_VALIDITY_DAYS,
  caFromPem,
  createCa,
  generateCaPem,
  loadCa,
  loadOrCreateCa,
  type Ca,
  type CaOptions,
} from './ca.js';
export {
  DEFAULT_RELAY_KEY_BITS,
  MAX_CSR_KEY_BITS,
  MIN_CSR_KEY_BITS,
  checkCsr,
  createCsr,
  generateKeyAndCsr,
  type CheckedCsr,
  type CsrOptions,
} from './csr.js';
export {
  DEFAULT_CLIENT_VALIDITY_DAYS,
  DEFAULT_SERVER_VALIDITY_DAYS,
  MAX_LEAF_VALIDITY_DAYS,
  ORG_URI_PREFIX,
  RELAY_URI_PREFIX,
  REPLICA_URI_PREFIX,
  DEFAULT_REPLICA_VALIDITY_DAYS,
  issueClientCertificate,
  issueReplicaCertificate,
  issueServerCertificate,
  type ClientCertificateOptions,
  type IssuedCertificate,
  type ServerCertificateOptions,
} from './issue.js';
export {
  fingerprintOf,
  identityOf,
  serialOf,
  toX509,
  verifyClientCertificate,
  verifyReplicaCertificate,
  type ReplicaVerification,
  type CertificateInput,
  type ClientVerification,
  type RelayIdentity,
  type RevocationCheck,
  type VerifyClientOptions,
} from './verify.js';
export { TLS_MIN_VERSION, tlsClientOptions, tlsServerOptions, type TlsClientOptions, type TlsMaterial, type TlsServerOptions } from './tls.js';
