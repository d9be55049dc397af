import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import forge from 'node-forge';
import t from 'tap';
import {
  CA_CERT_FILE,
  CA_KEY_FILE,
  caFromPem,
  generateCaPem,
  generateKeyAndCsr,
  issueClientCertificate,
  issueServerCertificate,
  loadCa,
  loadOrCreateCa,
  PkiError,
  verifyClientCertificate,
  type Ca,
  type PkiErrorCode,
} from '../../pki/index.js';

const root = mkdtempSync(join(tmpdir(), 'svc-pki-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

const relay = generateKeyAndCsr();
const never = () => false;

function codeOf(fn: () => unknown): PkiErrorCode | 'no error' | 'not a PkiError' {
  try {
    fn();
    return 'no error';
  } catch (err) {
    return err instanceof PkiError ? err.code : 'not a PkiError';
  }
}

const mode = (path: string) => statSync(path).mode & 0o777;

// The default (RSA 3072) CA, created once on disk and shared by the cases below.
const dir = join(root, 'state', 'ca');
const created = loadOrCreateCa(dir);

t.test('first start creates the CA: RSA 3072, key 0600, certificate 0644, directory 0700', async (t) => {
  t.same(readdirSync(dir).sort(), [CA_CERT_FILE, CA_KEY_FILE].sort(), 'just the two files, no temporaries left');
  t.equal(mode(join(dir, CA_KEY_FILE)), 0o600);
  t.equal(mode(join(dir, CA_CERT_FILE)), 0o644);
  t.equal(mode(dir), 0o700);
  t.equal(created.dir, dir);
  t.equal(created.certificate.publicKey.asymmetricKeyDetails?.modulusLength, 3072);
  t.equal(created.certificate.ca, true);
  t.ok(created.certificate.verify(created.certificate.publicKey), 'self-signed');
  t.equal(created.certificate.subject, 'CN=svc relay CA\nO=svc');
  t.match(readFileSync(join(dir, CA_KEY_FILE), 'utf8'), /^-----BEGIN PRIVATE KEY-----\n/);
  t.equal(readFileSync(join(dir, CA_CERT_FILE), 'utf8'), created.certPem);
  const years = (created.notAfter.getTime() - created.notBefore.getTime()) / (365.25 * 86_400_000);
  t.ok(years > 9.9 && years < 10.1, 'valid for 10 years');
  const bc = forge.pki.certificateFromPem(created.certPem).getExtension('basicConstraints') as Record<string, unknown>;
  t.match(bc, { cA: true, pathLenConstraint: 0, critical: true });
  t.match(forge.pki.certificateFromPem(created.certPem).getExtension('keyUsage'), { keyCertSign: true, cRLSign: true, digitalSignature: false });
});

t.test('a second loadOrCreateCa returns the same CA and changes nothing on disk', async (t) => {
  const before = { key: readFileSync(join(dir, CA_KEY_FILE)), cert: readFileSync(join(dir, CA_CERT_FILE)), mtime: statSync(join(dir, CA_KEY_FILE)).mtimeMs };
  const again = loadOrCreateCa(dir);
  t.equal(again.certPem, created.certPem);
  t.equal(again.serial, created.serial);
  t.equal(again.fingerprint256, created.fingerprint256);
  t.same(again.notAfter, created.notAfter);
  t.same(readFileSync(join(dir, CA_KEY_FILE)), before.key);
  t.same(readFileSync(join(dir, CA_CERT_FILE)), before.cert);
  t.equal(statSync(join(dir, CA_KEY_FILE)).mtimeMs, before.mtime);
  t.equal(loadCa(dir).fingerprint256, created.fingerprint256);
  // The same key too: what one instance issues, the other accepts, both ways.
  const byFirst = issueClientCertificate(created, relay.csrPem, { relayId: 'r1', orgId: 'o1' });
  const bySecond = issueClientCertificate(again, relay.csrPem, { relayId: 'r2', orgId: 'o1' });
  t.ok(verifyClientCertificate(again, byFirst.certPem, { isRevoked: never }).ok);
  t.ok(verifyClientCertificate(created, bySecond.certPem, { isRevoked: never }).ok);
});

t.test('the CA key is never a property of the Ca object', async (t) => {
  const key = readFileSync(join(dir, CA_KEY_FILE), 'utf8');
  const chunk = key.split('\n')[5] ?? 'unreachable';
  for (const text of [JSON.stringify(created), inspect(created, { depth: 10, showHidden: true })]) {
    t.notOk(text.includes('PRIVATE KEY'), 'no PEM header');
    t.notOk(text.includes(chunk), 'no key material');
  }
  t.ok(Object.isFrozen(created));
  const copy = { ...created } as Ca;
  t.equal(codeOf(() => issueClientCertificate(copy, relay.csrPem, { relayId: 'r', orgId: 'o' })), 'PKI_ERR_INVALID_OPTIONS', 'a look-alike object cannot sign');
});

t.test('the umask does not narrow the certificate nor widen the key', async (t) => {
  const previous = process.umask(0o077);
  try {
    const d = join(root, 'umask077');
    loadOrCreateCa(d, { keyBits: 2048 });
    t.equal(mode(join(d, CA_KEY_FILE)), 0o600);
    t.equal(mode(join(d, CA_CERT_FILE)), 0o644);
  } finally {
    process.umask(previous);
  }
  const previous2 = process.umask(0);
  try {
    const d = join(root, 'umask000');
    loadOrCreateCa(d, { keyBits: 2048 });
    t.equal(mode(join(d, CA_KEY_FILE)), 0o600);
  } finally {
    process.umask(previous2);
  }
});

t.test('an existing directory is used as is', async (t) => {
  const d = join(root, 'existing');
  mkdirSync(d, { mode: 0o755 });
  const ca = loadOrCreateCa(d, { keyBits: 2048, commonName: 'test CA', validityDays: 365 });
  t.equal(ca.certificate.subject, 'CN=test CA\nO=svc');
  t.equal(mode(d), 0o755, 'not our directory: its mode is left alone');
});

t.test('an incomplete, corrupt or mismatched CA directory is refused, never overwritten', async (t) => {
  const other = generateCaPem({ keyBits: 2048 });
  const setup = (name: string, files: { key?: string; cert?: string }) => {
    const d = join(root, name);
    mkdirSync(d);
    if (files.key !== undefined) writeFileSync(join(d, CA_KEY_FILE), files.key, { mode: 0o600 });
    if (files.cert !== undefined) writeFileSync(join(d, CA_CERT_FILE), files.cert);
    return d;
  };
  const keyOnly = setup('key-only', { key: other.keyPem });
  t.equal(codeOf(() => loadOrCreateCa(keyOnly)), 'PKI_ERR_CA_LOAD');
  t.equal(readFileSync(join(keyOnly, CA_KEY_FILE), 'utf8'), other.keyPem, 'the key is untouched');
  t.same(readdirSync(keyOnly), [CA_KEY_FILE], 'no certificate was made up for it');

  t.equal(codeOf(() => loadOrCreateCa(setup('cert-only', { cert: other.certPem }))), 'PKI_ERR_CA_LOAD');
  t.equal(codeOf(() => loadOrCreateCa(setup('corrupt-key', { key: 'garbage', cert: other.certPem }))), 'PKI_ERR_CA_LOAD');
  t.equal(codeOf(() => loadOrCreateCa(setup('corrupt-cert', { key: other.keyPem, cert: 'garbage' }))), 'PKI_ERR_CA_LOAD');
  const ours = readFileSync(join(dir, CA_KEY_FILE), 'utf8');
  t.equal(codeOf(() => loadOrCreateCa(setup('mismatch', { key: ours, cert: other.certPem }))), 'PKI_ERR_CA_LOAD', 'key of one CA, certificate of another');
  const leaf = issueServerCertificate(caFromPem(other), { dnsNames: ['localhost'] });
  t.equal(codeOf(() => loadOrCreateCa(setup('not-a-ca', { key: leaf.keyPem, cert: leaf.certPem }))), 'PKI_ERR_CA_LOAD', 'a leaf is not a CA');
  t.equal(codeOf(() => loadCa(join(root, 'missing'))), 'PKI_ERR_CA_LOAD');
  const aFile = join(root, 'a-file');
  writeFileSync(aFile, 'x');
  t.equal(codeOf(() => loadOrCreateCa(join(aFile, 'ca'), { keyBits: 2048 })), 'PKI_ERR_CA_LOAD', 'an unwritable place');
});

t.test('CA options are validated', async (t) => {
  t.equal(codeOf(() => generateCaPem({ keyBits: 1024 })), 'PKI_ERR_INVALID_OPTIONS');
  t.equal(codeOf(() => generateCaPem({ validityDays: 0 })), 'PKI_ERR_INVALID_OPTIONS');
  t.equal(codeOf(() => generateCaPem({ commonName: '' })), 'PKI_ERR_INVALID_OPTIONS');
  t.equal(codeOf(() => generateCaPem({ now: new Date('x') })), 'PKI_ERR_INVALID_OPTIONS');
});

t.test('a CA loaded from PEMs issues certificates the node:crypto chain check accepts', async (t) => {
  const x = new X509Certificate(issueClientCertificate(created, relay.csrPem, { relayId: 'r', orgId: 'o' }).certPem);
  t.ok(x.checkIssued(created.certificate));
  t.ok(x.verify(created.certificate.publicKey));
});
