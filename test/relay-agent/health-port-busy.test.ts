/**
 * `svc-relay run --health-port N` when N is taken (another svc-relay, an exporter): it ended with
 * exit status 1 and `svc-relay run: EADDRINUSE: listen EADDRINUSE: address already in use
 * 127.0.0.1:N`, naming no option, and exit 1 is what docs/relay.md's systemd unit reads as
 * "refused for good: enroll again". A port in use is a bad option: exit 2 (docs/relay.md: a bad
 * value exits 2 with the option named), the message says which option and what to do, and no
 * tunnel is dialled. A real listener on port 0 holds the port.
 */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createCa, issueClientCertificate } from '../../pki/index.js';
import { enroll } from '../../relay-agent/enroll.js';
import { main } from '../../cli/svc-relay.js';

const ca = createCa({ keyBits: 2048 });

t.test('a --health-port already in use is a bad option: exit 2, the option named', async (t) => {
  // a configuration to run with (its tunnel is never dialled)
  const cp = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const cert = issueClientCertificate(ca, (JSON.parse(raw) as { csr_pem: string }).csr_pem, { relayId: 'rly_hp', orgId: 'org_hp' });
      res.writeHead(201, { 'content-type': 'application/json' }).end(
        JSON.stringify({ relay_id: 'rly_hp', certificate_pem: cert.certPem, ca_certificate_pem: ca.certPem, tunnel_url: 'wss://127.0.0.1:1/', expires_at: cert.notAfter.toISOString() }),
      );
    });
  });
  await new Promise<void>((r) => cp.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => cp.close(() => r())));
  const dir = join(mkdtempSync(join(tmpdir(), 'relay-')), 'cfg');
  await enroll({ controlPlane: `http://127.0.0.1:${(cp.address() as AddressInfo).port}`, token: 'tok', configDir: dir, keyBits: 2048 });

  const holder = createServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => holder.close(() => r())));
  const port = (holder.address() as AddressInfo).port;

  const o = { out: '', err: '' };
  const io = { out: (s: string) => void (o.out += s), err: (s: string) => void (o.err += s), onStop: () => undefined };
  const code = await main(['run', '--config-dir', dir, '--database-url', 'postgres://reader@127.0.0.1:1/db', '--health-port', String(port)], io);
  t.equal(code, 2, o.err);
  t.match(o.err, new RegExp(`--health-port ${port}: 127\\.0\\.0\\.1:${port} is already in use`));
  t.notMatch(o.err, /dialing/, 'no tunnel dialled');
});
