/**
 * A paying organization's demo statement starts while its reservation is asked for
 * (query/early-start.ts), and nothing else about a query changes: its rows come back only once
 * the reservation is granted from the wallet, a statement whose reservation is refused (an empty
 * wallet, a connection revoked meanwhile) answers as before with nothing charged, and an
 * organization's first query, a trial's queries and those after a refusal wait for their
 * reservation. Each case holds the organization's row in the store (what `svc_reserve` locks;
 * on the embedded store the whole engine), so the reservation cannot be granted until the test
 * lets it, then watches the demo engine's own admissions. On the embedded store and, when one
 * answers, on a PostgreSQL store.
 */
import t from 'tap';
import { EarlyStarts } from '../../control-plane/query/early-start.js';
import type { Reservation } from '../../control-plane/billing/index.js';
import { Catalogue } from '../../control-plane/catalogue/index.js';
import { api, freshDatabase, openConnection, realPostgresAvailable, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import { eventually, until, type TapTest } from '../helpers/tap.js';
import { sendThenLeave } from '../helpers/leave.js';

type Answer = { status: number; text: string; body: { rows?: unknown[]; cost_cents?: number; error?: { code?: string; details?: Record<string, unknown> } } };

const LOOKUP = (n: number): string => `SELECT patient_id, gender FROM patients WHERE patient_id = 'pat-000001' AND ${n} >= 0`;

/** statements the demo engines have admitted (both classes) */
async function admitted(srv: TestServer): Promise<number> {
  const a = (await srv.svc.demoReady).admissions();
  return a.paid.atOnce + a.paid.queued + a.trial.atOnce + a.trial.queued;
}

/**
 * Holds the organization's row (svc_reserve waits for it) until `release()`; `run` sends a
 * statement in the holding transaction (on the embedded store nothing else can use the store meanwhile).
 * `NO KEY UPDATE` still lets rows that reference the organization be written (a revoke's audit
 * event and webhook), on a PostgreSQL store.
 */
async function holdOrg(t: TapTest, srv: TestServer, orgId: string, lock: 'UPDATE' | 'NO KEY UPDATE' = 'UPDATE'): Promise<{ run: (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]>; release: () => Promise<void> }> {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const queued: { sql: string; params: unknown[]; done: (rows: Record<string, unknown>[]) => void }[] = [];
  let wake: (() => void) | undefined;
  let held!: () => void;
  const holding = new Promise<void>((r) => (held = r));
  const tx = srv.svc.store.tx(async (sql) => {
    await sql.query(`SELECT 1 FROM orgs WHERE id = $1 FOR ${lock}`, [orgId]);
    held();
    for (;;) {
      const next = queued.shift();
      if (next) {
        next.done(await sql.query(next.sql, next.params));
        continue;
      }
      const more = new Promise<void>((r) => (wake = r));
      const end = await Promise.race([released.then(() => 'end' as const), more.then(() => 'more' as const)]);
      if (end === 'end' && queued.length === 0) return;
    }
  });
  await holding;
  // a failed case ends its hold too, or the store would stay held
  t.teardown(async () => {
    release();
    await tx;
  });
  return {
    run: (text, params) =>
      new Promise<Record<string, unknown>[]>((done) => {
        queued.push({ sql: text, params, done });
        wake?.();
      }),
    release: async () => {
      release();
      await tx;
    },
  };
}

const query = (srv: TestServer, key: string, conn: string, n: number): Promise<Answer> => api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql: LOOKUP(n) } }) as Promise<Answer>;

/**
 * An organization whose trial is over and whose wallet is funded. Its key and connection were
 * used for a trial query first, so the query route knows both (as any agent's next query) and
 * the only thing a query of it waits for is its reservation.
 */
async function payingOrg(srv: TestServer, name: string): Promise<{ key: string; orgId: string; conn: string }> {
  const a = await signupAgent(srv.url, name);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const trial = await query(srv, a.key, conn, 0);
  if (trial.status !== 200) throw new Error(`trial query: ${trial.status} ${trial.text}`);
  await srv.svc.store.query('UPDATE orgs SET trial_queries_used = 100 WHERE id = $1', [a.orgId]);
  const top = await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 1000 } });
  if (top.status !== 200) throw new Error(`topup: ${top.status} ${top.text}`);
  return { ...a, conn };
}

const WALLET = 'SELECT wallet_nc, wallet_held_nc FROM orgs WHERE id = $1';

/** the organization's wallet, read through `hold` when it holds the store */
async function wallet(srv: TestServer, orgId: string, hold?: { run: (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]> }): Promise<{ wallet: number; held: number }> {
  const [o] = hold ? await hold.run(WALLET, [orgId]) : await srv.svc.store.query(WALLET, [orgId]);
  return { wallet: Number(o?.['wallet_nc']), held: Number(o?.['wallet_held_nc']) };
}

async function lastAudit(srv: TestServer, key: string, conn: string): Promise<Record<string, unknown>> {
  const r = await api<{ events: { body?: Record<string, unknown> }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key });
  const events = r.body.events.map((e) => e.body ?? (e as unknown as Record<string, unknown>));
  return events[events.length - 1] ?? {};
}

/** The statement does not reach the demo engine while its reservation is held: checked for a while, since it must not happen. */
async function staysWaiting(t: TapTest, srv: TestServer, before: number, what: string): Promise<void> {
  const reached = await eventually(async () => (await admitted(srv)) > before, 400);
  t.notOk(reached, what);
}

function cases(store: 'embedded' | 'postgres', open: () => Promise<TestServer>): void {
  t.test(`${store} store`, async (t) => {
    const srv = await open();
    t.teardown(() => srv.close());
    await srv.svc.demoReady;

    t.test('a paying organization: its first paid query waits, the next starts while its reservation is held', async (t) => {
      const o = await payingOrg(srv, 'early-paying');
      const before = await admitted(srv);
      let hold = await holdOrg(t, srv, o.orgId);
      const first = query(srv, o.key, o.conn, 1);
      await staysWaiting(t, srv, before, 'its first paid query waits for its reservation');
      await hold.release();
      const a1 = await first;
      t.equal(a1.status, 200, a1.text);

      const w0 = await wallet(srv, o.orgId);
      const mid = await admitted(srv);
      hold = await holdOrg(t, srv, o.orgId);
      const second = query(srv, o.key, o.conn, 2);
      await until('the second statement reaches the demo engine while its reservation is held', async () => (await admitted(srv)) > mid);
      t.same(await wallet(srv, o.orgId, hold), w0, 'nothing held or charged yet');
      await hold.release();
      const a2 = await second;
      t.equal(a2.status, 200, a2.text);
      t.equal(a2.body.rows?.length, 1, 'its row');
      const w1 = await wallet(srv, o.orgId);
      t.equal(w1.held, 0, 'its hold settled');
      t.ok(w1.wallet < w0.wallet, 'charged to the wallet');
      const ev = await lastAudit(srv, o.key, o.conn);
      t.equal(ev['outcome'], 'ok');
      t.equal(ev['billed_to'], 'wallet');
    });

    t.test('the wallet emptied meanwhile: 402, no rows, nothing charged; the next query waits again', async (t) => {
      const o = await payingOrg(srv, 'early-emptied');
      t.equal((await query(srv, o.key, o.conn, 1)).status, 200);
      const before = await admitted(srv);
      const hold = await holdOrg(t, srv, o.orgId);
      const q = query(srv, o.key, o.conn, 2);
      await until('started early', async () => (await admitted(srv)) > before);
      await hold.run('UPDATE orgs SET wallet_nc = 0 WHERE id = $1', [o.orgId]);
      await hold.release();
      const a = await q;
      t.equal(a.status, 402, a.text);
      t.equal(a.body.rows, undefined, 'no rows');
      t.same(await wallet(srv, o.orgId), { wallet: 0, held: 0 }, 'nothing held or charged');
      const ev = await lastAudit(srv, o.key, o.conn);
      t.equal(ev['error_code'], 'payment_required');
      t.notOk(ev['cost_cents'], 'audited without a charge');

      // funded again: the next query waits for its reservation (the refusal was remembered)
      await srv.svc.store.query('UPDATE orgs SET wallet_nc = 1000000000 WHERE id = $1', [o.orgId]);
      const mid = await admitted(srv);
      const again = await holdOrg(t, srv, o.orgId);
      const next = query(srv, o.key, o.conn, 3);
      await staysWaiting(t, srv, mid, 'after a refusal the next query waits for its reservation');
      await again.release();
      t.equal((await next).status, 200);
    });

    t.test('the wallet emptied under many statements at once: one of them starts early, the others wait for their reservation', async (t) => {
      // each early statement refused is stopped at the engine (a worker ended): an organization
      // that cannot pay must not put more than one on the engines per reservation it was granted
      const o = await payingOrg(srv, 'early-flood');
      t.equal((await query(srv, o.key, o.conn, 1)).status, 200);
      const engine = await srv.svc.demoReady;
      const before = await admitted(srv);
      const hold = await holdOrg(t, srv, o.orgId);
      await hold.run('UPDATE orgs SET wallet_nc = 0 WHERE id = $1', [o.orgId]);
      const sent = Array.from({ length: 6 }, (_, i) => query(srv, o.key, o.conn, 10 + i));
      await until('one started early', async () => (await admitted(srv)) > before);
      await staysWaiting(t, srv, before + 1, 'the others do not reach the engine while their reservations are held');
      await hold.release();
      for (const a of await Promise.all(sent)) t.equal(a.status, 402, a.text);
      t.same(await wallet(srv, o.orgId), { wallet: 0, held: 0 }, 'nothing held or charged');
      await until('no running entries left', () => srv.svc.services.running.count(o.conn) === 0);
      await until('the engines idle', () => engine.stats().running === 0 && engine.stats().waiting === 0);
    });

    t.test('granted from the trial with a smaller egress cap meanwhile: run again under that hold, billed to the trial', async (t) => {
      const o = await payingOrg(srv, 'early-trial-grant');
      t.equal((await query(srv, o.key, o.conn, 1)).status, 200);
      const engine = await srv.svc.demoReady;
      const w0 = await wallet(srv, o.orgId);
      const before = await admitted(srv);
      const hold = await holdOrg(t, srv, o.orgId);
      const q = query(srv, o.key, o.conn, 2);
      await until('started early', async () => (await admitted(srv)) > before);
      // the trial pays again, beside another trial hold: its grant is a share of the egress, not the whole cap
      await hold.run('UPDATE orgs SET trial_queries_used = 50, trial_egress_held = 1 WHERE id = $1', [o.orgId]);
      await hold.release();
      const a = await q;
      t.equal(a.status, 200, a.text);
      t.equal(a.body.rows?.length, 1, 'its row');
      t.equal((a.body as { billed_to?: string }).billed_to, 'trial');
      t.ok((await admitted(srv)) >= before + 2, 'run again under its own hold');
      t.same(await wallet(srv, o.orgId), w0, 'the wallet untouched');
      const [org] = await srv.svc.store.query<{ trial_queries_used: number; trial_egress_held: number | string }>('SELECT trial_queries_used, trial_egress_held FROM orgs WHERE id = $1', [o.orgId]);
      t.equal(org?.trial_queries_used, 51, 'one trial query');
      t.equal(Number(org?.trial_egress_held), 1, 'its egress hold settled');
      await until('no running entries left', () => srv.svc.services.running.count(o.conn) === 0);
      await until('the engines idle', () => engine.stats().running === 0 && engine.stats().waiting === 0);
    });

    t.test('the connection revoked meanwhile: 410, no rows, nothing charged', async (t) => {
      const o = await payingOrg(srv, 'early-revoked');
      t.equal((await query(srv, o.key, o.conn, 1)).status, 200);
      const w0 = await wallet(srv, o.orgId);
      const before = await admitted(srv);
      const hold = await holdOrg(t, srv, o.orgId);
      const q = query(srv, o.key, o.conn, 2);
      await until('started early', async () => (await admitted(srv)) > before);
      // as another replica revokes it: in the store only
      await hold.run("UPDATE connections SET revoked_at = now(), revoked_reason = 'agent' WHERE id = $1", [o.conn]);
      await hold.release();
      const a = await q;
      t.equal(a.status, 410, a.text);
      t.equal(a.body.error?.code, 'connection_revoked');
      t.equal(a.body.rows, undefined, 'no rows');
      t.same(await wallet(srv, o.orgId), w0, 'nothing charged');
    });

    // on the embedded store the revoke's own transaction waits for the held store
    t.test('revoked on this replica while a statement started early runs: stopped at the engine, the revoke answers after it, 410, nothing charged', { skip: store === 'embedded' && 'the revoke would wait for the held store' }, async (t) => {
      const o = await payingOrg(srv, 'early-revoke-here');
      t.equal((await query(srv, o.key, o.conn, 1)).status, 200);
      const engine = await srv.svc.demoReady;
      const w0 = await wallet(srv, o.orgId);
      const before = await admitted(srv);
      const startedBefore = engine.started(); // past its place among the replicas too (a PostgreSQL store): it reached the engine
      const hold = await holdOrg(t, srv, o.orgId, 'NO KEY UPDATE');
      const q = api(srv.url, 'POST', `/v1/connections/${o.conn}/query`, { key: o.key, body: { sql: 'SELECT count(*) AS n FROM patients a, patients b, patients c' } }) as Promise<Answer>;
      await until('started early, at the engine', async () => (await admitted(srv)) > before && engine.started() > startedBefore && engine.stats().running === 1);
      let revokedAt: number | undefined;
      const revoke = api(srv.url, 'POST', `/v1/connections/${o.conn}/revoke`, { key: o.key }).then((r) => ((revokedAt = Date.now()), r));
      await until('the statement is stopped at the engine (its reservation still held)', () => engine.stats().running === 0);
      t.notOk(await eventually(async () => revokedAt !== undefined, 400), 'the revoke waits for the statement it stopped');
      await hold.release();
      const a = await q;
      t.equal((await revoke).status, 200);
      t.equal(a.status, 410, a.text);
      t.equal(a.body.error?.details?.['cause'], 'revoked');
      t.equal(a.body.rows, undefined, 'no rows');
      t.same(await wallet(srv, o.orgId), w0, 'nothing charged');
      t.equal(srv.svc.services.running.count(o.conn), 0, 'no running entry left');
    });

    t.test('the agent leaves while a statement started early runs: stopped, then charged the query price once its hold is granted', async (t) => {
      const o = await payingOrg(srv, 'early-leaving');
      t.equal((await query(srv, o.key, o.conn, 1)).status, 200);
      const engine = await srv.svc.demoReady;
      const before = await admitted(srv);
      const startedBefore = engine.started(); // past its place among the replicas too (a PostgreSQL store): it reached the engine
      const hold = await holdOrg(t, srv, o.orgId);
      const sent = sendThenLeave(srv.url, 'POST', `/v1/connections/${o.conn}/query`, o.key, { sql: 'SELECT count(*) AS n FROM patients a, patients b, patients c' });
      await until('started early, at the engine', async () => (await admitted(srv)) > before && engine.started() > startedBefore && engine.stats().running === 1);
      sent.leave();
      t.equal(await sent.done, undefined, 'left before any answer');
      await until('the statement is stopped at the engine (its reservation still held)', () => engine.stats().running === 0);
      await hold.release();
      let ev: Record<string, unknown> = {};
      await until('its audit event', async () => (ev = await lastAudit(srv, o.key, o.conn))['error_code'] === 'client_closed_request');
      const price = (await api<{ price_per_query_cents: number }>(srv.url, 'GET', '/v1/agent/billing/config', { key: o.key })).body.price_per_query_cents;
      t.match(ev, { outcome: 'error', billed_to: 'wallet', cost_cents: price }, 'charged the query price, no egress, as any statement its agent leaves');
      t.equal((await wallet(srv, o.orgId)).held, 0, 'its hold settled');
    });

    t.test('the agent leaves after a statement started early has ended, before its reservation: charged the query price, no egress, as when it runs', async (t) => {
      const o = await payingOrg(srv, 'early-left-after');
      t.equal((await query(srv, o.key, o.conn, 1)).status, 200);
      const engine = await srv.svc.demoReady;
      const w0 = await wallet(srv, o.orgId);
      const before = await admitted(srv);
      const hold = await holdOrg(t, srv, o.orgId);
      const sent = sendThenLeave(srv.url, 'POST', `/v1/connections/${o.conn}/query`, o.key, { sql: LOOKUP(2) });
      await until('started early and ended', async () => (await admitted(srv)) > before && engine.stats().running === 0);
      sent.leave();
      t.equal(await sent.done, undefined, 'left before any answer');
      await hold.release();
      let ev: Record<string, unknown> = {};
      await until('its audit event', async () => (ev = await lastAudit(srv, o.key, o.conn))['sql'] === LOOKUP(2));
      const price = (await api<{ price_per_query_cents: number }>(srv.url, 'GET', '/v1/agent/billing/config', { key: o.key })).body.price_per_query_cents;
      t.match(ev, { outcome: 'error', error_code: 'client_closed_request', billed_to: 'wallet', cost_cents: price }, 'no answer delivered: the query price, no egress');
      t.notOk(ev['bytes_egressed'], 'no egress counted');
      const w1 = await wallet(srv, o.orgId);
      t.same(w1, { wallet: w0.wallet - price * 1e9, held: 0 }, 'charged the query price only');
    });

    t.test('the connection expires while a statement started early runs: stopped at the engine, 410, nothing charged', async (t) => {
      const o = await payingOrg(srv, 'early-expiring');
      const conn = await openConnection(srv.url, o.key, 'demo-healthcare', ['read:patients'], { ttl_seconds: 3 });
      t.equal((await query(srv, o.key, conn, 1)).status, 200, 'known to the replica, and granted from the wallet');
      const engine = await srv.svc.demoReady;
      const w0 = await wallet(srv, o.orgId);
      const before = await admitted(srv);
      const startedBefore = engine.started(); // past its place among the replicas too (a PostgreSQL store): it reached the engine
      const hold = await holdOrg(t, srv, o.orgId);
      const q = api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: o.key, body: { sql: 'SELECT count(*) AS n FROM patients a, patients b, patients c' } }) as Promise<Answer>;
      await until('started early, at the engine', async () => (await admitted(srv)) > before && engine.started() > startedBefore && engine.stats().running === 1);
      await until('stopped at the engine when its connection expires', () => engine.stats().running === 0);
      await hold.release();
      const a = await q;
      t.equal(a.status, 410, a.text);
      t.equal(a.body.error?.details?.['cause'], 'expired');
      t.same(await wallet(srv, o.orgId), w0, 'nothing charged');
      t.equal(srv.svc.services.running.count(conn), 0, 'no running entry left');
    });

    t.test("a trial organization's queries wait for their reservation", async (t) => {
      const a = await signupAgent(srv.url, 'early-trial');
      const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
      t.equal((await query(srv, a.key, conn, 1)).status, 200);
      const before = await admitted(srv);
      const hold = await holdOrg(t, srv, a.orgId);
      const q = query(srv, a.key, conn, 2);
      await staysWaiting(t, srv, before, 'a trial query waits');
      await hold.release();
      const r = await q;
      t.equal(r.status, 200, r.text);
    });
  });
}

cases('embedded', () => startServer({ demo: 'eager' }));

if (!(await realPostgresAvailable())) {
  t.skip('postgres store: no PostgreSQL answers at TEST_DATABASE_URL', () => undefined);
} else {
  const db = await freshDatabase('svc_early');
  t.teardown(() => db.drop());
  cases('postgres', () => startServer({ demo: 'eager', databaseUrl: db.url }));
}

t.test('which organizations start early', async (t) => {
  const catalogue = new Catalogue();
  const demo = catalogue.targets.find((x) => x.backend === 'demo');
  const live = catalogue.targets.filter((x) => x.backend !== 'demo');
  if (!demo || live.length === 0) throw new Error('the catalogue has no demo or no live target');
  const full = 1_000_000;
  const r = (o: Partial<Reservation>): Reservation => ({ id: 'r', orgId: 'o', payer: 'wallet', heldNc: 1, egressHeld: 0, maxBytes: full, paying: true, ...o });
  const e = new EarlyStarts(3);
  t.notOk(e.may('a', demo), 'unknown: waits');
  e.granted('a', r({}), full);
  t.ok(e.may('a', demo), 'granted from the wallet with the whole cap: starts early');
  for (const x of live) t.notOk(e.may('a', x), `${x.id} (${x.backend}) never starts early`);
  e.granted('a', r({ payer: 'trial', maxBytes: 5000, egressHeld: 5000 }), full);
  t.notOk(e.may('a', demo), 'a trial hold: waits');
  e.granted('a', r({}), full);
  e.granted('a', r({ maxBytes: full - 1 }), full);
  t.notOk(e.may('a', demo), 'a smaller cap: waits');
  e.granted('a', r({}), full);
  e.granted('a', undefined, full);
  t.notOk(e.may('a', demo), 'refused: waits');
  for (const id of ['a', 'b', 'c', 'd']) e.granted(id, r({}), full);
  t.equal(e.size, 3, 'bounded');
  t.notOk(e.may('a', demo), 'the oldest forgotten first');
  t.ok(e.may('d', demo));
  e.began('d');
  t.notOk(e.may('d', demo), 'one statement at a time starts early');
  e.granted('d', r({}), full);
  t.notOk(e.may('d', demo), "another query's reservation does not end the early start's");
  e.granted('d', r({}), full, true);
  t.ok(e.may('d', demo), 'its reservation answered: the next starts early');
  e.began('d');
  e.granted('d', undefined, full, true);
  e.granted('d', r({}), full);
  t.ok(e.may('d', demo), 'refused, then granted again: starts early');
});
