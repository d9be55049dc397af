/**
 * What the TLS-terminating database fronts (tls-postgres-front.ts, tls-mysql-front.ts) share: a
 * TCP server on 127.0.0.1 (port 0) whose every socket is destroyed, and the server closed, at the
 * end of the test; the server side of a TLS handshake on a socket already accepted, with a
 * certificate issued by the test (no client certificate asked for); and the record of each
 * connection.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { TapTest } from './tap.js';

export interface FrontSession {
  /** the client asked for TLS (PostgreSQL's SSLRequest, MySQL's SSLRequest packet) */
  sslRequest: boolean;
  /** the TLS handshake completed */
  tls: boolean;
  /** the SNI name the client sent (false: none), once the handshake completed */
  servername: string | false | undefined;
  /** the handshake's error, where it failed */
  tlsError: string | undefined;
  /** the client's login reached the database (PostgreSQL: any byte of it; MySQL: its HandshakeResponse) */
  forwarded: boolean;
}

export const newSession = (): FrontSession => ({ sslRequest: false, tls: false, servername: undefined, tlsError: undefined, forwarded: false });

export interface ServerCert {
  readonly keyPem: string;
  readonly certPem: string;
}

/** keeps a socket for the test's teardown (errors are the test's to see in the session, not to throw) */
export type Keep = <S extends net.Socket>(s: S) => S;

/** Listens on 127.0.0.1, port 0; `onClient` gets each accepted socket (already kept). Returns the port. */
export async function frontServer(t: TapTest, onClient: (raw: net.Socket, keep: Keep) => void): Promise<number> {
  const sockets = new Set<net.Socket>();
  const keep: Keep = (s) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
    return s;
  };
  const server = net.createServer((raw) => onClient(keep(raw), keep));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as net.AddressInfo).port;
}

/**
 * The server side of a TLS handshake on `raw` with `cert`, recorded in `session`; `onSecure` gets
 * the TLS socket once the handshake completed. Bytes of the handshake already read from `raw`
 * must have been put back (`raw.pause(); raw.unshift(bytes)`): Node hands them to TLS first.
 */
export function serveTls(raw: net.Socket, cert: ServerCert, session: FrontSession, keep: Keep, onSecure: (secure: tls.TLSSocket) => void): void {
  const secure = keep(new tls.TLSSocket(raw, { isServer: true, key: cert.keyPem, cert: cert.certPem }));
  secure.on('error', (err: Error) => {
    session.tlsError ??= err.message;
    raw.destroy();
  });
  secure.once('secure', () => {
    session.tls = true;
    session.servername = secure.servername ?? false;
    onSecure(secure);
  });
}
