/**
 * A MySQL front on 127.0.0.1 (port 0) that speaks the server side of MySQL's TLS negotiation in
 * front of a MariaDB that has none (the machine's MariaDB runs with SSL disabled). For each client
 * it connects to the real server at `upstream` and, with `tls: true`:
 *  1. forwards the server's initial handshake (Handshake V10) with CLIENT_SSL set in its
 *     capability flags;
 *  2. reads the client's next packet: an SSLRequest (seq 1, 32 bytes, CLIENT_SSL set) is
 *     answered with the server side of a TLS handshake with `cert`; any other packet is the
 *     client's login (HandshakeResponse) in plaintext and is passed on unchanged;
 *  3. after TLS, relays the authentication exchange, decrypted, with the sequence ids the server
 *     expects (one fewer from the client, one more to it, the SSLRequest having taken id 1) and
 *     CLIENT_SSL cleared in the client's HandshakeResponse (a server without TLS refuses a login
 *     that claims it), until the server's OK or ERR ends it;
 *  4. then pipes the bytes both ways unchanged (the ids restart at 0 with each command).
 * With `tls: false` the greeting is forwarded as it is (no CLIENT_SSL: a server without TLS) and
 * the client's packets are piped unchanged; an SSLRequest is recorded and the connection closed.
 *
 * Each connection is recorded as a {@link MysqlFrontSession}.
 */
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { frontServer, newSession, serveTls, type FrontSession, type ServerCert } from './tls-front.js';
import type { TapTest } from './tap.js';

/** CLIENT_SSL in the capability flags */
export const CLIENT_SSL = 0x0800;
const HEADER = 4;
const SSL_REQUEST_LENGTH = 32;

export interface MysqlFrontSession extends FrontSession {
  /** a HandshakeResponse (the client's user name and password token) reached the front outside TLS */
  plaintextLogin: boolean;
}

export interface TlsMysqlFront {
  readonly port: number;
  readonly sessions: readonly MysqlFrontSession[];
}

/** `tls: 'reset'`: TLS offered, and the connection reset (TCP RST) at the client's SSLRequest, as a server or a balancer that drops it */
export type MysqlFrontOptions = { readonly tls: true; readonly cert: ServerCert } | { readonly tls: false } | { readonly tls: 'reset' };

const seqOf = (p: Buffer): number => p[3] as number;
const payloadOf = (p: Buffer): Buffer => p.subarray(HEADER);

/** `p` with sequence id `seq` (a copy) */
function withSeq(p: Buffer, seq: number): Buffer {
  const out = Buffer.from(p);
  out[3] = seq & 0xff;
  return out;
}

/**
 * Where the lower two bytes of the capability flags are in a Handshake V10 packet: after the
 * protocol version (1), the NUL-terminated server version, the thread id (4), the first 8 bytes
 * of the auth plugin data and a filler byte.
 */
export function capabilityOffset(greeting: Buffer): number {
  const payload = payloadOf(greeting);
  if (payload[0] !== 10) throw new Error(`not a Handshake V10 packet (protocol version ${payload[0]})`);
  const nul = payload.indexOf(0, 1);
  if (nul < 0) throw new Error('Handshake V10: no end to the server version');
  return HEADER + nul + 1 + 4 + 8 + 1;
}

/** Reads whole MySQL packets (header and payload) from a stream, one at a time; null once it ended. */
class PacketReader {
  private buf = Buffer.alloc(0);
  private ended = false;
  private waiting: ((p: Buffer | null) => void) | undefined;
  private readonly onData = (d: Buffer): void => {
    this.buf = Buffer.concat([this.buf, d]);
    this.wake();
  };
  private readonly onEnd = (): void => {
    this.ended = true;
    this.wake();
  };

  constructor(private readonly s: Duplex) {
    s.on('data', this.onData);
    s.on('end', this.onEnd);
    s.on('close', this.onEnd);
  }

  next(): Promise<Buffer | null> {
    const p = this.take();
    return p !== undefined ? Promise.resolve(p) : new Promise((resolve) => (this.waiting = resolve));
  }

  /** stops reading; the stream is paused and the bytes read but not taken are returned */
  detach(): Buffer {
    this.s.pause();
    this.s.off('data', this.onData);
    this.s.off('end', this.onEnd);
    this.s.off('close', this.onEnd);
    const rest = this.buf;
    this.buf = Buffer.alloc(0);
    return rest;
  }

  private take(): Buffer | null | undefined {
    if (this.buf.length >= HEADER) {
      const total = HEADER + this.buf.readUIntLE(0, 3);
      if (this.buf.length >= total) {
        const p = this.buf.subarray(0, total);
        this.buf = this.buf.subarray(total);
        return p;
      }
    }
    return this.ended ? null : undefined;
  }

  private wake(): void {
    if (!this.waiting) return;
    const p = this.take();
    if (p === undefined) return;
    const w = this.waiting;
    this.waiting = undefined;
    w(p);
  }
}

/** pipes `a` and `b` both ways from now on, after writing what each reader held back; either closing closes the other */
function join(a: Duplex, readA: PacketReader, b: Duplex, readB: PacketReader): void {
  const fromA = readA.detach();
  const fromB = readB.detach();
  if (fromA.length > 0) b.write(fromA);
  if (fromB.length > 0) a.write(fromB);
  a.pipe(b);
  b.pipe(a);
  a.on('close', () => b.destroy());
  b.on('close', () => a.destroy());
  a.resume();
  b.resume();
}

/**
 * The authentication exchange after TLS: `login` (the HandshakeResponse, seq 2) goes on as seq 1
 * with CLIENT_SSL cleared; then each side's packets are relayed with the ids shifted until the
 * server answers OK (0x00) or ERR (0xff). Auth switch (0xfe) and more-data (0x01) packets and the
 * client's answers to them pass the same way.
 */
async function relayAuth(client: Duplex, fromClient: PacketReader, up: Duplex, fromServer: PacketReader, login: Buffer): Promise<boolean> {
  const first = withSeq(login, seqOf(login) - 1);
  first.writeUInt32LE(first.readUInt32LE(HEADER) & ~CLIENT_SSL, HEADER);
  up.write(first);
  let done = false;
  void (async () => {
    for (;;) {
      const p = await fromClient.next();
      if (p === null || done) return;
      up.write(withSeq(p, seqOf(p) - 1));
    }
  })();
  for (;;) {
    const p = await fromServer.next();
    if (p === null) return false;
    client.write(withSeq(p, seqOf(p) + 1));
    const kind = payloadOf(p)[0];
    if (kind === 0x00 || kind === 0xff) {
      done = true;
      return true;
    }
  }
}

export async function tlsMysqlFront(t: TapTest, upstream: { readonly host: string; readonly port: number }, o: MysqlFrontOptions): Promise<TlsMysqlFront> {
  const sessions: MysqlFrontSession[] = [];
  const port = await frontServer(t, (raw, keep) => {
    const session: MysqlFrontSession = { ...newSession(), plaintextLogin: false };
    sessions.push(session);
    const up = keep(net.connect(upstream.port, upstream.host));
    up.on('close', () => raw.destroy());
    raw.on('close', () => up.destroy());
    const fromServer = new PacketReader(up);
    const fromRaw = new PacketReader(raw);
    void (async () => {
      const greeting = await fromServer.next();
      if (greeting === null) return;
      const offer = Buffer.from(greeting);
      if (o.tls) {
        const at = capabilityOffset(offer);
        offer.writeUInt16LE(offer.readUInt16LE(at) | CLIENT_SSL, at);
      }
      raw.write(offer);
      const next = await fromRaw.next();
      if (next === null) return;
      const sslRequest = seqOf(next) === 1 && next.length === HEADER + SSL_REQUEST_LENGTH && (payloadOf(next).readUInt32LE(0) & CLIENT_SSL) !== 0;
      if (!sslRequest) {
        // the login in plaintext: on to the server as it is
        session.plaintextLogin = true;
        session.forwarded = true;
        up.write(next);
        return join(raw, fromRaw, up, fromServer);
      }
      session.sslRequest = true;
      if (!o.tls) return void raw.destroy(); // a server without TLS has not offered it
      if (o.tls === 'reset') return void raw.resetAndDestroy();
      const clientHello = fromRaw.detach();
      raw.unshift(clientHello);
      serveTls(raw, o.cert, session, keep, (secure) => {
        const fromClient = new PacketReader(secure);
        void (async () => {
          const login = await fromClient.next();
          if (login === null) return;
          session.forwarded = true;
          if (await relayAuth(secure, fromClient, up, fromServer, login)) join(secure, fromClient, up, fromServer);
        })();
      });
    })().catch((err: Error) => raw.destroy(err)); // a greeting that is not Handshake V10
  });
  return { port, sessions };
}
