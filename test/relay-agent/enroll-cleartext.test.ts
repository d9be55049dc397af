/**
 * Enrollment is where a relay learns whom to trust: the registration answer carries ca.pem, the
 * only CA it will accept for the tunnel, and the request carries the enrollment token. Over
 * `http://` to another machine both travel in the clear, so whoever sits on the path can hand the
 * relay a CA of their own (and then run statements on the customer's database through it) or
 * spend the token. `svc-relay enroll` said nothing about it; it now warns (stderr, before the
 * request) for `http://` to any host but this one's loopback, and stays quiet for `https://` and
 * for loopback. A real HTTP server on port 0 stands in for the control plane.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { cleartextEnrollment, enroll } from '../../relay-agent/enroll.js';

t.test('which control plane URLs are warned about', async (t) => {
  for (const url of ['http://svc.example.com', 'http://10.0.0.5:8080', 'http://[2001:db8::1]:8080', 'http://localhost.example.com']) {
    t.match(cleartextEnrollment(url), /travel unencrypted.*https:\/\//, url);
  }
  for (const url of ['https://svc.example.com', 'http://127.0.0.1:8080', 'http://127.9.9.9', 'http://localhost:8080', 'http://[::1]:8080', 'http://db.localhost']) {
    t.equal(cleartextEnrollment(url), null, url);
  }
});

t.test('enroll warns before it sends the token over http:// to another machine', async (t) => {
  const lines: string[] = [];
  const dir = join(mkdtempSync(join(tmpdir(), 'relay-')), 'cfg');
  const err = await enroll({ controlPlane: 'http://svc-control-plane.invalid:9', token: 'tok', configDir: dir, keyBits: 2048, retry: { retries: 0 }, log: (l) => lines.push(l) }).catch((e: unknown) => e);
  t.ok(err instanceof Error, 'the host does not exist');
  t.match(lines[0], /^warning: .*http:\/\/svc-control-plane\.invalid:9.*travel unencrypted/);

  // loopback: what the README's first session uses, no warning
  const srv = createServer((_req, res) => res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"code":"unauthorized","message":"no"}}'));
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
  const quiet: string[] = [];
  await enroll({ controlPlane: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, token: 'tok', configDir: dir, keyBits: 2048, log: (l) => quiet.push(l) }).catch(() => undefined);
  t.same(quiet.filter((l) => l.startsWith('warning')), []);
});
