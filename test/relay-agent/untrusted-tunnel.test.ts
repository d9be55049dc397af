/**
 * A tunnel whose certificate the relay does not trust (another CA signed it: a balancer that
 * terminates TLS with its own certificate, another control plane, a CA changed while the relay was
 * away) is refused in the handshake, and the relay's error says what to fix. It stays retryable:
 * the balancer put right needs no restart. Real TLS on port 0, certificates from our own CA code.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { WebSocketServer } from 'ws';
import { createCa, generateKeyAndCsr, issueClientCertificate, issueServerCertificate, TLS_MIN_VERSION } from '../../pki/index.js';
import { DialError, untrustedServerHint, wsDialer } from '../../relay-agent/connection.js';

const ours = createCa({ keyBits: 2048 });
const theirs = createCa({ keyBits: 2048 });
const relayKey = generateKeyAndCsr();
const relayCert = issueClientCertificate(ours, relayKey.csrPem, { relayId: 'rly_test', orgId: 'org_test' });

async function tlsServer(cert: { certPem: string; keyPem: string }): Promise<{ port: number; close: () => Promise<void> }> {
  const server = https.createServer({ key: cert.keyPem, cert: cert.certPem, minVersion: TLS_MIN_VERSION });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (ws) => ws.close());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function dialError(tunnelUrl: string): Promise<DialError> {
  const dial = wsDialer({ tunnel_url: tunnelUrl, keyPem: relayKey.keyPem, certPem: relayCert.certPem, caCertPem: ours.certPem, relay_id: 'rly_test' });
  const err = await dial(new AbortController().signal).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof DialError)) throw new Error(`expected a DialError, got ${String(err)}`);
  return err;
}

t.test('a tunnel certificate another CA signed: refused, retryable, and the error says what to fix', async (t) => {
  const srv = await tlsServer(issueServerCertificate(theirs, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }));
  t.teardown(srv.close);
  const err = await dialError(`wss://127.0.0.1:${srv.port}/v1/relays/tunnel`);
  t.match(err.message, /not signed by the CA in the relay config \(ca\.pem\)/);
  t.match(err.message, /terminates TLS/, 'names the balancer that terminates TLS');
  t.match(err.message, /svc-relay enroll --force/, 'and re-enrolling');
  t.equal(err.permanent, false, 'retried: the balancer put right needs no restart');
});

t.test('a tunnel certificate of our CA for another host: the error says to use a name it serves', async (t) => {
  const srv = await tlsServer(issueServerCertificate(ours, { dnsNames: ['tunnel.example.com'] }));
  t.teardown(srv.close);
  const err = await dialError(`wss://localhost:${srv.port}/v1/relays/tunnel`);
  t.match(err.message, /does not name this host/);
  t.equal(err.permanent, false);
});

t.test('other failures carry no such hint', async (t) => {
  t.equal(untrustedServerHint('ECONNREFUSED'), undefined);
  t.equal(untrustedServerHint(undefined), undefined);
  const srv = await tlsServer(issueServerCertificate(ours, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }));
  const port = srv.port;
  await srv.close();
  const err = await dialError(`wss://127.0.0.1:${port}/v1/relays/tunnel`);
  t.match(err.message, /ECONNREFUSED/);
  t.notMatch(err.message, /ca\.pem/);
});
