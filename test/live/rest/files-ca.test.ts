/**
 * http-files from a file server whose certificate comes from a private CA: the credential's
 * `options.ca` (docs/credentials-and-live-targets.md) is trusted for its files, over real HTTPS
 * (a CA made in the test, pki/index.ts) and the real control plane over HTTP. Without it, or with
 * another CA's certificate, the statement is refused as a TLS failure of the customer's own server
 * (400 credential_rejected, not a 503 to retry) and not charged; a bad `options.ca` is refused at
 * registration. The server is on loopback: allowed by SVC_HTTP_FILES_ALLOW_PRIVATE=1.
 */
import https from 'node:https';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { createCa, issueServerCertificate } from '../../../pki/index.js';
import { filesTrust } from '../../../control-plane/live/rest/index.js';
import { HTTP_FILES_KIND } from '../../../control-plane/live/rest/credentials.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../../helpers/server.js';

const ours = createCa({ keyBits: 2048 });
const theirs = createCa({ keyBits: 2048 });
const cert = issueServerCertificate(ours, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
const CSV = 'id,name\n1,Alice\n2,Bob\n';

type Body = { rows?: Record<string, unknown>[]; cost_cents?: number; error?: { code: string; message: string; details?: Record<string, unknown> } };

let srv: TestServer;
let fileUrl: string;
let fetched = 0;
t.before(async () => {
  const server = https.createServer({ key: cert.keyPem, cert: cert.certPem }, (req, res) => {
    fetched++;
    if (req.url !== '/people.csv') {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/csv' });
    res.end(CSV);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fileUrl = `https://127.0.0.1:${(server.address() as AddressInfo).port}/people.csv`;
  // the first file query starts an embedded engine (seconds, more on a busy machine): a long deadline
  srv = await startServer({ env: { SVC_HTTP_FILES_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 60_000 } });
  t.teardown(async () => {
    await srv.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
});

/** a new organization registers the file with `options` besides `files`, and reads it */
async function readWith(options: Record<string, unknown>): Promise<{ status: number; text: string; body: Body; key: string }> {
  const a = await signupAgent(srv.url);
  const reg = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'http-files', secret: '', options: { files: [{ table: 'people', url: fileUrl }], ...options } } });
  if (reg.status !== 201) throw new Error(`registration answered ${reg.status}: ${reg.text}`);
  const conn = await openConnection(srv.url, a.key, 'http-files', ['read:people']);
  const r = await api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT id, name FROM people ORDER BY id' } });
  return { ...r, key: a.key };
}

t.test('options.ca: the files of a server with a private CA are read, trusting that CA', async (t) => {
  const before = fetched;
  const r = await readWith({ ca: ours.certPem });
  t.equal(r.status, 200, r.text);
  t.same(r.body.rows, [
    { id: 1, name: 'Alice' },
    { id: 2, name: 'Bob' },
  ]);
  t.ok(fetched > before, 'fetched from the server');
  const listed = await api<{ credentials: { connector_kind: string }[] }>(srv.url, 'GET', '/v1/connections/credentials', { key: r.key });
  t.notOk(listed.text.includes('BEGIN CERTIFICATE'), 'the listing shows metadata only');
});

t.test('without options.ca, or with another CA, the TLS failure is the credential to fix, not charged', async (t) => {
  for (const [what, options, hint] of [
    ['no options.ca (the system trust store)', {}, /register its certificate as options\.ca/],
    ["another CA's certificate", { ca: theirs.certPem }, /check that options\.ca holds the CA/],
  ] as const) {
    const before = fetched;
    const r = await readWith(options);
    t.equal(r.status, 400, `${what}: ${r.text}`);
    t.equal(r.body.error?.code, 'invalid_request');
    t.equal(r.body.error?.details?.['reason'], 'credential_rejected');
    t.equal(r.body.error?.details?.['connector_kind'], 'http-files');
    t.match(r.body.error?.message, /^TLS to the file server failed \(/);
    t.match(r.body.error?.message, hint, `${what}: says what to change`);
    t.equal(fetched, before, `${what}: no request reached the server`);
    t.equal(r.body.rows, undefined);
    t.equal(r.body.error?.details?.['cost_cents'], undefined, `${what}: no charge named`);
    const usage = await api<{ queries?: number; trial?: { queries_left?: number } }>(srv.url, 'GET', '/v1/agent/account/usage', { key: r.key });
    t.equal(usage.body.trial?.queries_left, 100, `${what}: not charged (${usage.text})`);
  }
});

t.test('a bad options.ca is refused at registration, naming the field', async (t) => {
  const a = await signupAgent(srv.url);
  const forged = '-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n';
  for (const ca of ['not a certificate', forged, 42, `${ours.certPem}${'x'.repeat(70_000)}`]) {
    const r = await api<Body>(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'http-files', secret: '', options: { files: [{ table: 'people', url: fileUrl }], ca } } });
    t.equal(r.status, 400, r.text);
    t.equal(r.body.error?.details?.['field'], 'options.ca');
  }
  const kinds = await api<{ kinds: { connector_kind: string; options: { name: string; required: boolean }[] }[] }>(srv.url, 'GET', '/v1/connections/credentials/kinds', { key: a.key });
  t.same(
    kinds.body.kinds.find((k) => k.connector_kind === 'http-files')?.options.map((o) => [o.name, o.required]),
    [
      ['files', true],
      ['ca', false],
    ],
    'the kinds listing names the option',
  );
});

t.test("options.ca is trusted besides the system store, not instead of it (a redirect to a public server still verifies)", async (t) => {
  const trust = filesTrust(ours.certPem, undefined);
  const pems: string[] = trust?.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  t.equal(pems.length, tls.rootCertificates.length + 1, "Node's bundled roots and the credential's CA");
  t.ok(pems.includes(ours.certPem.trim()), "the credential's CA");
  t.ok(tls.rootCertificates.every((root) => pems.includes(root.trim())), 'every bundled root');
  t.equal(filesTrust(undefined, undefined), undefined, 'without options.ca: the default store');
});

t.test('options.ca keeps certificates only: a private key pasted beside them is not stored', async (t) => {
  const pasted = `${cert.keyPem}\n${ours.certPem}`;
  const kept = HTTP_FILES_KIND.validate('', { files: [{ table: 'people', url: 'https://files.example/people.csv' }], ca: pasted });
  t.match(String(kept['ca']), /BEGIN CERTIFICATE/);
  t.notMatch(JSON.stringify(kept), /PRIVATE KEY/, 'what is stored holds no private key');
});
