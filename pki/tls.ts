/**
 * Node `tls` options for the two ends of the tunnel, so that both trust our CA and only it.
 *
 * The handshake refuses a client without a certificate or with one not chaining to our CA; it does
 * not know about revocation or our identity URIs, so the listener still calls
 * verifyClientCertificate(ca, socket.getPeerX509Certificate(), { isRevoked }) once the TLS
 * session is up (and again whenever the deny list changes, to cut live tunnels).
 */
import type { SecureVersion } from 'node:tls';

export interface TlsMaterial {
  /** This end's private key, PEM. */
  keyPem: string;
  /** This end's certificate, PEM, issued by our CA. */
  certPem: string;
  /** Our CA's certificate, PEM: the only trust anchor. */
  caCertPem: string;
}

/** Both ends are ours and run Node 20: TLS 1.3 only. */
export const TLS_MIN_VERSION: SecureVersion = 'TLSv1.3';

export interface TlsServerOptions {
  key: string;
  cert: string;
  ca: string[];
  requestCert: true;
  rejectUnauthorized: true;
  minVersion: SecureVersion;
}

export interface TlsClientOptions {
  key: string;
  cert: string;
  ca: string[];
  rejectUnauthorized: true;
  minVersion: SecureVersion;
}

/** For `tls.createServer`, `https.createServer` (and a `ws` server on it): mutual TLS, our CA only. */
export function tlsServerOptions(m: TlsMaterial): TlsServerOptions {
  return { key: m.keyPem, cert: m.certPem, ca: [m.caCertPem], requestCert: true, rejectUnauthorized: true, minVersion: TLS_MIN_VERSION };
}

/** For `tls.connect` (and a `ws` client): present the relay's certificate, trust only our CA. */
export function tlsClientOptions(m: TlsMaterial): TlsClientOptions {
  return { key: m.keyPem, cert: m.certPem, ca: [m.caCertPem], rejectUnauthorized: true, minVersion: TLS_MIN_VERSION };
}
