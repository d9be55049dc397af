/**
 * The WebSocket transport over a real `ws` connection on port 0: the frames one tick sends are
 * held in the socket (corked) and written together when the tick's work is done, in order.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import WebSocket, { WebSocketServer } from 'ws';
import { webSocketTransport } from '../../protocol/index.js';

t.test('the sends of one tick go out in one write, in order', async (t) => {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(wss, 'listening');
  const accepted = once(wss, 'connection') as Promise<[WebSocket]>;
  const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
  await once(client, 'open');
  const [server] = await accepted;
  t.teardown(() => {
    client.terminate();
    wss.close();
  });

  const received: string[] = [];
  const receiver = webSocketTransport(server);
  const all = new Promise<void>((resolve) => {
    receiver.onMessage((b) => {
      received.push(Buffer.from(b).toString());
      if (received.length === 6) resolve();
    });
  });
  const sender = webSocketTransport(client);
  const socket = (client as unknown as { _socket: import('node:net').Socket })._socket;
  sender.send(Buffer.from('one'));
  sender.send(Buffer.from('two'));
  sender.send(Buffer.from('three'));
  t.ok(socket.writableCorked > 0, 'the socket is corked during the tick');
  const waiting = socket.writableLength;
  t.ok(waiting >= 'onetwothree'.length, `the three frames wait in the socket (${waiting} bytes)`);
  await new Promise((r) => process.nextTick(r));
  t.equal(socket.writableCorked, 0, 'uncorked once the tick is done');
  t.ok(socket.writableLength < waiting, 'handed to the kernel together');
  // a later tick corks again
  sender.send(Buffer.from('four'));
  sender.send(Buffer.from('five'));
  t.ok(socket.writableCorked > 0);
  await new Promise((r) => setImmediate(r));
  sender.send(Buffer.from('six'));
  await all;
  t.same(received, ['one', 'two', 'three', 'four', 'five', 'six'], 'every frame, in order');
});
