/**
 * A TCP proxy on 127.0.0.1 (port 0) in front of a database server that passes every byte at
 * once, except the client writes `hold` picks, which it delivers `holdMs` later: a statement made
 * to reach the server after a cancel or KILL sent just after it (test/pg-read/run,
 * test/live/mysql-kill).
 */
import net from 'node:net';

export interface HoldingProxy {
  readonly port: number;
  /** the proxy's side of each connection, client and upstream */
  readonly sockets: ReadonlySet<net.Socket>;
  /** client writes held so far, and how many of them have reached the server */
  readonly counts: { held: number; delivered: number };
  close(): Promise<void>;
}

export async function holdingProxy(upstream: { readonly host: string; readonly port: number }, hold: (data: Buffer, client: net.Socket) => boolean, holdMs = 800): Promise<HoldingProxy> {
  const sockets = new Set<net.Socket>();
  const counts = { held: 0, delivered: 0 };
  const server = net.createServer((client) => {
    const up = net.connect(upstream.port, upstream.host);
    for (const s of [client, up]) {
      sockets.add(s);
      s.on('error', () => undefined);
    }
    client.on('data', (d: Buffer) => {
      if (!hold(d, client)) return void up.write(d);
      counts.held++;
      setTimeout(() => {
        up.write(d);
        counts.delivered++;
      }, holdMs);
    });
    up.on('data', (d: Buffer) => void client.write(d));
    client.on('close', () => up.destroy());
    up.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    sockets,
    counts,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
