import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import t from 'tap';
import {
  createCa,
  generateKeyAndCsr,
  issueClientCertificate,
  issueServerCertificate,
  tlsClientOptions,
  tlsServerOptions,
  verifyClientCertificate,
  type ClientVerification,
} from '../../pki/index.js';

// Real certificates, real sockets on 127.0.0.1 port 0.
const ca = createCa({ keyBits: 2048 });
const otherCa = createCa({ keyBits: 2048 });
const listenerCert = issueServerCertificate(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1', '::1'] });
const relay = generateKeyAndCsr();
const relayCert = issueClientCertificate(ca, relay.csrPem, { relayId: 'rly_tls', orgId: 'org_tls' });
const revokedCert = issueClientCertificate(ca, relay.csrPem, { relayId: 'rly_gone', orgId: 'org_tls' });
const foreignCert = issueClientCertificate(otherCa, relay.csrPem, { relayId: 'rly_tls', orgId: 'org_tls' });
const denyList = new Set([revokedCert.serial]);

interface ServerEvents {
  secure: ClientVerification[];
  clientErrors: Error[];
}

async function startListener(material = { keyPem: listenerCert.keyPem, certPem: listenerCert.certPem, caCertPem: ca.certPem }) {
  const events: ServerEvents = { secure: [], clientErrors: [] };
  const server = tls.createServer(tlsServerOptions(material), (socket) => {
    // What the tunnel listener does after the handshake: identity and revocation.
    const peer = socket.getPeerX509Certificate();
    const verdict: ClientVerification = peer
      ? verifyClientCertificate(ca, peer, { isRevoked: (serial) => denyList.has(serial) })
      : { ok: false, code: 'PKI_ERR_CERT_INVALID', message: 'no peer certificate' };
    events.secure.push(verdict);
    socket.end(JSON.stringify(verdict.ok ? { ok: true, relayId: verdict.identity.relayId, orgId: verdict.identity.orgId } : { ok: false, code: verdict.code }));
  });
  server.on('tlsClientError', (err) => events.clientErrors.push(err));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { server, port, events, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

interface Outcome {
  secureConnect: boolean;
  authorized: boolean;
  data: string;
  error: (Error & { code?: string }) | undefined;
}

/** Connects, reads until the server closes, and reports what the client saw. */
function dial(port: number, options: tls.ConnectionOptions): Promise<Outcome> {
  return new Promise((resolve) => {
    const outcome: Outcome = { secureConnect: false, authorized: false, data: '', error: undefined };
    const socket = tls.connect({ host: '127.0.0.1', port, ...options }, () => {
      outcome.secureConnect = true;
      outcome.authorized = socket.authorized;
    });
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (outcome.data += chunk));
    socket.on('error', (err) => (outcome.error = err));
    socket.on('close', () => resolve(outcome));
  });
}

const listenerPromise = startListener();
t.teardown(async () => (await listenerPromise).close());

t.test('the relay with its issued certificate completes mutual TLS and is identified', async (t) => {
  const { port, events } = await listenerPromise;
  const before = events.secure.length;
  const out = await dial(port, tlsClientOptions({ keyPem: relay.keyPem, certPem: relayCert.certPem, caCertPem: ca.certPem }));
  t.equal(out.error, undefined);
  t.ok(out.secureConnect && out.authorized, 'the relay trusts the listener (our CA, IP SAN 127.0.0.1)');
  t.same(JSON.parse(out.data), { ok: true, relayId: 'rly_tls', orgId: 'org_tls' });
  t.equal(events.secure.length, before + 1);
});

t.test('a client certificate from another CA is refused by the handshake', async (t) => {
  const { port, events } = await listenerPromise;
  const before = { secure: events.secure.length, errors: events.clientErrors.length };
  const out = await dial(port, tlsClientOptions({ keyPem: relay.keyPem, certPem: foreignCert.certPem, caCertPem: ca.certPem }));
  // Node completes the TLS 1.3 exchange, finds the verify error and destroys the socket before
  // 'secureConnection': the client sees the connection end with nothing served.
  t.equal(out.data, '', 'nothing served');
  t.equal(events.secure.length, before.secure, 'the listener never got a secure connection');
  t.equal(events.clientErrors.length, before.errors + 1, 'the listener refused it (tlsClientError)');
});

t.test('a client without a certificate is refused by the handshake', async (t) => {
  const { port, events } = await listenerPromise;
  const before = { secure: events.secure.length, errors: events.clientErrors.length };
  const out = await dial(port, { ca: [ca.certPem], minVersion: 'TLSv1.3' });
  t.equal(out.data, '');
  t.ok(out.error, `the client sees an error (${out.error?.code ?? out.error?.message})`);
  t.equal(events.secure.length, before.secure);
  t.equal(events.clientErrors.length, before.errors + 1);
  t.match(String(events.clientErrors.at(-1)?.message), /certificate/i);
});

t.test('a revoked certificate passes TLS but is refused by verifyClientCertificate', async (t) => {
  const { port } = await listenerPromise;
  const out = await dial(port, tlsClientOptions({ keyPem: relay.keyPem, certPem: revokedCert.certPem, caCertPem: ca.certPem }));
  t.same(JSON.parse(out.data), { ok: false, code: 'PKI_ERR_REVOKED' });
});

t.test('the listener certificate cannot stand in for a client certificate', async (t) => {
  const { port, events } = await listenerPromise;
  const before = events.secure.length;
  const out = await dial(port, tlsClientOptions({ keyPem: listenerCert.keyPem, certPem: listenerCert.certPem, caCertPem: ca.certPem }));
  // OpenSSL checks the clientAuth purpose in the handshake; verifyClientCertificate would too.
  const refusedByHandshake = out.data === '' && events.secure.length === before;
  const refusedByVerify = out.data !== '' && JSON.parse(out.data).code === 'PKI_ERR_NOT_CLIENT_CERT';
  t.ok(refusedByHandshake || refusedByVerify, `refused (${refusedByHandshake ? 'handshake' : out.data})`);
});

t.test('the relay trusts only our CA: a listener with another CA certificate is refused', async (t) => {
  const impostorCert = issueServerCertificate(otherCa, { ipAddresses: ['127.0.0.1'] });
  const impostor = await startListener({ keyPem: impostorCert.keyPem, certPem: impostorCert.certPem, caCertPem: ca.certPem });
  try {
    const out = await dial(impostor.port, tlsClientOptions({ keyPem: relay.keyPem, certPem: relayCert.certPem, caCertPem: ca.certPem }));
    t.equal(out.secureConnect, false);
    t.equal(out.data, '');
    t.match(out.error?.code, /UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|SELF_SIGNED/);
    t.equal(impostor.events.secure.length, 0);
  } finally {
    await impostor.close();
  }
});

t.test('the relay checks the listener name: a certificate for another host is refused', async (t) => {
  const elsewhere = issueServerCertificate(ca, { dnsNames: ['tunnel.example.com'] });
  const wrongName = await startListener({ keyPem: elsewhere.keyPem, certPem: elsewhere.certPem, caCertPem: ca.certPem });
  try {
    const out = await dial(wrongName.port, tlsClientOptions({ keyPem: relay.keyPem, certPem: relayCert.certPem, caCertPem: ca.certPem }));
    t.equal(out.data, '');
    t.equal(out.error?.code, 'ERR_TLS_CERT_ALTNAME_INVALID');
  } finally {
    await wrongName.close();
  }
});

t.test('the option helpers have the documented shape', async (t) => {
  const m = { keyPem: 'K', certPem: 'C', caCertPem: 'A' };
  t.same(tlsServerOptions(m), { key: 'K', cert: 'C', ca: ['A'], requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' });
  t.same(tlsClientOptions(m), { key: 'K', cert: 'C', ca: ['A'], rejectUnauthorized: true, minVersion: 'TLSv1.3' });
});
