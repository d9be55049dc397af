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
import { frontServer, newSession, serveTls, type FrontSession, type ServerCert } from './tls-front.js';
import type { TapTest } from './tap.js';

export type { FrontSession } from './tls-front.js';

const SSL_REQUEST_CODE = 80877103;

export interface TlsPostgresFront {
  readonly port: number;
  readonly sessions: readonly FrontSession[];
}

export type FrontOptions =
  | { readonly tls: true; readonly cert: ServerCert; readonly plaintext?: 'pass' | 'refuse' }
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
  const port = await frontServer(t, (raw, keep) => {
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
    const session = newSession();
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
      serveTls(raw, o.cert, session, keep, (secure) => passOn(session, secure, Buffer.alloc(0)));
    };
    raw.on('data', onData);
  });
  return { port, sessions };
}
