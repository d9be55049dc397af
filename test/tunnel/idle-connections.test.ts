/**
 * Connections to the tunnel port that never become a tunnel (found by review): the listener is
 * the one port of the control plane meant to be reached from customers' networks, and it held a
 * TLS connection that sent nothing, or half a request, for as long as the peer kept it open (and a
 * TCP connection that never started TLS for 120 s), so anyone who could reach it could hold file
 * descriptors of the control plane without a certificate until none was left. Such connections
 * are now closed by the listener; a relay's tunnel, which goes quiet between queries, is not.
 */
import net from 'node:net';
import tls from 'node:tls';
import t from 'tap';
import WebSocket from 'ws';
import { generateKeyAndCsr } from '../../pki/index.js';
import { Session } from '../../protocol/index.js';
import { wsTransport } from '../../protocol/relay-contract.js';
import type { TunnelListener } from '../../control-plane/tunnel/index.js';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
let tunnel: TunnelListener;
t.before(async () => {
  srv = await startServer();
  tunnel = await srv.svc.startTunnel();
});
t.teardown(() => srv.close());

/** resolves once the server has closed the socket (tap's timeout fails the test otherwise) */
function closedByServer(s: net.Socket): Promise<void> {
  return new Promise((resolve) => {
    s.on('error', () => undefined);
    s.once('close', () => resolve());
  });
}

t.test('a connection that never becomes a tunnel is closed by the listener', { timeout: 60_000 }, async (t) => {
  const sockets: net.Socket[] = [];
  t.teardown(() => sockets.forEach((s) => s.destroy()));
  const open = (s: net.Socket): net.Socket => (sockets.push(s), s);

  const rawTcp = open(net.connect(tunnel.port, '127.0.0.1')); // never starts TLS
  const tlsIdle = open(tls.connect({ port: tunnel.port, host: '127.0.0.1', rejectUnauthorized: false })); // TLS, then nothing
  const halfRequest = open(
    tls.connect({ port: tunnel.port, host: '127.0.0.1', rejectUnauthorized: false }, () => {
      halfRequest.write('GET / HTTP/1.1\r\nHost: x\r\n'); // and never the rest
    }),
  );
  await Promise.all([closedByServer(rawTcp), closedByServer(tlsIdle), closedByServer(halfRequest)]);
  t.pass('all three were closed');
});

t.test('a quiet relay tunnel is not closed', { timeout: 60_000 }, async (t) => {
  const a = await signupAgent(srv.url);
  const key = generateKeyAndCsr();
  const tok = (await api<{ token: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: {} })).body.token;
  const reg = (await api<{ relay_id: string; certificate_pem: string; ca_certificate_pem: string }>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok, csr_pem: key.csrPem } })).body;
  const ws = new WebSocket(`wss://127.0.0.1:${tunnel.port}/`, { key: key.keyPem, cert: reg.certificate_pem, ca: reg.ca_certificate_pem });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  // no pings from this side: only the control plane's own (every 15 s) cross the tunnel
  const relay = new Session(wsTransport(ws), { role: 'client', agent: 'svc-relay/test', pingIntervalMs: 0 });
  relay.onStream(async (q) => {
    await q.sendColumns([{ name: 'one', type: 'int4' }]);
    await q.sendRows([[1]]);
    await q.end();
  });
  await relay.ready;
  let closed = false;
  ws.once('close', () => (closed = true));
  // a quiet spell longer than any bound on connections that are not tunnels
  await new Promise((r) => setTimeout(r, 25_000));
  t.equal(closed, false, 'still open');
  const live = tunnel.registry.get(reg.relay_id);
  t.ok(live, 'still the relay’s tunnel');
  const result = await (live as NonNullable<typeof live>).session.openStream({ statement: 'SELECT 1' }).collect();
  t.same(result.rows, [[1]], 'and it carries a query');
  relay.close();
});
