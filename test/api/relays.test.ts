/**
 * The relay lifecycle API with real certificates from our CA: enrollment tokens, registration
 * from a CSR made on the "relay" side, listing, renewal and rotation with overlap, deletion and
 * the revocation check the tunnel listener runs.
 */
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../cli/dist.js';
import { generateKeyAndCsr, identityOf } from '../../pki/index.js';
import { certificateInUse, checkCertificate } from '../../control-plane/relays/index.js';
import { metricSample } from '../helpers/metrics.js';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

type Registered = { relay_id: string; certificate_pem: string; ca_certificate_pem: string; tunnel_url: string; expires_at: string };
type Err = { error: { code: string; message: string; details?: Record<string, unknown> } };

// RSA keys take a moment: make a few once
const keyA = generateKeyAndCsr({ commonName: 'someone-else' });
const keyB = generateKeyAndCsr();

async function token(key: string): Promise<string> {
  const r = await api<{ token: string; expires_at: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key, body: {} });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.token;
}

t.test('enroll, register from a CSR, and get a certificate with our identity', async (t) => {
  const a = await signupAgent(srv.url);
  t.equal((await api(srv.url, 'POST', '/v1/relays/enroll-token', { body: {} })).status, 401, 'a token needs the agent key');
  const tok = await api<{ token: string; expires_at: string }>(srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: {} });
  t.equal(tok.status, 201);
  t.match(tok.body.token, /^svc_enroll_[A-Za-z0-9_-]{43}$/);
  const ttl = Date.parse(tok.body.expires_at) - Date.now();
  t.ok(ttl > 3_500_000 && ttl <= 3_600_000, 'expires in 1 h by default');
  const stored = JSON.stringify(await srv.svc.store.query('SELECT * FROM relay_enroll_tokens'));
  t.notOk(stored.includes(tok.body.token.slice(11)), 'only a hash of the token is stored');

  const r = await api<Registered>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok.body.token, csr_pem: keyA.csrPem, name: 'warehouse-db' } });
  t.equal(r.status, 201, r.status === 201 ? '201' : r.text);
  t.match(r.body.relay_id, /^rly_/);
  t.equal(r.body.tunnel_url, srv.config.tunnelPublicUrl);
  const cert = new X509Certificate(r.body.certificate_pem);
  const ca = new X509Certificate(r.body.ca_certificate_pem);
  t.ok(cert.checkIssued(ca) && cert.verify(ca.publicKey), 'issued and signed by our CA');
  const id = identityOf(cert);
  t.equal(id.relayId, r.body.relay_id, 'the identity is ours, not the CSR subject');
  t.equal(id.orgId, a.orgId);
  t.notMatch(cert.subject, /someone-else/);
  t.equal(new Date(r.body.expires_at).getTime(), new Date(cert.validTo).getTime());
  t.notOk(JSON.stringify(r.body).includes('PRIVATE KEY'), 'no private key travels');

  const replay = await api<Err>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok.body.token, csr_pem: keyB.csrPem } });
  t.equal(replay.status, 409, 'a token is single-use');
  t.equal(replay.body.error.code, 'conflict');

  const unknown = await api<Err>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: `svc_enroll_${'A'.repeat(43)}`, csr_pem: keyB.csrPem } });
  t.equal(unknown.status, 401);
  t.equal(unknown.body.error.code, 'unauthorized');

  const list = await api<{ relays: { relay_id: string; name: string; status: string; certificate_expires_at: string; last_seen_at: null; version: null }[] }>(srv.url, 'GET', '/v1/relays', { key: a.key });
  t.same(list.body.relays.map((x) => [x.relay_id, x.name, x.status]), [[r.body.relay_id, 'warehouse-db', 'offline']]);
  t.equal(list.body.relays[0]?.certificate_expires_at, r.body.expires_at);

  const b = await signupAgent(srv.url, 'Other Org');
  t.same((await api<{ relays: unknown[] }>(srv.url, 'GET', '/v1/relays', { key: b.key })).body.relays, [], 'another org sees none');
  t.equal((await api(srv.url, 'GET', `/v1/relays/${r.body.relay_id}`, { key: b.key })).status, 404);
  t.equal((await api(srv.url, 'DELETE', `/v1/relays/${r.body.relay_id}`, { key: b.key })).status, 404);
});

t.test('expired tokens and bad CSRs are refused; a bad CSR does not burn the token', async (t) => {
  const a = await signupAgent(srv.url);
  const expired = await token(a.key);
  await srv.svc.store.query("UPDATE relay_enroll_tokens SET expires_at = now() - interval '1 second' WHERE used_at IS NULL AND org_id = $1", [a.orgId]);
  const e = await api<Err>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: expired, csr_pem: keyB.csrPem } });
  t.equal(e.status, 401);
  t.match(e.body.error.message, /expired/);

  const tok = await token(a.key);
  const tampered = keyB.csrPem.replace(/(\n[A-Za-z0-9+/]{20})([A-Za-z0-9+/])/, (_m, p: string, c: string) => `${p}${c === 'A' ? 'B' : 'A'}`);
  for (const csr of ['not a csr', '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----', tampered]) {
    const r = await api<Err>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok, csr_pem: csr } });
    t.equal(r.status, 400, 'bad CSR');
    t.equal(r.body.error.code, 'invalid_request');
    t.equal(r.body.error.details?.['field'], 'csr_pem');
  }
  const ok = await api(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok, csr_pem: keyB.csrPem } });
  t.equal(ok.status, 201, 'the token still works after a bad CSR');
});

t.test('two registrations racing with one token: exactly one wins', async (t) => {
  const a = await signupAgent(srv.url);
  const tok = await token(a.key);
  const results = await Promise.all(Array.from({ length: 5 }, () => api(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: tok, csr_pem: keyB.csrPem } })));
  t.same(results.map((r) => r.status).sort(), [201, 409, 409, 409, 409]);
  t.equal((await api<{ relays: unknown[] }>(srv.url, 'GET', '/v1/relays', { key: a.key })).body.relays.length, 1);
});

t.test('renew and rotate overlap, then the old certificate is revoked; delete revokes everything', async (t) => {
  const a = await signupAgent(srv.url);
  const issued = (event: string): Promise<number> => metricSample(srv.url, 'svc_relay_certificates_issued_total', `{event="${event}"}`);
  const [renewedBefore, rotatedBefore] = [await issued('certificate.renewed'), await issued('certificate.rotated')];
  const reg = await api<Registered>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: await token(a.key), csr_pem: keyA.csrPem } });
  const relayId = reg.body.relay_id;
  const first = new X509Certificate(reg.body.certificate_pem);
  const ids = (c: X509Certificate) => [identityOf(c).serial, identityOf(c).fingerprint256] as const;
  t.match(await checkCertificate(srv.svc.store, ...ids(first)), { ok: true, relayId, orgId: a.orgId });

  const renewed = await api<Registered>(srv.url, 'POST', `/v1/relays/${relayId}/renew`, { key: a.key, body: { csr_pem: keyA.csrPem } });
  t.equal(renewed.status, 200, renewed.status === 200 ? '200' : renewed.text);
  const second = new X509Certificate(renewed.body.certificate_pem);
  t.not(identityOf(second).serial, identityOf(first).serial);
  t.match(await checkCertificate(srv.svc.store, ...ids(first)), { ok: true }, 'the old certificate stays valid during the overlap');

  const sameKey = await api<Err>(srv.url, 'POST', `/v1/relays/${relayId}/rotate-cert`, { key: a.key, body: { csr_pem: keyA.csrPem } });
  t.equal(sameKey.status, 400, 'rotation needs a new key pair');
  const rotated = await api<Registered>(srv.url, 'POST', `/v1/relays/${relayId}/rotate-cert`, { key: a.key, body: { csr_pem: keyB.csrPem } });
  t.equal(rotated.status, 200);
  const third = new X509Certificate(rotated.body.certificate_pem);

  // the tunnel sees the newest certificate in use: the ones it replaced are revoked
  t.equal(await certificateInUse(srv.svc.store, identityOf(third).serial), 2);
  t.match(await checkCertificate(srv.svc.store, ...ids(first)), { ok: false, reason: 'revoked' });
  t.match(await checkCertificate(srv.svc.store, ...ids(second)), { ok: false, reason: 'revoked' });
  t.match(await checkCertificate(srv.svc.store, ...ids(third)), { ok: true });
  // an overlap window that passed also ends a replaced certificate
  const again = await api<Registered>(srv.url, 'POST', `/v1/relays/${relayId}/renew`, { key: a.key, body: { csr_pem: keyB.csrPem } });
  t.match(await checkCertificate(srv.svc.store, ...ids(third), new Date(Date.now() + 25 * 3600_000)), { ok: false, reason: 'superseded' });
  t.match(await checkCertificate(srv.svc.store, ...ids(new X509Certificate(again.body.certificate_pem))), { ok: true });
  t.match(await checkCertificate(srv.svc.store, 'ab'.repeat(16), 'cd'.repeat(32)), { ok: false, reason: 'unknown' });
  t.equal(await issued('certificate.renewed'), renewedBefore + 2, 'GET /metrics counts the two renewals');
  t.equal(await issued('certificate.rotated'), rotatedBefore + 1, 'and the one rotation issued (not the one refused)');
  // walk-through: once its overlap window has passed, GET showed the replaced certificate as
  // `superseded` for ever, though it is refused everywhere (docs/api.md: "… then is revoked")
  await srv.svc.store.query("UPDATE relay_certificates SET overlap_until = now() - interval '1 second' WHERE serial = $1", [identityOf(third).serial]);
  const shown = await api<{ certificates: { serial: string; state: string }[] }>(srv.url, 'GET', `/v1/relays/${relayId}`, { key: a.key });
  t.equal(shown.body.certificates.find((c) => c.serial === identityOf(third).serial)?.state, 'revoked', 'a replaced certificate past its overlap window shows as revoked');
  t.equal(shown.body.certificates.find((c) => c.serial === identityOf(new X509Certificate(again.body.certificate_pem)).serial)?.state, 'active');

  const del = await api<{ status: string; revoked_at: string; certificates: { state: string; overlap_until: string | null }[]; events: { kind: string }[] }>(srv.url, 'DELETE', `/v1/relays/${relayId}`, { key: a.key });
  t.equal(del.status, 200);
  t.equal(del.body.status, 'revoked');
  t.ok(del.body.certificates.every((c) => c.state === 'revoked'), 'every certificate revoked');
  // walk-through: a certificate revoked inside its overlap window still showed the window's end a day ahead
  const overlaps = del.body.certificates.map((c) => c.overlap_until).filter((o): o is string => o !== null);
  t.ok(overlaps.length > 0, 'some certificates were replaced');
  t.ok(overlaps.every((o) => Date.parse(o) <= Date.parse(del.body.revoked_at)), `no overlap window reaches past the deletion: ${overlaps.join(', ')} vs ${del.body.revoked_at}`);
  t.match(await checkCertificate(srv.svc.store, ...ids(third)), { ok: false });
  t.same(
    del.body.events.map((e) => e.kind),
    ['relay.registered', 'certificate.renewed', 'certificate.rotated', 'certificate.replaced', 'certificate.renewed', 'relay.deleted'],
    'every lifecycle event is recorded',
  );
  // walk-through: the event kinds were named nowhere in the docs
  const apiDoc = fs.readFileSync(path.join(ROOT, 'docs', 'api.md'), 'utf8');
  for (const kind of new Set(del.body.events.map((e) => e.kind))) t.match(apiDoc, `\`${kind}\``, `docs/api.md names the event kind ${kind}`);
  const late = await api<Err>(srv.url, 'POST', `/v1/relays/${relayId}/renew`, { key: a.key, body: { csr_pem: keyB.csrPem } });
  t.equal(late.status, 409, 'a deleted relay cannot renew');
  const listed = await api<{ relays: { status: string }[] }>(srv.url, 'GET', '/v1/relays', { key: a.key });
  t.equal(listed.body.relays[0]?.status, 'revoked');
});

t.test('one CA for the control plane, its key sealed in the store', async (t) => {
  const a = await signupAgent(srv.url);
  const one = await api<Registered>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: await token(a.key), csr_pem: keyB.csrPem } });
  const two = await api<Registered>(srv.url, 'POST', '/v1/relays/register', { body: { enroll_token: await token(a.key), csr_pem: keyB.csrPem } });
  t.equal(one.body.ca_certificate_pem, two.body.ca_certificate_pem);
  const [row] = await srv.svc.store.query<{ key_sealed: string }>('SELECT key_sealed FROM ca');
  t.match(row?.key_sealed, /^v2\./, 'sealed, bound to the CA row');
  t.notMatch(row?.key_sealed, /PRIVATE KEY/);
});
