/**
 * Crash recovery of a certificate renewal (relay-agent/enroll.ts, loadConfig): a renewal writes
 * key.pem.next and cert.pem.next, then renames them over key.pem and cert.pem. The control plane
 * has superseded the old certificate by then, and a superseded certificate can no longer renew,
 * so an interrupted switch must be FINISHED when the new pair is usable, and only an unusable
 * `.next` file dropped. Real certificates from a real CA; the last test uses the real control
 * plane's renewal endpoint over mutual TLS.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createCa, generateKeyAndCsr, issueClientCertificate, type Ca } from '../../pki/index.js';
import { loadConfig, RenewError, requestRenewal, writeFileAtomic } from '../../relay-agent/index.js';
import { api, signupAgent, startServer } from '../helpers/server.js';
import { enrollRelay, rmDir } from './harness.js';

const RELAY = 'rly_recovery';
const ORG = 'org_recovery';
const ca = createCa({ keyBits: 2048 });

interface Pair {
  keyPem: string;
  certPem: string;
  notAfter: Date;
}

function pair(o: { ca?: Ca; relayId?: string; validityDays?: number; now?: Date } = {}): Pair {
  const k = generateKeyAndCsr();
  const c = issueClientCertificate(o.ca ?? ca, k.csrPem, { relayId: o.relayId ?? RELAY, orgId: ORG, ...(o.validityDays ? { validityDays: o.validityDays } : {}), ...(o.now ? { now: o.now } : {}) });
  return { keyPem: k.keyPem, certPem: c.certPem, notAfter: c.notAfter };
}

const old = pair();

/** a config dir as enroll left it (old pair), plus the given extra files */
function configDir(files: Record<string, string>, current: { keyPem: string; certPem: string } = old): string {
  const dir = mkdtempSync(join(tmpdir(), 'relay-recovery-'));
  const cfg = { relay_id: RELAY, tunnel_url: 'wss://127.0.0.1:1', control_plane: 'http://127.0.0.1:1', expires_at: old.notAfter.toISOString() };
  writeFileSync(join(dir, 'relay.json'), JSON.stringify(cfg), { mode: 0o600 });
  writeFileSync(join(dir, 'key.pem'), current.keyPem, { mode: 0o600 });
  writeFileSync(join(dir, 'cert.pem'), current.certPem, { mode: 0o600 });
  writeFileSync(join(dir, 'ca.pem'), ca.certPem, { mode: 0o600 });
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content, { mode: 0o600 });
  return dir;
}

function load(dir: string): { cfg: ReturnType<typeof loadConfig>; logs: string[] } {
  const logs: string[] = [];
  const cfg = loadConfig(dir, (l) => logs.push(l));
  return { cfg, logs };
}

const noNextFiles = (dir: string): boolean => !existsSync(join(dir, 'key.pem.next')) && !existsSync(join(dir, 'cert.pem.next'));

t.test('both .next files, renames never started: the switch is finished', async (t) => {
  const fresh = pair();
  const dir = configDir({ 'key.pem.next': fresh.keyPem, 'cert.pem.next': fresh.certPem });
  const { cfg, logs } = load(dir);
  t.equal(cfg.keyPem, fresh.keyPem, 'the new key is in place');
  t.equal(cfg.certPem, fresh.certPem, 'the new certificate is in place');
  t.ok(noNextFiles(dir));
  t.equal(cfg.expires_at, fresh.notAfter.toISOString(), 'relay.json says when the new certificate expires');
  t.equal(JSON.parse(readFileSync(join(dir, 'relay.json'), 'utf8')).expires_at, fresh.notAfter.toISOString());
  t.match(logs, [/finished an interrupted certificate renewal/]);
  t.same(load(dir).logs, [], 'nothing left to do on the next start');
});

t.test('only cert.pem.next, the key already switched: the certificate follows', async (t) => {
  const fresh = pair();
  const dir = configDir({ 'cert.pem.next': fresh.certPem }, { keyPem: fresh.keyPem, certPem: old.certPem });
  const { cfg, logs } = load(dir);
  t.equal(cfg.keyPem, fresh.keyPem);
  t.equal(cfg.certPem, fresh.certPem);
  t.ok(noNextFiles(dir));
  t.match(logs, [/finished/]);
});

t.test('only key.pem.next: the certificate never reached the disk, the old pair stands', async (t) => {
  const dir = configDir({ 'key.pem.next': pair().keyPem });
  const { cfg, logs } = load(dir);
  t.equal(cfg.keyPem, old.keyPem);
  t.equal(cfg.certPem, old.certPem);
  t.ok(noNextFiles(dir));
  t.match(logs, [/dropped key\.pem\.next.*enroll again/]);
});

t.test('an unusable cert.pem.next is dropped, never installed', async (t) => {
  const fresh = pair();
  const cases: [string, string, RegExp][] = [
    ['the certificate of another key', pair().certPem, /not the certificate of the new key/],
    ["another CA's certificate for another key", issueClientCertificate(createCa({ keyBits: 2048 }), generateKeyAndCsr().csrPem, { relayId: RELAY, orgId: ORG }).certPem, /.+/],
    ['garbage', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', /.+/],
  ];
  for (const [what, certPem, why] of cases) {
    const dir = configDir({ 'key.pem.next': fresh.keyPem, 'cert.pem.next': certPem });
    const { cfg, logs } = load(dir);
    t.equal(cfg.certPem, old.certPem, `${what}: the old certificate stands`);
    t.equal(cfg.keyPem, old.keyPem, `${what}: the old key stands`);
    t.ok(noNextFiles(dir), `${what}: the .next files are gone`);
    t.match(logs, [why], what);
  }
  // signed by another CA, for the key next to it
  const foreignKey = generateKeyAndCsr();
  const foreign = issueClientCertificate(createCa({ keyBits: 2048 }), foreignKey.csrPem, { relayId: RELAY, orgId: ORG });
  let r = load(configDir({ 'key.pem.next': foreignKey.keyPem, 'cert.pem.next': foreign.certPem }));
  t.equal(r.cfg.certPem, old.certPem);
  t.match(r.logs, [/not issued by the CA in ca\.pem/]);
  // our CA, but for another relay
  const elsewhere = pair({ relayId: 'rly_someone_else' });
  r = load(configDir({ 'key.pem.next': elsewhere.keyPem, 'cert.pem.next': elsewhere.certPem }));
  t.equal(r.cfg.certPem, old.certPem);
  t.match(r.logs, [/names another relay/]);
  // ours, this relay, but expired (issued 4 minutes ago for 1 minute)
  const expired = pair({ validityDays: 1 / 1440, now: new Date(Date.now() - 4 * 60_000) });
  r = load(configDir({ 'key.pem.next': expired.keyPem, 'cert.pem.next': expired.certPem }));
  t.equal(r.cfg.certPem, old.certPem);
  t.match(r.logs, [/expired/]);
});

t.test('against the real control plane: a renewal interrupted before its renames is finished and renews again', async (t) => {
  const srv = await startServer();
  const tunnel = await srv.svc.startTunnel();
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url);
  const enrolled = await enrollRelay(srv.url, a.key, 'crashy');
  const dir = enrolled.configDir;
  t.teardown(() => rmDir(join(dir, '..')));
  // enroll records the public tunnel URL; this test's listener is on its own port
  const tunnelUrl = `wss://127.0.0.1:${tunnel.port}`;
  const before = { ...loadConfig(dir), tunnel_url: tunnelUrl };

  // the renewal as RelayCredentials.renew does it, "crashing" after the .next files are written
  const renewed = await requestRenewal(before);
  writeFileAtomic(dir, 'key.pem.next', renewed.keyPem);
  writeFileAtomic(dir, 'cert.pem.next', renewed.certPem);

  // the old certificate is superseded: it can no longer renew, so dropping the new pair would strand the relay
  const refused = await requestRenewal(before).catch((e: unknown) => e);
  t.ok(refused instanceof RenewError);
  t.match(refused, { status: 403, reason: 'certificate_superseded' });

  const logs: string[] = [];
  const after = { ...loadConfig(dir, (l) => logs.push(l)), tunnel_url: tunnelUrl };
  t.equal(after.certPem, renewed.certPem, 'the renewed certificate is in place');
  t.equal(after.keyPem, renewed.keyPem);
  t.ok(noNextFiles(dir));
  t.match(logs, [/finished/]);
  const again = await requestRenewal(after);
  t.not(again.serial, renewed.serial, 'the recovered certificate renews');
  const view = await api<{ certificates: { state: string }[] }>(srv.url, 'GET', `/v1/relays/${enrolled.relay_id}`, { key: a.key });
  t.same(
    view.body.certificates.map((c) => c.state),
    ['superseded', 'superseded', 'active'],
  );
});
