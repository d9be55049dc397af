/**
 * The relay speaks to the tunnel only over TLS: a `tunnel_url` that is not `wss://` (a
 * registration answer that names `ws://`, a relay.json edited by hand) would make ws dial in the
 * clear, with no server certificate checked and none presented, so whoever answers at that address
 * could send statements and read the database's rows. It is refused at enrollment (nothing
 * written), at load (exit 1 before any dial), and by the dialer itself (permanent, no socket).
 * A real plain WebSocket server on port 0 shows nothing reaches it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { WebSocketServer } from 'ws';
import { createCa, issueClientCertificate } from '../../pki/index.js';
import { DialError, wsDialer } from '../../relay-agent/connection.js';
import { enroll, loadConfig } from '../../relay-agent/enroll.js';

const ca = createCa({ keyBits: 2048 });

/** a control plane whose registration answer names `tunnelUrl` */
async function controlPlane(t: { teardown: (fn: () => unknown) => void }, tunnelUrl: string): Promise<string> {
  const srv = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as { csr_pem: string };
      const cert = issueClientCertificate(ca, body.csr_pem, { relayId: 'rly_1', orgId: 'org_1' });
      res.writeHead(201, { 'content-type': 'application/json' }).end(
        JSON.stringify({ relay_id: 'rly_1', certificate_pem: cert.certPem, ca_certificate_pem: ca.certPem, tunnel_url: tunnelUrl, expires_at: cert.notAfter.toISOString() }),
      );
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
}

async function plainWebSocketServer(t: { teardown: (fn: () => unknown) => void }): Promise<{ port: number; connections: () => number }> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise<void>((r) => wss.once('listening', () => r()));
  let n = 0;
  wss.on('connection', (ws) => {
    n++;
    ws.close();
  });
  t.teardown(() => new Promise<void>((r) => wss.close(() => r())));
  return { port: (wss.address() as AddressInfo).port, connections: () => n };
}

t.test('a registration answer with a ws:// tunnel_url is refused and nothing is written', async (t) => {
  const plain = await plainWebSocketServer(t);
  const url = await controlPlane(t, `ws://127.0.0.1:${plain.port}/`);
  const dir = join(mkdtempSync(join(tmpdir(), 'relay-')), 'cfg');
  const err = await enroll({ controlPlane: url, token: 'tok', configDir: dir, keyBits: 2048 }).catch((e: unknown) => e);
  t.match(err, { code: 'RELAY_ERR_BAD_RESPONSE', message: /wss:\/\// });
  t.notOk(existsSync(join(dir, 'relay.json')), 'no configuration to run with');
});

t.test('a relay.json naming a ws:// tunnel is refused at load, and the dialer never opens it', async (t) => {
  const plain = await plainWebSocketServer(t);
  const url = await controlPlane(t, 'wss://127.0.0.1:9443/');
  const dir = join(mkdtempSync(join(tmpdir(), 'relay-')), 'cfg');
  await enroll({ controlPlane: url, token: 'tok', configDir: dir, keyBits: 2048 });
  const good = loadConfig(dir);
  const edited = { ...(JSON.parse(readFileSync(join(dir, 'relay.json'), 'utf8')) as object), tunnel_url: `ws://127.0.0.1:${plain.port}/` };
  writeFileSync(join(dir, 'relay.json'), JSON.stringify(edited));
  t.throws(() => loadConfig(dir), { code: 'RELAY_ERR_CONFIG_INVALID', message: /wss:\/\// });

  const dial = wsDialer({ ...good, tunnel_url: `ws://127.0.0.1:${plain.port}/` });
  const dialed = await dial(new AbortController().signal).then(
    (transport) => (transport.close(1000, 'test'), 'dialed in the clear'),
    (e: unknown) => e,
  );
  t.ok(dialed instanceof DialError, 'refused');
  t.match(dialed, { permanent: true, message: /wss:\/\// });
  t.equal(plain.connections(), 0, 'no connection reached the plain server');
});
