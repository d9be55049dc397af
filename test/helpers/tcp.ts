/**
 * A raw TCP server on 127.0.0.1, port 0, for stand-ins of a peer that misbehaves (a database or a
 * replica that accepts and never answers, or answers a few bytes of its own): every socket it
 * accepts is kept and destroyed, and the server closed, at the end of the test.
 */
import net from 'node:net';
import type { TapTest } from './tap.js';

export interface TcpServer {
  readonly server: net.Server;
  readonly port: number;
  /** the sockets accepted so far, oldest first */
  readonly sockets: net.Socket[];
}

/** `onSocket` (default: nothing, so the peer never answers) is called with each socket and its index */
export async function tcpServer(t: TapTest, onSocket: (s: net.Socket, index: number) => void = () => undefined): Promise<TcpServer> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    s.on('error', () => undefined);
    onSocket(s, sockets.length - 1);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { server, port: (server.address() as net.AddressInfo).port, sockets };
}
