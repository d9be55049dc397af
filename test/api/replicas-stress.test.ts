/**
 * On a real PostgreSQL store: two replicas, queries on several connections of three
 * organizations (trial, wallet with auto-reload, both), top-ups, revocations and reservation
 * sweeps all at once. No deadlock or 500, money exact, nothing left held, every chain verifies.
 */
import t from 'tap';
import { api, freshDatabase, openConnection, realPostgresAvailable, signupAgent, startServer, type Agent } from '../helpers/server.js';
import { sweepReservations, NC_PER_CENT } from '../../control-plane/billing/index.js';

type Q = { billed_to?: string; cost_cents?: number; error?: { code: string } };

if (!(await realPostgresAvailable())) {
  t.skip('mixed load on two replicas of one PostgreSQL store: no PostgreSQL answers at TEST_DATABASE_URL', () => undefined);
} else {
  t.test('mixed load on two replicas of one PostgreSQL store', async (t) => {
    const db = await freshDatabase('svc_review_stress');
    const a = await startServer({ databaseUrl: db.url, limits: { queryTimeoutMs: 20_000 } });
    const b = await startServer({ databaseUrl: db.url, limits: { queryTimeoutMs: 20_000 } });
    t.teardown(async () => {
      await a.close();
      await b.close();
      await db.drop();
    });
    const store = a.svc.store;
    const orgs: { agent: Agent; conns: string[] }[] = [];
    for (let i = 0; i < 3; i++) {
      const agent = await signupAgent(a.url, `Org ${i}`);
      if (i === 1) await store.query("UPDATE orgs SET trial_expires_at = now() - interval '1 second' WHERE id = $1", [agent.orgId]);
      if (i > 0) t.equal((await api(a.url, 'POST', '/v1/agent/topup', { key: agent.key, body: { amount_cents: 100, auto_reload: { threshold_cents: 50, amount_cents: 100 } } })).status, 200);
      const conns = [];
      for (let c = 0; c < 3; c++) conns.push(await openConnection(a.url, agent.key, 'demo-healthcare', ['read:patients']));
      orgs.push({ agent, conns });
    }
    let stop = false;
    let sweeps = 0;
    const sweeper = (async () => {
      while (!stop) {
        sweeps += await sweepReservations(store, 0); // every reservation made before now: as after a crash
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    const topups = (async () => {
      for (let i = 0; i < 10 && !stop; i++) {
        await api(b.url, 'POST', '/v1/agent/topup', { key: orgs[1 + (i % 2)]!.agent.key, body: { amount_cents: 100 } });
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const results: { status: number; body: Q; org: number }[] = [];
    let n = 0;
    await Promise.all(
      Array.from({ length: 16 }, async (_, w) => {
        for (let i = 0; i < 30; i++) {
          const k = n++;
          const o = k % 3;
          const org = orgs[o]!;
          const conn = org.conns[k % 3]!;
          if (k >= 200 && k < 203) void api(k % 2 ? a.url : b.url, 'POST', `/v1/connections/${orgs[k - 200]!.conns[2]}/revoke`, { key: orgs[k - 200]!.agent.key });
          const r = await api<Q>((w + i) % 2 ? a.url : b.url, 'POST', `/v1/connections/${conn}/query`, { key: org.agent.key, body: { sql: `SELECT patient_id FROM patients ORDER BY patient_id LIMIT ${1 + (k % 5)}` } });
          results.push({ status: r.status, body: r.body, org: o });
        }
      }),
    );
    stop = true;
    await Promise.all([sweeper, topups]);
    const statuses = [...new Set(results.map((r) => `${r.status}:${r.body.error?.code ?? ''}`))];
    t.ok(results.every((r) => [200, 402, 410, 429].includes(r.status)), `statuses ${statuses.join(',')}`);
    t.comment(`sweeps gave back ${sweeps} reservations`);
    t.same(await store.query('SELECT count(*)::int AS n FROM reservations'), [{ n: 0 }], 'nothing left reserved');
    for (let o = 0; o < 3; o++) {
      const org = orgs[o]!;
      const [row] = await store.query<Record<string, string>>(
        'SELECT wallet_nc::text AS w, wallet_held_nc::text AS h, trial_egress_held::text AS te, trial_queries_used::text AS tq, list_spend_nc::text AS ls FROM orgs WHERE id = $1',
        [org.agent.orgId],
      );
      const [ledger] = await store.query<{ s: string }>('SELECT coalesce(sum(amount_nc), 0)::text AS s FROM ledger WHERE org_id = $1', [org.agent.orgId]);
      t.equal(row?.['h'], '0', `org ${o}: nothing held`);
      t.equal(row?.['te'], '0', `org ${o}: no trial egress held`);
      t.ok(Number(row?.['tq']) <= 100, `org ${o}: trial queries ${row?.['tq']} <= 100`);
      t.equal(row?.['w'], ledger?.s, `org ${o}: balance = sum of the ledger`);
      const paid = results.filter((r) => r.org === o && r.status === 200).reduce((s, r) => s + (r.body.cost_cents ?? 0), 0);
      const charged = results.filter((r) => r.org === o && r.status !== 200).reduce((s, r) => s + (r.body.cost_cents ?? 0), 0);
      t.ok(Math.abs(Number(row?.['ls']) / NC_PER_CENT - paid - charged) < 1e-6, `org ${o}: list spend ${Number(row?.['ls']) / NC_PER_CENT} = answered costs ${paid} + ${charged}`);
      for (const c of org.conns) {
        const v = (await api<{ verified: boolean }>(b.url, 'GET', `/v1/audit/verify?connection_id=${c}`, { key: org.agent.key })).body;
        t.equal(v.verified, true, `chain of ${c} verifies`);
      }
    }
  });
}
