/**
 * `http-files` statements and listings still waiting for their turn when the control plane shuts
 * down (the connector, a real HTTPS file server on port 0 holding every answer): answered with
 * the shutdown's 503 (`details.reason: "shutting_down"`, Retry-After; not charged), never the
 * 429 `downloads_busy` / `listing_busy` of a wait that reached its deadline. The app's shutdown
 * closes the connector's gates, so a waiter is answered at once even when its own signal is not
 * the shutdown's, and nothing waits for a place after it.
 */
import net from 'node:net';
import t, { type Test } from 'tap';
import { createCa, issueServerCertificate } from '../../../pki/index.js';
import { ApiError } from '../../../control-plane/errors.js';
import { shutdownStop } from '../../../control-plane/query/errors.js';
import { startServer } from '../../helpers/server.js';
import { connector, describe, engines, provider, query, type Provider } from './helpers.js';

t.before(() => engines.warm());
t.teardown(() => engines.close());

const ca = createCa({ keyBits: 2048 });
const cert = issueServerCertificate(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
const CSV = 'n,label\n1,one\n2,two\n';

/** A file server holding every answer until `letGo()`. */
async function heldServer(t: Test): Promise<{ srv: Provider; letGo: () => void; seen: (n: number) => Promise<void> }> {
  let letGo: () => void = () => undefined;
  const held = new Promise<void>((r) => (letGo = r));
  const srv = await provider(async (_req, res) => {
    await held;
    if (res.destroyed) return;
    res.writeHead(200, { 'content-type': 'text/csv' });
    res.end(CSV);
  }, { key: cert.keyPem, cert: cert.certPem });
  t.teardown(() => {
    letGo();
    return srv.close();
  });
  const seen = async (n: number): Promise<void> => {
    for (let i = 0; i < 250 && srv.seen.length < n; i++) await new Promise((r) => setTimeout(r, 20));
    if (srv.seen.length < n) throw new Error(`the file server saw ${srv.seen.length} requests, not ${n}`);
  };
  return { srv, letGo, seen };
}

const settle = (): Promise<unknown> => new Promise((r) => setTimeout(r, 300));
const files = (base: string, ...names: string[]) => ({ files: names.map((n) => ({ table: n, url: `${base}/${n}.csv` })) });
const SQL = (table: string): string => `SELECT count(*)::int AS n FROM ${table}`;
/** its answer: the error it rejects with, or 'answered' */
const outcome = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => 'answered',
    (e: unknown) => e,
  );
/**
 * A hang guard, not a timing assertion: a wait that is not answered when the shutdown comes goes
 * on to its deadline (30 s here), far past this.
 */
const HANG_GUARD_MS = 15_000;
const within = (p: Promise<unknown>): Promise<unknown> =>
  Promise.race([p, new Promise((r) => setTimeout(() => r('still waiting long after the shutdown'), HANG_GUARD_MS).unref())]);

function isShutdownAnswer(t: Test, got: unknown, what: string): void {
  t.ok(got instanceof ApiError, `${what}: ${got instanceof Error ? `${got.name} ${got.message}` : String(got)}`);
  if (!(got instanceof ApiError)) return;
  t.equal(got.code, 'service_unavailable', `${what}: ${got.code} ${JSON.stringify(got.details)}`);
  t.equal(got.details?.['reason'], 'shutting_down', what);
  t.equal(got.headers?.['Retry-After'], '1', what);
}

t.test('a statement and a listing waiting for their turn, stopped by the shutdown: 503 shutting_down, not 429 busy', async (t) => {
  const { srv, seen } = await heldServer(t);
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, maxEngines: 2 });
  // the query path's signal: the statement's deadline, its connection's revocation and the shutdown
  const shutdown = new AbortController();
  const o = (orgId: string, ...tables: string[]) => ({ secret: '', options: files(srv.base, ...tables), orgId, timeoutMs: 30_000, signal: shutdown.signal });
  // org_a's one place: its first statement downloads, its second waits for the place
  const downloading = outcome(query(c, ['read:a1'], SQL('a1'), o('org_a', 'a1')));
  await seen(1);
  const waitingForPlace = outcome(query(c, ['read:a2'], SQL('a2'), o('org_a', 'a2')));
  // org_b's first listing downloads (the second place), its next listing waits for its turn
  const listing = outcome(describe(c, ['read:b1'], o('org_b', 'b1')));
  await seen(2);
  const waitingListing = outcome(describe(c, ['read:b1'], o('org_b', 'b1')));
  await settle();
  t.equal(srv.seen.length, 2, 'two downloads; the others wait');

  shutdown.abort(shutdownStop());
  isShutdownAnswer(t, await within(downloading), 'the statement downloading');
  isShutdownAnswer(t, await within(waitingForPlace), 'the statement waiting for a place to download');
  isShutdownAnswer(t, await within(listing), 'the listing downloading');
  isShutdownAnswer(t, await within(waitingListing), "the listing waiting for its organization's turn");
  t.equal(srv.seen.length, 2, 'the waiting ones fetched nothing');
});

t.test("the app's shutdown closes the gates: waiters are answered at once whatever their own signal, and nothing waits after it", async (t) => {
  const { srv, seen } = await heldServer(t);
  const appShutdown = new AbortController();
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, maxEngines: 2 }, engines, appShutdown.signal);
  // their own signals (deadline 30 s) are not the shutdown's
  const mine = new AbortController();
  t.teardown(() => mine.abort());
  const o = (orgId: string, ...tables: string[]) => ({ secret: '', options: files(srv.base, ...tables), orgId, timeoutMs: 30_000, signal: mine.signal });
  const downloading = outcome(query(c, ['read:a1'], SQL('a1'), o('org_a', 'a1')));
  await seen(1);
  const waitingForPlace = outcome(query(c, ['read:a2'], SQL('a2'), o('org_a', 'a2')));
  const listing = outcome(describe(c, ['read:b1'], o('org_b', 'b1')));
  await seen(2);
  const waitingListing = outcome(describe(c, ['read:b1'], o('org_b', 'b1')));
  await settle();
  t.equal(srv.seen.length, 2, 'two downloads; the others wait');

  appShutdown.abort(shutdownStop());
  isShutdownAnswer(t, await within(waitingForPlace), 'the statement waiting for a place to download');
  isShutdownAnswer(t, await within(waitingListing), "the listing waiting for its organization's turn");
  isShutdownAnswer(t, await within(outcome(query(c, ['read:c1'], SQL('c1'), o('org_c', 'c1')))), 'a statement that comes after');
  isShutdownAnswer(t, await within(outcome(describe(c, ['read:c1'], o('org_c', 'c1')))), 'a listing that comes after');
  t.equal(srv.seen.length, 2, 'nothing more was fetched');
  // the ones downloading are stopped by their own signal (in the app: the shutdown's, above)
  mine.abort(shutdownStop());
  isShutdownAnswer(t, await within(downloading), 'the statement downloading');
  isShutdownAnswer(t, await within(listing), 'the listing downloading');
});

t.test("the app closes the gates as its close stops the statements, before its HTTP server has closed (not only when it ends the connectors after it)", async (t) => {
  // a file server that takes connections and never says a word: a download hangs in its TLS handshake
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((s) => void sockets.add(s));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => silent.close(() => r()));
  });
  const url = `https://127.0.0.1:${(silent.address() as net.AddressInfo).port}/listed.csv`;
  const srv = await startServer({ env: { SVC_HTTP_FILES_ALLOW_PRIVATE: '1' } });
  const c = srv.svc.services.live.connector('http-files');
  if (!c) throw new Error('no http-files connector');
  // called the way the query path calls it, with signals of their own that are not the app's shutdown
  const mine = new AbortController();
  t.teardown(() => mine.abort());
  const o = { secret: '', options: { files: [{ table: 'listed', url }] }, orgId: 'org_a', timeoutMs: 60_000, signal: mine.signal };
  const listing = outcome(describe(c, ['read:listed'], o));
  for (let i = 0; i < 250 && sockets.size === 0; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(sockets.size, 1, 'the first listing is downloading');
  let answer: unknown;
  const waiting = outcome(describe(c, ['read:listed'], o)).then((a) => (answer = a));
  await settle();
  t.equal(answer, undefined, "the next listing waits for its organization's turn");
  let atServerClose: unknown = 'the HTTP server never closed';
  srv.svc.app.server.once('close', () => (atServerClose = answer));
  await srv.close();
  await within(waiting);
  isShutdownAnswer(t, atServerClose, "the waiting listing, answered before the app's HTTP server closed");
  mine.abort(shutdownStop());
  isShutdownAnswer(t, await within(listing), 'the listing downloading, stopped by its own signal');
});
