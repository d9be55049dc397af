/**
 * The outbox claim protocol driven directly (no worker, no HTTP), with two claimers, on the
 * embedded PGlite and, when one answers, a real PostgreSQL (where the two claimers are two
 * connection pools racing each other): per-organization fairness and cap, leases as fences
 * (a late release or a stale record changes nothing), the slow hold as a schedule, and the
 * sandbox bound on pending mock events.
 */
import fs from 'node:fs/promises';
import t from 'tap';
import { ApiError } from '../../control-plane/errors.js';
import { openStore, type Store } from '../../control-plane/store/index.js';
import { assertMockRoom, claimDue, holdClaim, mockReplayAdmission, recordAttempt, releaseClaims, replayDelivery, type Claim, type Outcome } from '../../control-plane/webhooks/index.js';
import { freshDatabase, realPostgresAvailable, storeTemplate, tempDir } from '../helpers/server.js';

interface Engine {
  readonly name: string;
  /** two independent handles on one store (two replicas) */
  open(): Promise<{ a: Store; b: Store; close(): Promise<void> }>;
}

async function engines(): Promise<Engine[]> {
  const list: Engine[] = [
    {
      name: 'embedded PGlite',
      open: async () => {
        const dir = await tempDir();
        const store = await openStore({ databaseUrl: undefined, dataDir: dir, template: await storeTemplate() });
        return { a: store, b: store, close: async () => (await store.close(), await fs.rm(dir, { recursive: true, force: true })) };
      },
    },
  ];
  if (await realPostgresAvailable()) {
    list.push({
      name: 'PostgreSQL',
      open: async () => {
        const db = await freshDatabase('svc_claims');
        const dir = await tempDir();
        const a = await openStore({ databaseUrl: db.url, dataDir: dir });
        const b = await openStore({ databaseUrl: db.url, dataDir: dir });
        return { a, b, close: async () => (await a.close(), await b.close(), await db.drop(), await fs.rm(dir, { recursive: true, force: true })) };
      },
    });
  } else {
    t.skip('on PostgreSQL: no PostgreSQL answers at TEST_DATABASE_URL (the embedded engine runs every case)', () => undefined);
  }
  return list;
}

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const at = (ms: number): Date => new Date(T0 + ms);
const OK: Outcome = { ok: true, statusCode: 200, errorClass: null, errorMessage: null, excerpt: 'ok', retryAfterMs: null, url: 'http://127.0.0.1:1/hook', chaos: null };
const FAIL: Outcome = { ...OK, ok: false, statusCode: 503, errorClass: 'http_status', errorMessage: 'answered 503', excerpt: '' };

async function org(store: Store, id: string, withEndpoint = true): Promise<void> {
  await store.query(`INSERT INTO orgs (id, name, created_at, trial_expires_at) VALUES ($1, $1, now(), now() + interval '1 day')`, [id]);
  // a receiver, so that a (false) delivery.failed would really be written
  if (withEndpoint) await store.query(`INSERT INTO webhook_endpoints (org_id, connection_id, url, secret_sealed, created_at, updated_at) VALUES ($1, '', 'http://127.0.0.1:1/hook', 'sealed', now(), now())`, [id]);
}

/** `n` pending deliveries of `orgId`, due at T0 + dueMs + i ms, in that order */
async function backlog(store: Store, orgId: string, n: number, dueMs = 0, event = 'claim.submitted'): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = `dlv_${orgId}_${event}_${String(i).padStart(4, '0')}`;
    await store.query(
      `INSERT INTO webhook_deliveries (id, org_id, connection_id, event, body, status, created_at, next_attempt_at) VALUES ($1, $2, NULL, $3, $4, 'pending', $5, $5)`,
      [id, orgId, event, JSON.stringify({ id, event, environment: 'sandbox' }), at(dueMs + i).toISOString()],
    );
    ids.push(id);
  }
  return ids;
}

const claim = (store: Store, nowMs: number, limit = 16, perOrg = 4, leaseMs = 10_000): Promise<Claim[]> => claimDue(store, { limit, perOrg, leaseMs, now: at(nowMs) });
const orgsOf = (cs: readonly Claim[]): string[] => cs.map((c) => c.org_id);
const row = async (store: Store, id: string): Promise<{ status: string; next_attempt_at: Date | null; lease_until: Date | null; held_since: Date | null; attempts: number }> => {
  const [r] = await store.query<{ status: string; next_attempt_at: Date | null; lease_until: Date | null; held_since: Date | null; attempts: number }>(
    'SELECT status, next_attempt_at, lease_until, held_since, attempts FROM webhook_deliveries WHERE id = $1',
    [id],
  );
  if (!r) throw new Error(`no delivery ${id}`);
  return r;
};

/** every case starts from an empty outbox (claiming is across all organizations) */
async function reset(store: Store): Promise<void> {
  await store.query('DELETE FROM webhook_attempts');
  await store.query('DELETE FROM webhook_deliveries');
  await store.query('DELETE FROM webhook_endpoints');
  await store.query('DELETE FROM orgs');
}

for (const engine of await engines()) {
  t.test(engine.name, async (t) => {
    const stores = await engine.open();
    t.teardown(stores.close);
    const fresh = async (): Promise<{ a: Store; b: Store }> => (await reset(stores.a), stores);
    t.test('one organization’s backlog does not starve another’s due delivery; at most perOrg in flight across claimers', async (t) => {
      const { a, b } = await fresh();
      await org(a, 'org_a');
      await org(a, 'org_b');
      const backlogA = await backlog(a, 'org_a', 30, 0);
      const [onlyB] = await backlog(a, 'org_b', 1, 100); // due after all of A's

      // the old order (by next_attempt_at across the process) would hand every one of 16 slots to A
      const first = await claim(a, 1000);
      t.equal(first.filter((c) => c.org_id === 'org_a').length, 4, 'claimer 1: A gets its cap of 4, not 16');
      t.ok(first.some((c) => c.id === onlyB), "claimer 1: B's single delivery is claimed in the same cycle as A's oldest");
      t.same(first.filter((c) => c.org_id === 'org_a').map((c) => c.id), backlogA.slice(0, 4), "A's oldest first");

      const second = await claim(b, 1000);
      t.same(second, [], 'claimer 2: A is at its cap (4 in flight on claimer 1), B has nothing more');

      // two of A's finish on claimer 1: exactly two slots open for A, and they go to the next oldest
      for (const c of first.filter((x) => x.org_id === 'org_a').slice(0, 2)) t.equal(await recordAttempt(a, c, { started: at(1000), durationMs: 5, outcome: OK }, { retryDelaysMs: [1000] }), 'delivered');
      const third = await claim(b, 1100);
      t.same(third.map((c) => c.id), backlogA.slice(4, 6), 'claimer 2 gets exactly the two freed slots, oldest first');
    });

    t.test('free slots go round-robin across organizations, oldest due first', async (t) => {
      const { a } = await fresh();
      for (const o of ['org_x', 'org_y', 'org_z']) await org(a, o);
      await backlog(a, 'org_x', 10, 0);
      await backlog(a, 'org_y', 10, 20);
      await backlog(a, 'org_z', 10, 40);
      const got = await claim(a, 1000, 5, 4);
      t.same(orgsOf(got).sort(), ['org_x', 'org_x', 'org_y', 'org_y', 'org_z'].sort(), 'each organization its oldest, then each its second: x, y, z, x, y');
      const more = await claim(a, 1000, 16, 4);
      t.same(orgsOf(more).sort(), ['org_x', 'org_x', 'org_y', 'org_y', 'org_z', 'org_z', 'org_z'].sort(), 'then up to the cap of 4 each');
    });

    t.test('claimers racing: no delivery claimed twice and never more than perOrg in flight', async (t) => {
      const { a, b } = await fresh();
      await org(a, 'org_r');
      await org(a, 'org_s');
      await backlog(a, 'org_r', 40, 0);
      await backlog(a, 'org_s', 40, 0);
      const seen = new Set<string>();
      let dup = 0;
      for (let round = 0; round < 12; round++) {
        const [x, y] = await Promise.all([claim(a, 1000 + round, 3, 3), claim(b, 1000 + round, 3, 3)]);
        for (const c of [...x, ...y]) {
          if (seen.has(c.id)) dup++;
          seen.add(c.id);
        }
        const [inflight] = await a.query<{ r: number; s: number }>(
          `SELECT count(*) FILTER (WHERE org_id = 'org_r')::int AS r, count(*) FILTER (WHERE org_id = 'org_s')::int AS s FROM webhook_deliveries WHERE lease_until > $1`,
          [at(1000 + round).toISOString()],
        );
        if ((inflight?.r ?? 0) > 3 || (inflight?.s ?? 0) > 3) t.fail(`round ${round}: in flight r=${inflight?.r} s=${inflight?.s} over the cap of 3`);
        // one of each organization's claims finishes, so the next round has room again
        for (const c of [...x, ...y].filter((c, i, all) => all.findIndex((o) => o.org_id === c.org_id) === i)) {
          await recordAttempt(a, c, { started: at(1000 + round), durationMs: 1, outcome: OK }, { retryDelaysMs: [] });
        }
      }
      t.equal(dup, 0, 'no delivery claimed by both claimers');
      t.ok(seen.size >= 12, `deliveries kept flowing (${seen.size} claimed)`);
    });

    t.test('a late release does not pull a just-scheduled retry forward; a live claim is released to now', async (t) => {
      const { a, b } = await fresh();
      await org(a, 'org_s');
      const [id1, id2] = await backlog(a, 'org_s', 2, 0);
      if (id1 === undefined || id2 === undefined) throw new Error('the backlog holds fewer than 2 deliveries');
      const claims = await claim(a, 1000);
      const c1 = claims.find((c) => c.id === id1)!;
      const c2 = claims.find((c) => c.id === id2)!;
      // c1's attempt finished (a retry 60 s out) between stop() reading what is in flight and releasing it
      t.equal(await recordAttempt(a, c1, { started: at(1000), durationMs: 3, outcome: FAIL }, { retryDelaysMs: [60_000], now: at(1010), jitter: (ms) => ms }), 'retry');
      const released = await releaseClaims(b, [c1, c2], at(1020));
      t.equal(released, 1, 'only the claim that still holds its lease is released');
      t.equal(new Date((await row(a, id1)).next_attempt_at ?? '').toISOString(), at(61_010).toISOString(), 'the retry keeps its time (not pulled forward to now)');
      const r2 = await row(a, id2);
      t.equal(new Date(r2.next_attempt_at ?? '').toISOString(), at(1020).toISOString(), 'the unfinished claim is due again at once');
      t.equal(r2.lease_until, null);
      t.equal(await releaseClaims(b, [c2], at(1030)), 0, 'releasing twice changes nothing');
    });

    t.test('a claim that lost its lease records nothing: no delivered overwritten, no false delivery.failed', async (t) => {
      const { a, b } = await fresh();
      await org(a, 'org_t');
      const [id] = await backlog(a, 'org_t', 1, 0);
      const [stale] = await claim(a, 1000, 16, 4, 1000); // lease until T0+2000
      t.ok(stale);
      // the attempt stalls past its lease; claimer 2 takes the delivery over and delivers it
      const [takeover] = await claim(b, 2500, 16, 4, 1000);
      t.equal(takeover?.id, id, 'claimed again once the lease ran out');
      t.equal(await recordAttempt(b, takeover!, { started: at(2500), durationMs: 5, outcome: OK }, { retryDelaysMs: [] }), 'delivered');
      // the stalled worker now fails its (last) attempt
      t.equal(await recordAttempt(a, stale!, { started: at(1000), durationMs: 4000, outcome: FAIL }, { retryDelaysMs: [] }), 'stale');
      const r = await row(a, id!);
      t.equal(r.status, 'delivered', 'still delivered');
      t.equal(r.attempts, 1, "the stale attempt is not counted");
      const failed = await a.query(`SELECT id FROM webhook_deliveries WHERE event = 'delivery.failed'`);
      t.equal(failed.length, 0, 'no delivery.failed was enqueued');
      const attempts = await a.query<{ status_code: number }>('SELECT status_code FROM webhook_attempts WHERE delivery_id = $1', [id]);
      t.same(attempts.map((x) => x.status_code), [200], "only the owning claim's attempt is in the history");

      // the same stale worker cannot release it either
      t.equal(await releaseClaims(a, [stale!], at(5000)), 0);

      // and, the other way round: a fenced final failure does enqueue delivery.failed
      const [id2] = await backlog(a, 'org_t', 1, 10_000, 'claim.denied');
      const [own] = await claim(a, 11_000);
      t.equal(own?.id, id2);
      t.equal(await recordAttempt(a, own!, { started: at(11_000), durationMs: 4, outcome: FAIL }, { retryDelaysMs: [] }), 'failed');
      t.equal((await a.query(`SELECT id FROM webhook_deliveries WHERE event = 'delivery.failed'`)).length, 1, 'the owning claim emits delivery.failed');
    });

    t.test('the slow hold is a schedule: it frees the slot and the organization’s in-flight count at once', async (t) => {
      const { a, b } = await fresh();
      await org(a, 'org_h');
      const [h1, h2] = await backlog(a, 'org_h', 2, 0);
      const [c1] = await claim(a, 1000, 16, 1);
      t.equal(c1?.id, h1);
      t.same(await claim(b, 1000, 16, 1), [], 'cap of 1 reached while the claim is live');
      t.ok(await holdClaim(a, c1!, 3000, at(1000)), 'held');
      const held = await row(a, h1!);
      t.equal(held.lease_until, null, 'no lease while held');
      t.equal(new Date(held.held_since!).toISOString(), at(1000).toISOString());
      const [c2] = await claim(b, 1001, 16, 1);
      t.equal(c2?.id, h2, "the organization's next delivery is claimed while the first is held");
      t.same(await claim(b, 3999, 16, 4).then((cs) => cs.map((c) => c.id)), [], 'the held one is not due before its hold ends');
      const [back] = await claim(b, 4000, 16, 4);
      t.equal(back?.id, h1, 'due when the hold ends');
      t.equal(back!.held_since?.toISOString(), at(1000).toISOString(), 'the claim carries when the hold began (the attempt started then)');
      t.notOk(await holdClaim(a, c1!, 3000, at(4001)), 'the first claim, no longer the owner, cannot hold it again');
      t.equal(await recordAttempt(b, back!, { started: back!.held_since!, durationMs: 3005, outcome: OK }, { retryDelaysMs: [] }), 'delivered');
      t.equal((await row(a, h1!)).held_since, null, 'the hold is cleared with the attempt');
    });

    t.test('a sandbox may have only so many mock events pending: 429 with Retry-After', async (t) => {
      const { a } = await fresh();
      await org(a, 'org_m');
      await backlog(a, 'org_m', 3, 0, 'adt.admission');
      await backlog(a, 'org_m', 5, 100, 'connection.created'); // lifecycle events do not count
      await t.resolves(a.tx((sql) => assertMockRoom(sql, 'org_m', 4, at(0))), '3 pending mock events, limit 4: room');
      const [extra] = await backlog(a, 'org_m', 1, 5000, 'claim.denied');
      const err = await a.tx((sql) => assertMockRoom(sql, 'org_m', 4, at(0))).then(() => undefined, (e: unknown) => e);
      t.ok(err instanceof ApiError, 'refused');
      const e = err as ApiError;
      t.equal(e.code, 'rate_limited');
      t.equal(e.status, 429);
      t.equal(e.headers?.['Retry-After'], '1', 'Retry-After: the soonest pending one is due now (at least 1 s)');
      t.match(e.details, { reason: 'mock_events_pending', pending_limit: 4 });
      await a.query(`UPDATE webhook_deliveries SET status = 'delivered' WHERE id = $1`, [extra]);
      await t.resolves(a.tx((sql) => assertMockRoom(sql, 'org_m', 4, at(0))), 'room again once one is delivered');
      await org(a, 'org_n');
      await t.resolves(a.tx((sql) => assertMockRoom(sql, 'org_n', 1, at(0))), "another organization's count is its own");
    });

    t.test('a replayed mock event counts against that bound again (it becomes pending)', async (t) => {
      // noted in review: failed mock deliveries replayed all at once were pending past the bound
      const { a } = await fresh();
      await org(a, 'org_r');
      const mocks = await backlog(a, 'org_r', 3, 0, 'adt.admission');
      const [real] = await backlog(a, 'org_r', 1, 0, 'connection.created');
      await a.query(`UPDATE webhook_deliveries SET status = 'failed' WHERE org_id = 'org_r'`);
      const replay = (id: string) => replayDelivery(a, 'org_r', id, mockReplayAdmission('org_r', 2)).then(() => 'replayed', (e: unknown) => e);
      t.equal(await replay(mocks[0]!), 'replayed');
      t.equal(await replay(mocks[1]!), 'replayed', 'two pending: the bound of 2 reached');
      const refused = await replay(mocks[2]!);
      t.ok(refused instanceof ApiError && refused.status === 429, String(refused));
      t.match((refused as ApiError).details, { reason: 'mock_events_pending', pending_limit: 2 });
      t.equal((await row(a, mocks[2]!)).status, 'failed', 'the refused one stays as it was');
      t.equal(await replay(real!), 'replayed', 'a real event is not bounded by the sandbox');
      t.equal(await replay(mocks[0]!), 'replayed', 'one already pending is sent again without counting twice');
    });
  });
}
