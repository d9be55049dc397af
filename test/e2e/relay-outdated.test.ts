/**
 * A relay that does not say it pins search_path runs nothing. svc-relay runs every statement with
 * `SET LOCAL search_path = pg_catalog` (pg-read PIN_SEARCH_PATH) and says so in its HELLO
 * (feature `catalog-search-path`, protocol/relay-contract.ts RelayFeature). A relay built before
 * the pin does not, and on its database a customer's `public.lower(integer)` or operator would
 * run for an agent and read outside the scopes; the control plane cannot see what a relay runs,
 * only what it says. So through a tunnel whose HELLO lacks the feature, queries and the schema
 * listing are refused (`503 relay_unavailable`, `details.reason: "relay_outdated"`, nothing run
 * or charged), the control plane logs a warning once per tunnel, and a current relay on the same
 * control plane is served as before.
 *
 * The real control plane, real mutual TLS, a real svc-relay agent in this process (its HELLO as an
 * older relay's: no features), a customer PostgreSQL (real, or PGlite over the wire).
 */
import fs from 'node:fs/promises';
import { PassThrough } from 'node:stream';
import pg from 'pg';
import t from 'tap';
import { ensureDist, runSvc } from '../cli/dist.js';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import { startRelay, type TestRelay } from '../helpers/relay.js';
import { api, openConnection, signupAgent, startServer, tempDir, type Agent, type TestServer } from '../helpers/server.js';

let srv: TestServer;
let db: CustomerDatabase;
let agent: Agent;
const relays: TestRelay[] = [];
let log = '';
/** a connection through the outdated relay (first test) */
let oldConn = '';

t.before(async () => {
  db = await customerDatabase('svc_relay_outdated');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query("CREATE TABLE orders (id int PRIMARY KEY, note text); INSERT INTO orders VALUES (1, 'a')");
  await c.end();
  const logStream = new PassThrough();
  logStream.on('data', (d: Buffer) => (log += d.toString()));
  srv = await startServer({ env: { LOG_LEVEL: 'warn' }, logStream });
  agent = await signupAgent(srv.url, 'Outdated Co');
});
t.teardown(async () => {
  for (const r of relays) await r.close();
  await srv?.close();
  await db?.drop();
});

const usage = async (): Promise<number> => (await api<{ queries: number }>(srv.url, 'GET', '/v1/agent/account/usage', { key: agent.key })).body.queries;

t.test('a relay whose HELLO does not offer catalog-search-path: refused, nothing run or charged', async (t) => {
  const old = await startRelay(srv, agent.key, db.url, { name: 'old', session: { agent: 'svc-relay/0.1.0', features: [] } });
  relays.push(old);
  const conn = await openConnection(srv.url, agent.key, 'postgres-relay', [`relay:${old.relayId}`, 'read:public.orders']);
  oldConn = conn;
  const before = await usage();
  const r = await api<{ error?: { code: string; message: string; details?: Record<string, unknown> } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: 'SELECT id FROM orders' } });
  t.equal(r.status, 503, r.text);
  t.equal(r.body.error?.code, 'relay_unavailable');
  t.equal(r.body.error?.details?.['reason'], 'relay_outdated');
  t.equal(r.body.error?.details?.['relay_version'], 'svc-relay/0.1.0');
  t.match(r.body.error?.message ?? '', /does not pin search_path.*upgrade svc-relay/, 'the message says what to do');
  t.equal(old.streams(), 0, 'no statement reached the relay');
  t.equal(await usage(), before, 'not counted or charged');

  const schema = await api<{ error?: { details?: Record<string, unknown> } }>(srv.url, 'GET', `/v1/connections/${conn}/schema`, { key: agent.key });
  t.equal(schema.status, 503, 'the schema listing is refused too (it runs a statement through the relay)');
  t.equal(schema.body.error?.details?.['reason'], 'relay_outdated');
  t.equal(old.streams(), 0, 'nor the catalog statement');
  t.match(log, new RegExp(`"relay_id":"${old.relayId}".*catalog-search-path`), 'the control plane logged why');
});

t.test('svc (the CLI) says what to do about an outdated relay: upgrade it, not start it', async (t) => {
  // the relay is running and `svc relay list` shows it online: "start the relay" would send the
  // operator looking for a problem that is not there
  ensureDist();
  const home = await tempDir('svc-cli-outdated-');
  t.teardown(() => fs.rm(home, { recursive: true, force: true }));
  const r = await runSvc(['query', oldConn, 'SELECT id FROM orders'], { PATH: process.env['PATH'] ?? '', HOME: home, SVC_CONFIG: `${home}/config.json`, SVC_BASE_URL: srv.url, SVC_API_KEY: agent.key });
  t.equal(r.code, 5, r.stderr);
  t.match(r.stderr, /relay_unavailable \(HTTP 503\)/);
  t.match(r.stderr, /\nnext: upgrade svc-relay on the machine next to the database and restart it/);
  t.notMatch(r.stderr, /next: start the relay/);
  const list = await runSvc(['relay', 'list'], { PATH: process.env['PATH'] ?? '', HOME: home, SVC_CONFIG: `${home}/config.json`, SVC_BASE_URL: srv.url, SVC_API_KEY: agent.key });
  t.match(list.stdout, /\bold\s+online\s+true\b/, `svc relay list shows it must be upgraded:\n${list.stdout}`);
});

t.test('a current relay on the same control plane is served', async (t) => {
  const current = await startRelay(srv, agent.key, db.url, { name: 'current' });
  relays.push(current);
  const conn = await openConnection(srv.url, agent.key, 'postgres-relay', [`relay:${current.relayId}`, 'read:public.orders']);
  const r = await api<{ rows: unknown[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: 'SELECT id, note FROM orders' } });
  t.equal(r.status, 200, r.text);
  t.same(r.body.rows, [{ id: 1, note: 'a' }]);
});

t.test('GET /v1/relays says which relay must be upgraded (upgrade_required), online or not', async (t) => {
  const list = async () => Object.fromEntries((await api<{ relays: { name: string; status: string; upgrade_required: boolean }[] }>(srv.url, 'GET', '/v1/relays', { key: agent.key })).body.relays.map((r) => [r.name, r]));
  let relays_ = await list();
  t.match(relays_['old'], { status: 'online', upgrade_required: true }, 'the outdated relay: online, but upgrade_required');
  t.match(relays_['current'], { status: 'online', upgrade_required: false });
  const one = await api<{ upgrade_required: boolean }>(srv.url, 'GET', `/v1/relays/${relays[0]?.relayId ?? ''}`, { key: agent.key });
  t.equal(one.body.upgrade_required, true, 'GET /v1/relays/{relay_id} too');
  // stopped: offline, still to be upgraded (what its last tunnel said)
  await relays[0]?.close();
  relays.shift();
  for (const deadline = Date.now() + 10_000; (relays_ = await list())['old']?.status !== 'offline' && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50));
  t.match(relays_['old'], { status: 'offline', upgrade_required: true });
});
