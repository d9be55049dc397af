/**
 * Closing the app does not wait for a connection that never sent a request. Node's HTTP server
 * closes the idle keep-alive connections at close, but counts a connection with no request yet as
 * busy, and stops timing out its headers once closing: the close waited for the client to hang up.
 * Node's own fetch leaves such a connection after an aborted request (a spare, kept for the
 * server's keep-alive hint, 70 s: test/api/client-gone.test.ts took 80 s for it).
 */
import net from 'node:net';
import t from 'tap';
import { api, startServer } from '../helpers/server.js';

/** a hang guard only: what is asserted is that the close ends at all */
const GUARD_MS = 30_000;

t.test('a connection that sent nothing does not hold the close', async (t) => {
  const srv = await startServer();
  const server = srv.svc.app.server;
  const count = (): Promise<number> => new Promise((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
  t.equal((await api(srv.url, 'GET', '/healthz')).status, 200);

  const { port } = new URL(srv.url);
  const unused = net.connect(Number(port), '127.0.0.1');
  await new Promise<void>((resolve, reject) => unused.once('connect', resolve).once('error', reject));
  const hungUp = new Promise<void>((resolve) => unused.once('close', () => resolve()));
  unused.on('error', () => undefined); // the server ends it
  t.ok((await count()) >= 1, 'the server holds the unused connection');

  let guard: NodeJS.Timeout | undefined;
  const closed = await Promise.race([
    srv.close().then(() => 'closed'),
    new Promise<string>((resolve) => {
      guard = setTimeout(() => resolve(`the close still waited after ${GUARD_MS} ms for a connection that never sent a request`), GUARD_MS);
    }),
  ]);
  clearTimeout(guard);
  t.equal(closed, 'closed', 'the close ended');
  if (closed !== 'closed') {
    unused.destroy(); // the close can end now
    return;
  }
  t.equal(await count(), 0, 'no connection is left open');
  await hungUp;
  t.pass('the unused connection was ended by the server');
});
