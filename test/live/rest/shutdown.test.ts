/**
 * The compiled control plane (a real process, as `npm start` runs it) gets SIGTERM while API and
 * file statements are in flight against real upstream servers on port 0 that do not answer
 * within the test: a `stripe` statement waiting for its provider, an `http-files` statement
 * downloading, another waiting for its organization's place to download, an `http-files`
 * listing downloading and the next listing of its organization waiting for its turn. After the
 * drain (SVC_SHUTDOWN_DRAIN_MS) each is answered `503 service_unavailable` with Retry-After and
 * `details.reason: "shutting_down"`, audited and not charged (never a charged query_timeout nor
 * a 429 busy), the upstream requests are given up, and the process exits 0. A second control
 * plane on the same data dir reads what the store kept.
 */
import fs from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import t from 'tap';
import { createCa, issueServerCertificate } from '../../../pki/index.js';
import { api, demoImage, openConnection, signupAgent, startServer, tempDir, type ApiResponse, type TestServer, CACHE } from '../../helpers/server.js';
import { exitOf, startControlPlane } from '../../helpers/control-plane-process.js';
import { provider, type Provider } from './helpers.js';

interface Body {
  error?: { code: string; message: string; details?: Record<string, unknown> };
}
interface Usage {
  trial: { queries_left: number; egress_bytes_left: number; egress_bytes_held: number };
}
interface AuditEvents {
  events: { id: string; type: string; outcome: string; error_code?: string | null; cost_cents?: number }[];
}

const STRIPE_KEY = 'rk_test_ShutdownAbcdefghijklmnop0123';
/** A hang guard, not a timing assertion: everything here is answered within the 300 ms drain and the close that follows. */
const HANG_GUARD_MS = 60_000;

function guard<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: still not done ${HANG_GUARD_MS} ms after SIGTERM`)), HANG_GUARD_MS);
    }),
  ]);
}

/** An upstream server that takes every request and answers none while the test runs; `gaveUp` counts requests its client abandoned. */
async function silentUpstream(tls?: { key: string; cert: string }): Promise<Provider & { gaveUp: () => number }> {
  let gaveUp = 0;
  const srv = await provider((_req, res: http.ServerResponse) => {
    res.on('close', () => {
      if (!res.writableEnded) gaveUp++;
    });
  }, tls);
  return Object.assign(srv, { gaveUp: () => gaveUp });
}

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 20));
  if (!ok()) throw new Error(`never happened: ${what}`);
}

t.test('SIGTERM with API and file statements in flight: each is answered 503 shutting_down, audited and not charged, and the process exits 0', async (t) => {
  const dataDir = await tempDir();
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  // the demo datasets the child loads at start, from the tests' cache
  await demoImage();
  await fs.cp(path.join(CACHE, 'demo'), path.join(dataDir, 'demo'), { recursive: true });
  const ca = createCa({ keyBits: 2048 });
  const cert = issueServerCertificate(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  const caFile = path.join(dataDir, 'upstream-ca.pem');
  await fs.writeFile(caFile, ca.certPem);
  const stripe = await silentUpstream();
  const files = await silentUpstream({ key: cert.keyPem, cert: cert.certPem });
  t.teardown(() => Promise.all([stripe.close(), files.close()]));

  const cp = await startControlPlane({
    SVC_DATA_DIR: dataDir,
    PORT: '0',
    SVC_TUNNEL_PORT: '0',
    LOG_LEVEL: 'info',
    SVC_RATE_LIMIT: '100000',
    SVC_SIGNUP_RATE_LIMIT: '100000',
    SVC_DEMO_WORKERS: '1',
    SVC_STRIPE_API_BASE: stripe.base,
    SVC_HTTP_FILES_ALLOW_PRIVATE: '1',
    // two places to download files, one per organization
    SVC_LIVE_REST_ENGINES: '2',
    // a deadline far past the drain: only the shutdown can stop the statements within this test
    SVC_QUERY_TIMEOUT_MS: '120000',
    SVC_SHUTDOWN_DRAIN_MS: '300',
    NODE_EXTRA_CA_CERTS: caFile,
  });
  t.teardown(async () => {
    if (cp.child.exitCode === null && cp.child.signalCode === null) {
      cp.child.kill('SIGKILL');
      await exitOf(cp.child);
    }
  });
  const base = cp.url;
  /** requests the control plane has taken in (logged as it reads them) to `url` */
  const taken = (url: string): number => cp.output().split('\n').filter((l) => l.includes('"incoming request"') && l.includes(`"url":"${url}"`)).length;
  const fileUrl = (name: string): string => `${files.base}/${name}.csv`;

  const a = await signupAgent(base, 'Shutdown A');
  const b = await signupAgent(base, 'Shutdown B');
  const register = async (key: string, body: Record<string, unknown>): Promise<void> => {
    const r = await api(base, 'POST', '/v1/connections/credentials', { key, body });
    t.equal(r.status, 201, r.text);
  };
  await register(a.key, { connector_kind: 'stripe', secret: STRIPE_KEY });
  await register(a.key, { connector_kind: 'http-files', secret: 'files-token-a-0123456789', options: { files: [{ table: 'one', url: fileUrl('one') }, { table: 'two', url: fileUrl('two') }] } });
  await register(b.key, { connector_kind: 'http-files', secret: 'files-token-b-0123456789', options: { files: [{ table: 'listed', url: fileUrl('listed') }] } });
  const stripeConn = await openConnection(base, a.key, 'stripe', ['read:customers']);
  const filesConn = await openConnection(base, a.key, 'http-files', ['read:one', 'read:two']);
  const listedConn = await openConnection(base, b.key, 'http-files', ['read:listed']);
  const before = (await api<Usage>(base, 'GET', '/v1/agent/account/usage', { key: a.key })).body;

  const query = (key: string, conn: string, sql: string): Promise<ApiResponse<Body>> => api<Body>(base, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql } });
  const listing = (key: string, conn: string): Promise<ApiResponse<Body>> => api<Body>(base, 'GET', `/v1/connections/${conn}/schema`, { key });
  const answers: Record<string, Promise<ApiResponse<Body>>> = {};
  answers['a stripe statement waiting for its provider'] = query(a.key, stripeConn, 'SELECT count(*) FROM customers');
  answers['a file statement downloading'] = query(a.key, filesConn, 'SELECT count(*) FROM one');
  answers['a file listing downloading'] = listing(b.key, listedConn);
  await until('the stripe request and both downloads reach their servers', () => stripe.seen.length === 1 && files.seen.length === 2);
  answers['a file statement waiting for a place to download'] = query(a.key, filesConn, 'SELECT count(*) FROM two');
  answers["a file listing waiting for its organization's turn"] = listing(b.key, listedConn);
  await until('the control plane has taken in the waiting statement and listing', () => taken(`/v1/connections/${filesConn}/query`) === 2 && taken(`/v1/connections/${listedConn}/schema`) === 2);

  cp.child.kill('SIGTERM');
  const audited = new Map<string, string>();
  for (const [what, answer] of Object.entries(answers)) {
    const r = await guard(answer, what);
    t.equal(r.status, 503, `${what}: ${r.text}`);
    t.equal(r.body.error?.code, 'service_unavailable', what);
    t.equal(r.body.error?.details?.['reason'], 'shutting_down', what);
    t.equal(r.headers.get('retry-after'), '1', `${what}: Retry-After`);
    t.notOk(r.body.error?.details && 'cost_cents' in r.body.error.details, `${what}: not charged`);
    const id = r.body.error?.details?.['audit_event_id'];
    t.type(id, 'string', `${what}: answered by the query path (audited), not the 503 of a request that came after the close`);
    if (typeof id === 'string') audited.set(what, id);
  }
  t.equal(await guard(exitOf(cp.child), 'the process exit'), 0, 'the process closed and exited 0');
  t.equal(files.seen.length, 2, 'the waiting statement and listing fetched nothing');
  t.equal(stripe.gaveUp() + files.gaveUp(), 3, 'the stripe request and both downloads were given up, not left running');

  // what the store kept, read through another control plane on the same data dir
  const next: TestServer = await startServer({ dataDir });
  t.teardown(() => next.close());
  const after = (await api<Usage>(next.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  t.equal(after.trial.queries_left, before.trial.queries_left, 'no trial query used');
  t.equal(after.trial.egress_bytes_left, before.trial.egress_bytes_left, 'no trial egress used');
  t.equal(after.trial.egress_bytes_held, 0, 'every hold was given back');
  const events = [
    ...(await api<AuditEvents>(next.url, 'GET', `/v1/connections/${stripeConn}/audit`, { key: a.key })).body.events,
    ...(await api<AuditEvents>(next.url, 'GET', `/v1/connections/${filesConn}/audit`, { key: a.key })).body.events,
    ...(await api<AuditEvents>(next.url, 'GET', `/v1/connections/${listedConn}/audit`, { key: b.key })).body.events,
  ];
  for (const [what, id] of audited) {
    const event = events.find((e) => e.id === id);
    t.match(event, { outcome: 'error', error_code: 'service_unavailable' }, `${what}: audited as stopped by the shutdown`);
    t.notOk(event && typeof event.cost_cents === 'number' && event.cost_cents > 0, `${what}: the event holds no charge: ${JSON.stringify(event)}`);
  }
});
