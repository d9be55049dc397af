import t from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import { createCa, identityOf, issueClientCertificate, issueServerCertificate, tlsServerOptions } from '../../pki/index.js';
import { Session } from '../../protocol/index.js';
import { TUNNEL_CLOSES } from '../../protocol/relay-contract.js';
import { wsTransport } from '../../protocol/relay-contract.js';
import { main } from '../../cli/svc-relay.js';
import { customerDatabase } from '../helpers/customer-db.js';

// runs with it end at the config or at the tunnel's refusal, before any query reaches it
const DB = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ca = createCa({ keyBits: 2048 });
const serverCert = issueServerCertificate(ca, { ipAddresses: ['127.0.0.1'], dnsNames: ['localhost'] });

function io() {
  const o = { out: '', err: '', stop: null as null | (() => void) };
  return { o, io: { out: (s: string) => void (o.out += s), err: (s: string) => void (o.err += s), onStop: (cb: () => void) => void (o.stop = cb) } };
}

type Mode = { refuseUpgrade?: number; onSession?: (s: Session, ws: WebSocket, relayId: string) => void };

/** a fake control plane: register endpoint + mutual-TLS tunnel listener */
async function controlPlane(t: { teardown: (fn: () => unknown) => void }, mode: Mode) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 + 12 });
  const tunnel = createHttpsServer(tlsServerOptions({ keyPem: serverCert.keyPem, certPem: serverCert.certPem, caCertPem: ca.certPem }));
  tunnel.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (req.url !== '/v1/relays/tunnel') {
      socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
      return;
    }
    if (mode.refuseUpgrade) {
      const body = JSON.stringify({ error: { code: 'relay_revoked', message: 'this relay was revoked' } });
      socket.end(`HTTP/1.1 ${mode.refuseUpgrade} Forbidden\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
      return;
    }
    const peer = (req.socket as TLSSocket).getPeerX509Certificate();
    const relayId = peer ? identityOf(peer).relayId : 'unknown';
    wss.handleUpgrade(req, socket, head, (ws) => {
      const s = new Session(wsTransport(ws), { role: 'server', pingIntervalMs: 0 });
      mode.onSession?.(s, ws, relayId);
    });
  });
  await new Promise<void>((r) => tunnel.listen(0, '127.0.0.1', r));
  const tunnelUrl = `wss://127.0.0.1:${(tunnel.address() as AddressInfo).port}/v1/relays/tunnel`;
  const reg = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as { csr_pem: string; enroll_token: string };
      if (body.enroll_token !== 'good') {
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'enroll_token_invalid', message: 'unknown or used token' } }));
        return;
      }
      const cert = issueClientCertificate(ca, body.csr_pem, { relayId: 'rly_cli', orgId: 'org_1' });
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ relay_id: 'rly_cli', certificate_pem: cert.certPem, ca_certificate_pem: ca.certPem, tunnel_url: tunnelUrl, expires_at: cert.notAfter.toISOString() }));
    });
  });
  await new Promise<void>((r) => reg.listen(0, '127.0.0.1', r));
  t.teardown(async () => {
    for (const c of wss.clients) c.terminate();
    await new Promise<void>((r) => reg.close(() => r()));
    tunnel.closeAllConnections?.();
    await new Promise<void>((r) => tunnel.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(reg.address() as AddressInfo).port}` };
}

t.test('usage errors exit 2', async (t) => {
  // `run` without a URL takes one from the environment: none here
  const saved = Object.fromEntries(['DATABASE_URL', 'PGHOST', 'PGDATABASE'].map((k) => [k, process.env[k]]));
  for (const k of Object.keys(saved)) delete process.env[k];
  t.teardown(() => {
    for (const [k, v] of Object.entries(saved)) if (v !== undefined) process.env[k] = v;
  });
  for (const argv of [[], ['bogus'], ['enroll'], ['enroll', '--token', 'x'], ['run', '--config-dir', 'x'], ['run', '--config-dir', 'x', '--database-url', 'postgres://h/db', '--health-port', 'abc'],
    ['run', '--config-dir', 'x', '--database-url', 'postgres://h/db', '--max-rows', '0'],
    ['run', '--config-dir', 'x', '--database-url', 'postgres://h/db', '--max-rows', '1e3'],
    ['run', '--config-dir', 'x', '--database-url', 'postgres://h/db', '--max-bytes', '10'],
    ['run', '--config-dir', 'x', '--database-url', 'postgres://h/db', '--statement-timeout-ms', '-5'],
    ['run', '--config-dir', 'x', '--database-url', 'postgres://h/db', '--pool-size', '0'],
    ['run', '--config-dir', 'x', '--database-url', 'postgres://h/db', '--pool-size', 'many']]) {
    const { o, io: i } = io();
    t.equal(await main(argv, i), 2, argv.join(' '));
    t.ok(o.err.length > 0);
  }
  const { io: i } = io();
  t.equal(await main(['--version'], i), 0);
  // walk-through: the help named `svc relays enroll-token`, a command svc does not have
  const help = io();
  t.equal(await main(['enroll', '--help'], help.io), 0);
  t.match(help.o.out, /svc relay token/, 'the help names the svc command that makes an enroll token');
  t.notMatch(help.o.out, /svc relays/);
});

t.test('enroll: success, refusal, existing config', async (t) => {
  const cp = await controlPlane(t, {});
  const dir = join(mkdtempSync(join(tmpdir(), 'relay-cli-')), 'cfg');
  let r = io();
  t.equal(await main(['enroll', '--control-plane', cp.url, '--token', 'good', '--config-dir', dir, '--name', 'db1'], r.io), 0, r.o.err);
  t.match(r.o.out, /enrolled relay rly_cli/);
  t.equal(statSync(join(dir, 'key.pem')).mode & 0o777, 0o600);
  r = io();
  t.equal(await main(['enroll', '--control-plane', cp.url, '--token', 'good', '--config-dir', dir], r.io), 1);
  t.match(r.o.err, /RELAY_ERR_CONFIG_EXISTS/);
  r = io();
  t.equal(await main(['enroll', '--control-plane', cp.url, '--token', 'bad', '--config-dir', dir, '--force'], r.io), 1);
  t.match(r.o.err, /RELAY_ERR_REGISTER_REFUSED.*HTTP 401 enroll_token_invalid.*unknown or used token/);
  r = io();
  t.equal(await main(['run', '--config-dir', join(dir, 'nope'), '--database-url', DB], r.io), 1);
  t.match(r.o.err, /RELAY_ERR_CONFIG_MISSING/);
});

// the customer database: a fresh one on PostgreSQL when it answers, else PGlite over the wire
t.test('run: mutual TLS tunnel, a query end to end, /healthz, drain on SIGTERM', async (t) => {
  const cdb = await customerDatabase('svc_relay_cli');
  t.comment(`customer database: ${cdb.kind}`);
  t.teardown(() => cdb.drop());
  let resolveSession!: (v: { s: Session; relayId: string }) => void;
  const got = new Promise<{ s: Session; relayId: string }>((r) => (resolveSession = r));
  const cp = await controlPlane(t, { onSession: (s, _ws, relayId) => resolveSession({ s, relayId }) });
  const dir = mkdtempSync(join(tmpdir(), 'relay-cli-'));
  let r = io();
  t.equal(await main(['enroll', '--control-plane', cp.url, '--token', 'good', '--config-dir', dir], r.io), 0);
  r = io();
  const running = main(['run', '--config-dir', dir, '--database-url', cdb.url, '--health-port', '0'], r.io);
  const { s, relayId } = await got;
  t.equal(relayId, 'rly_cli', 'the certificate says which relay it is');
  await s.ready;
  const res = await s.openStream({ statement: 'SELECT $1::int + 1 AS answer', params: [41] }).collect();
  t.same(res.rows, [[42]]);
  const port = Number(/health on 127\.0\.0\.1:(\d+)/.exec(r.o.err)?.[1]);
  const h = await fetch(`http://127.0.0.1:${port}/healthz`);
  t.equal(h.status, 200);
  const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  t.match(m, /svc_relay_tunnel_state\{state="connected"\} 1/);
  t.match(m, /svc_relay_certificate_expiry_seconds \d+/);
  t.ok(r.o.stop, 'a stop handler is registered');
  r.o.stop!();
  t.equal(await running, 0);
  t.match(r.o.err, /draining/);
});

t.test('run: permanent refusals end with exit 1 and a clear message', async (t) => {
  t.test('HTTP 403 on the upgrade', async (t) => {
    const cp = await controlPlane(t, { refuseUpgrade: 403 });
    const dir = mkdtempSync(join(tmpdir(), 'relay-cli-'));
    let r = io();
    t.equal(await main(['enroll', '--control-plane', cp.url, '--token', 'good', '--config-dir', dir], r.io), 0);
    r = io();
    t.equal(await main(['run', '--config-dir', dir, '--database-url', DB], r.io), 1);
    t.match(r.o.err, /RELAY_ERR_PERMANENT_REFUSAL.*HTTP 403.*relay_revoked/);
  });
  t.test('close reason relay_revoked', async (t) => {
    const cp = await controlPlane(t, {
      onSession: (s) => {
        void s.ready.then(() => setTimeout(() => s.close(TUNNEL_CLOSES.relayRevoked.code, TUNNEL_CLOSES.relayRevoked.reason), 20));
      },
    });
    const dir = mkdtempSync(join(tmpdir(), 'relay-cli-'));
    let r = io();
    t.equal(await main(['enroll', '--control-plane', cp.url, '--token', 'good', '--config-dir', dir], r.io), 0);
    r = io();
    t.equal(await main(['run', '--config-dir', dir, '--database-url', DB], r.io), 1);
    t.match(r.o.err, /RELAY_ERR_PERMANENT_REFUSAL.*relay_revoked/);
    t.match(r.o.err, /tunnel connected/);
  });
});
