/**
 * A PostgreSQL front on 127.0.0.1 (port 0) that speaks the server side of PostgreSQL's TLS
 * negotiation in front of a database that speaks none (the machine's PostgreSQL and PGlite have
 * no certificates): it reads the client's first message; to an SSLRequest (length 8, code
 * 80877103) it answers 'S' and completes the TLS handshake as server with `cert`, or answers 'N'
 * (`tls: false`, a server without TLS) and goes on in plaintext on the same socket; everything
 * after that is piped, decrypted, to the real database at `upstream`. A client that starts in
 * plaintext (no SSLRequest) is passed through, or with `plaintext: 'refuse'` answered like a
 * server whose pg_hba.conf admits TLS connections only (FATAL 28000) and closed.
 *
 * Each connection is recorded as a {@link FrontSession}: whether it asked for TLS, whether the
 * handshake completed, the SNI name the client sent, and whether any byte reached the database.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { TapTest } from './tap.js';

const SSL_REQUEST_CODE = 80877103;

export interface FrontSession {
  /** the client's first message was an SSLRequest */
  sslRequest: boolean;
  /** the TLS handshake completed */
  tls: boolean;
  /** the SNI name the client sent (false: none), once the handshake completed */
  servername: string | false | undefined;
  /** the handshake's error, where it failed */
  tlsError: string | undefined;
  /** bytes of this connection reached the database (a startup message, in plaintext or decrypted) */
  forwarded: boolean;
}

export interface TlsPostgresFront {
  readonly port: number;
  readonly sessions: readonly FrontSession[];
}

export type FrontOptions =
  | { readonly tls: true; readonly cert: { readonly keyPem: string; readonly certPem: string }; readonly plaintext?: 'pass' | 'refuse' }
  | { readonly tls: false };

/** An ErrorResponse as PostgreSQL sends it to a plaintext client that only hostssl lines admit. */
function noEncryptionError(): Buffer {
  const fields = [
    ['S', 'FATAL'],
    ['V', 'FATAL'],
    ['C', '28000'],
    ['M', 'no pg_hba.conf entry for host "127.0.0.1", user "postgres", database "postgres", no encryption'],
  ];
  const body = Buffer.concat([...fields.map(([k, v]) => Buffer.from(`${k}${v}\0`, 'utf8')), Buffer.from([0])]);
  const head = Buffer.alloc(5);
  head.write('E', 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

export async function tlsPostgresFront(t: TapTest, upstream: { readonly host: string; readonly port: number }, o: FrontOptions): Promise<TlsPostgresFront> {
  const sessions: FrontSession[] = [];
  const sockets = new Set<net.Socket>();
  const keep = (s: net.Socket): net.Socket => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
    return s;
  };

  /** pipes `client` to a new connection to the database once it sends something (`first`: bytes already read from it) */
  const passOn = (session: FrontSession, client: net.Socket, first: Buffer): void => {
    const open = (data: Buffer): void => {
      session.forwarded = true;
      const up = keep(net.connect(upstream.port, upstream.host));
      up.write(data);
      client.pipe(up);
      up.pipe(client);
      client.on('close', () => up.destroy());
      up.on('close', () => client.destroy());
    };
    if (first.length > 0) open(first);
    else client.once('data', open);
  };

  const server = net.createServer((raw) => {
    keep(raw);
    const session: FrontSession = { sslRequest: false, tls: false, servername: undefined, tlsError: undefined, forwarded: false };
    sessions.push(session);
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      if (buf.length < 8) return;
      raw.off('data', onData);
      const rest = buf.subarray(8);
      if (buf.readInt32BE(0) !== 8 || buf.readInt32BE(4) !== SSL_REQUEST_CODE) {
        // a plaintext startup message
        if (o.tls && o.plaintext === 'refuse') return void raw.end(noEncryptionError());
        return passOn(session, raw, buf);
      }
      session.sslRequest = true;
      if (!o.tls) {
        raw.write('N');
        return passOn(session, raw, rest);
      }
      raw.write('S');
      const secure = new tls.TLSSocket(raw, { isServer: true, key: o.cert.keyPem, cert: o.cert.certPem });
      keep(secure);
      secure.on('error', (err: Error) => {
        session.tlsError ??= err.message;
        raw.destroy();
      });
      secure.once('secure', () => {
        session.tls = true;
        session.servername = secure.servername ?? false;
        passOn(session, secure, Buffer.alloc(0));
      });
    };
    raw.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port: (server.address() as net.AddressInfo).port, sessions };
}
