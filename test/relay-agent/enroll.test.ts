import t from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCa, issueClientCertificate } from '../../pki/index.js';
import { enroll, loadConfig } from '../../relay-agent/enroll.js';
import { RelayError } from '../../relay-agent/errors.js';

const ca = createCa({ keyBits: 2048 });

type Handler = (body: Record<string, unknown>, res: ServerResponse) => void;
async function fakeServer(t: { teardown: (fn: () => unknown) => void }, handler: Handler): Promise<{ url: string; bodies: string[] }> {
  const bodies: string[] = [];
  const srv = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      bodies.push(raw);
      if (req.method !== 'POST' || req.url !== '/v1/relays/register') {
        res.writeHead(404).end();
        return;
      }
      handler(JSON.parse(raw) as Record<string, unknown>, res);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, bodies };
}

const okHandler: Handler = (body, res) => {
  const cert = issueClientCertificate(ca, String(body.csr_pem), { relayId: 'rly_1', orgId: 'org_1' });
  res.writeHead(201, { 'content-type': 'application/json' }).end(
    JSON.stringify({ relay_id: 'rly_1', certificate_pem: cert.certPem, ca_certificate_pem: ca.certPem, tunnel_url: 'wss://127.0.0.1:9443/v1/tunnel', expires_at: cert.notAfter.toISOString() }),
  );
};


t.test('enroll writes key, cert, CA and relay.json with 0600/0700; the key never leaves', async (t) => {
  const { url, bodies } = await fakeServer(t, okHandler);
  const dir = join(mkdtempSync(join(tmpdir(), 'relay-')), 'cfg');
  const r = await enroll({ controlPlane: url + '/', token: 'tok_abc', configDir: dir, name: 'db-east', keyBits: 2048 });
  t.equal(r.relay_id, 'rly_1');
  t.equal(statSync(dir).mode & 0o777, 0o700);
  for (const f of ['key.pem', 'cert.pem', 'ca.pem', 'relay.json']) t.equal(statSync(join(dir, f)).mode & 0o777, 0o600, f);
  const cfg = loadConfig(dir);
  t.same({ relay_id: cfg.relay_id, tunnel_url: cfg.tunnel_url, control_plane: cfg.control_plane }, { relay_id: 'rly_1', tunnel_url: 'wss://127.0.0.1:9443/v1/tunnel', control_plane: url });
  t.match(cfg.keyPem, /PRIVATE KEY/);
  t.equal(cfg.caCertPem, ca.certPem);
  t.equal(bodies.length, 1);
  const sent = JSON.parse(bodies[0]!) as Record<string, unknown>;
  t.same(Object.keys(sent).sort(), ['csr_pem', 'enroll_token', 'name']);
  t.equal(sent.enroll_token, 'tok_abc');
  t.equal(sent.name, 'db-east');
  t.notMatch(bodies[0]!, /PRIVATE KEY/);
  const keyBody = cfg.keyPem.split('\n').filter((l) => l && !l.startsWith('-----')).join('');
  t.notOk(bodies[0]!.replace(/\\n/g, '').includes(keyBody.slice(0, 60)), 'no key material in the request');

  // refuses to overwrite, unless force
  await t.rejects(enroll({ controlPlane: url, token: 'tok_2', configDir: dir, keyBits: 2048 }), { code: 'RELAY_ERR_CONFIG_EXISTS' });
  t.equal(bodies.length, 1, 'nothing sent when refusing');
  const r2 = await enroll({ controlPlane: url, token: 'tok_2', configDir: dir, keyBits: 2048, force: true });
  t.equal(r2.relay_id, 'rly_1');
  t.not(loadConfig(dir).keyPem, cfg.keyPem, 'a new key');
});

t.test('HTTP errors carry the API code and message', async (t) => {
  const { url } = await fakeServer(t, (_b, res) => {
    res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'enroll_token_invalid', message: 'the token was already used' } }));
  });
  const dir = mkdtempSync(join(tmpdir(), 'relay-'));
  const err = (await enroll({ controlPlane: url, token: 'x', configDir: dir, keyBits: 2048 }).catch((e: unknown) => e)) as RelayError;
  t.ok(err instanceof RelayError);
  t.equal(err.code, 'RELAY_ERR_REGISTER_REFUSED');
  t.match(err.message, /HTTP 401 enroll_token_invalid/);
  t.match(err.message, /already used/);
  t.throws(() => loadConfig(dir), { code: 'RELAY_ERR_CONFIG_MISSING' });
});

t.test('bad 201 body, unreachable control plane, bad arguments', async (t) => {
  const { url } = await fakeServer(t, (_b, res) => res.writeHead(201).end('{"relay_id":"x"}'));
  const dir = mkdtempSync(join(tmpdir(), 'relay-'));
  await t.rejects(enroll({ controlPlane: url, token: 'x', configDir: dir, keyBits: 2048 }), { code: 'RELAY_ERR_BAD_RESPONSE' });
  // a port nobody listens on
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const err = (await enroll({ controlPlane: `http://127.0.0.1:${port}`, token: 'x', configDir: dir, keyBits: 2048, retry: { retries: 1, minTimeoutMs: 1 } }).catch((e: unknown) => e)) as RelayError;
  t.equal(err.code, 'RELAY_ERR_UNREACHABLE');
  t.match(err.message, /ECONNREFUSED.*\(after 2 attempts\)/);
  await t.rejects(enroll({ controlPlane: 'ftp://x', token: 'x', configDir: dir }), { code: 'RELAY_ERR_INVALID_ARGUMENT' });
  await t.rejects(enroll({ controlPlane: url, token: '', configDir: dir }), { code: 'RELAY_ERR_INVALID_ARGUMENT' });
  const d2 = mkdtempSync(join(tmpdir(), 'relay-'));
  mkdirSync(d2, { recursive: true });
  writeFileSync(join(d2, 'relay.json'), 'not json');
  t.throws(() => loadConfig(d2), { code: 'RELAY_ERR_CONFIG_INVALID' });
  t.ok(readFileSync);
});

t.test('a key.pem that is not the key of cert.pem is refused at load, not redialled for ever', async (t) => {
  // walk-through: a certificate from `svc relay rotate` installed without its new key made
  // `svc-relay run` retry the tunnel for ever ("cannot reach the tunnel … key values mismatch")
  const { url } = await fakeServer(t, okHandler);
  const a = join(mkdtempSync(join(tmpdir(), 'relay-')), 'a');
  const b = join(mkdtempSync(join(tmpdir(), 'relay-')), 'b');
  await enroll({ controlPlane: url, token: 'tok_a', configDir: a, keyBits: 2048 });
  await enroll({ controlPlane: url, token: 'tok_b', configDir: b, keyBits: 2048 });
  copyFileSync(join(b, 'key.pem'), join(a, 'key.pem'));
  const err = t.throws(() => loadConfig(a), { code: 'RELAY_ERR_CONFIG_INVALID' }) as RelayError;
  t.match(err.message, /key\.pem is not the private key of .*cert\.pem.*enroll again/);
  // found by review: a key encrypted with a passphrase (svc-relay takes none) was refused with
  // OpenSSL's "interrupted or cancelled", which names neither the passphrase nor a way out
  const encrypted = createPrivateKey(readFileSync(join(b, 'key.pem'), 'utf8')).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'hunter2-secret' }) as string;
  writeFileSync(join(b, 'key.pem'), encrypted, { mode: 0o600 });
  const enc = t.throws(() => loadConfig(b), { code: 'RELAY_ERR_CONFIG_INVALID' }) as RelayError;
  t.match(enc.message, /key\.pem is encrypted with a passphrase.*openssl pkey/);
  t.notMatch(enc.message, /interrupted or cancelled|hunter2/);
  copyFileSync(join(a, 'key.pem'), join(b, 'key.pem')); // a's key.pem is b's own key (copied above)
  writeFileSync(join(a, 'key.pem'), 'not a key', { mode: 0o600 });
  t.throws(() => loadConfig(a), { code: 'RELAY_ERR_CONFIG_INVALID' }, 'an unreadable key is a configuration error too');
  t.equal(loadConfig(b).relay_id, 'rly_1', 'a pair that belongs together loads');
});

t.test('a private key that other users can read is refused at load', async (t) => {
  // walk-through: a --database-url-file readable by others is refused, but key.pem at 0644 was used
  const { url } = await fakeServer(t, okHandler);
  const dir = join(mkdtempSync(join(tmpdir(), 'relay-')), 'cfg');
  await enroll({ controlPlane: url, token: 'tok', configDir: dir, keyBits: 2048 });
  for (const mode of [0o644, 0o640, 0o604]) {
    chmodSync(join(dir, 'key.pem'), mode);
    const err = t.throws(() => loadConfig(dir), { code: 'RELAY_ERR_CONFIG_INVALID' }, mode.toString(8)) as RelayError;
    t.match(err.message, new RegExp(`key\\.pem can be read by other users \\(mode ${mode.toString(8)}\\); chmod 600 it`));
  }
  chmodSync(join(dir, 'key.pem'), 0o400);
  t.equal(loadConfig(dir).relay_id, 'rly_1', 'owner-only (0400 or 0600) loads');
});

t.test('key.pem that is not a regular file is refused at load, without waiting', async (t) => {
  // review: the key was read by path and its mode checked by path afterwards; a named pipe made the read wait for a writer for ever
  const { url } = await fakeServer(t, okHandler);
  const dir = join(mkdtempSync(join(tmpdir(), 'relay-')), 'cfg');
  await enroll({ controlPlane: url, token: 'tok', configDir: dir, keyBits: 2048 });
  rmSync(join(dir, 'key.pem'));
  execFileSync('mkfifo', ['-m', '600', join(dir, 'key.pem')]);
  const err = t.throws(() => loadConfig(dir), { code: 'RELAY_ERR_CONFIG_INVALID' }) as RelayError;
  t.match(err.message, /key\.pem is not a regular file/);
});

t.test("the certificate's own end is the one loaded, not relay.json's copy", async (t) => {
  // walk-through: a pair installed by hand (an operator's renew) left relay.json's expires_at stale
  const { url } = await fakeServer(t, okHandler);
  const dir = join(mkdtempSync(join(tmpdir(), 'relay-')), 'cfg');
  await enroll({ controlPlane: url, token: 'tok', configDir: dir, keyBits: 2048 });
  const actual = new Date(new X509Certificate(readFileSync(join(dir, 'cert.pem'), 'utf8')).validTo).toISOString();
  const cfg = JSON.parse(readFileSync(join(dir, 'relay.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'relay.json'), JSON.stringify({ ...cfg, expires_at: '2020-01-01T00:00:00.000Z' }), { mode: 0o600 });
  t.equal(loadConfig(dir).expires_at, actual);
});
