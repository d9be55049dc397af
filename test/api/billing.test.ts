import t from 'tap';
import { sweepReservations } from '../../control-plane/billing/index.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  // trial statements share one engine and, beside each other, wait for their organization's egress
  // holds: a long deadline keeps a loaded CI machine from turning those waits into 503/429
  srv = await startServer({ limits: { queryTimeoutMs: 30_000 } });
});
t.teardown(() => srv.close());

type Usage = {
  queries: number;
  egress_bytes: number;
  spend_cents: number;
  wallet_balance_cents: number;
  trial: { active: boolean; queries_left: number; egress_bytes_left: number; expires_at: string };
  auto_reload: { threshold_cents: number; amount_cents: number } | null;
};
type Q = { billed_to: string; cost_cents: number; bytes_egressed: number; error?: { code: string; message: string } };

t.test('billing config states the contract prices and trial', async (t) => {
  const a = await signupAgent(srv.url);
  const r = await api<Record<string, unknown>>(srv.url, 'GET', '/v1/agent/billing/config', { key: a.key });
  t.equal(r.status, 200);
  t.match(r.body, {
    price_per_query_cents: 0.5,
    price_per_gb_egress_cents: 8,
    gb_bytes: 1_000_000_000,
    trial: { queries: 100, egress_bytes: 5_000_000, duration_days: 7, credit_cents: 100, card_required: false },
  });
});

t.test('120 queries fired 20 at a time on a fresh account: exactly 100 succeed, 20 get 402; then a top-up pays', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const statuses: number[] = [];
  const payers: string[] = [];
  let expectedSpend = 0;
  for (let round = 0; round < 6; round++) {
    const batch = await Promise.all(
      Array.from({ length: 20 }, () => api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT patient_id FROM patients ORDER BY patient_id LIMIT 2' } })),
    );
    for (const r of batch) {
      statuses.push(r.status);
      if (r.status === 200) {
        payers.push(r.body.billed_to);
        expectedSpend += r.body.cost_cents;
      }
      if (r.status === 402) {
        t.equal(r.body.error?.code, 'payment_required');
        t.match(r.body.error?.message, /POST \/v1\/agent\/topup/);
      }
    }
  }
  t.equal(statuses.filter((s) => s === 200).length, 100);
  t.equal(statuses.filter((s) => s === 402).length, 20, `statuses: ${statuses.join(",")}`);
  t.ok(payers.every((p) => p === 'trial'));

  let usage = (await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  t.equal(usage.queries, 100);
  t.equal(usage.trial.queries_left, 0);
  t.equal(usage.trial.active, false);
  t.equal(usage.wallet_balance_cents, 0);
  t.ok(Math.abs(usage.spend_cents - expectedSpend) < 1e-9, 'spend is the sum of the costs reported');

  // the audit chain holds all 120 in one order and verifies
  const v = await api<{ verified: boolean; events_checked: number }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key });
  t.same(v.body, { ...v.body, verified: true, events_checked: 120 });

  const top = await api<{ wallet_balance_cents: number }>(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 100 } });
  t.equal(top.status, 200);
  t.equal(top.body.wallet_balance_cents, 100);
  const paid = await api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT patient_id FROM patients ORDER BY patient_id LIMIT 2' } });
  t.equal(paid.status, 200);
  t.equal(paid.body.billed_to, 'wallet');
  usage = (await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  // exact integer money underneath: 100 - (0.5 + bytes * 8e-9)
  const expected = (100 * 1e9 - (5e8 + paid.body.bytes_egressed * 8)) / 1e9;
  t.equal(usage.wallet_balance_cents, expected);
});

t.test('the wallet never goes negative and auto-reload tops it up', async (t) => {
  const a = await signupAgent(srv.url);
  // end the trial by its clock
  await srv.svc.store.query("UPDATE orgs SET trial_expires_at = now() - interval '1 second' WHERE id = $1", [a.orgId]);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const q = () => api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) FROM patients' } });
  t.equal((await q()).status, 402, 'an expired trial with an empty wallet pays nothing');

  const tooSmall = await api<{ error: { code: string } }>(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 50 } });
  t.equal(tooSmall.status, 400);

  const set = await api<{ auto_reload: unknown; wallet_balance_cents: number }>(srv.url, 'POST', '/v1/agent/topup', {
    key: a.key,
    body: { amount_cents: 100, auto_reload: { threshold_cents: 100, amount_cents: 500 } },
  });
  t.equal(set.status, 200);
  t.same(set.body.auto_reload, { threshold_cents: 100, amount_cents: 500 });
  const r = await q();
  t.equal(r.status, 200);
  t.equal(r.body.billed_to, 'wallet');
  const usage = (await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  // 100 - cost < 100 → reloaded by 500
  t.equal(usage.wallet_balance_cents, (600 * 1e9 - (5e8 + r.body.bytes_egressed * 8)) / 1e9);
  const ledger = await srv.svc.store.query<{ kind: string }>('SELECT kind FROM ledger WHERE org_id = $1 ORDER BY id', [a.orgId]);
  t.same(ledger.map((l) => l.kind), ['topup', 'query', 'auto_reload']);

  const off = await api<{ auto_reload: unknown }>(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 0, auto_reload: null } });
  t.equal(off.status, 200);
  t.equal(off.body.auto_reload, null);
});

t.test('the trial ends when its egress is used up', async (t) => {
  const a = await signupAgent(srv.url);
  await srv.svc.store.query('UPDATE orgs SET trial_egress_used = 4999990 WHERE id = $1', [a.orgId]);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const q = () => api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT patient_id FROM patients LIMIT 5' } });
  const crossing = await q();
  t.equal(crossing.status, 200);
  t.equal(crossing.body.billed_to, 'trial', 'the query that crosses the limit is still the trial’s');
  const after = await q();
  t.equal(after.status, 402);
  const usage = (await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  t.equal(usage.trial.egress_bytes_left, 0);
  t.equal(usage.trial.active, false);
});

t.test('a wallet holds at most $50,000, and lifetime totals past 2^53 nanocents stay exact', async (t) => {
  const a = await signupAgent(srv.url);
  for (let i = 0; i < 5; i++) t.equal((await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 1_000_000 } })).status, 200);
  const over = await api<{ error: { code: string; details: { field: string } } }>(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 100 } });
  t.equal(over.status, 400);
  t.equal(over.body.error.details.field, 'amount_cents');
  let usage = await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(usage.body.wallet_balance_cents, 5_000_000, 'the refused top-up credited nothing');
  // years of spending: 2^60 nanocents
  await srv.svc.store.query('UPDATE orgs SET list_spend_nc = 1152921504606846976, wallet_spend_nc = 1152921504606846976 WHERE id = $1', [a.orgId]);
  usage = await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key });
  t.equal(usage.status, 200);
  t.equal(usage.body.spend_cents, 1152921504.606846976);
});

t.test('money held by a query that never finished goes back when swept', async (t) => {
  const a = await signupAgent(srv.url);
  await srv.svc.store.query("UPDATE orgs SET trial_expires_at = now() - interval '1 second' WHERE id = $1", [a.orgId]);
  await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 100 } });
  // what a crash between reserve and settle leaves behind
  await srv.svc.store.tx(async (sql) => {
    await sql.query('UPDATE orgs SET wallet_nc = wallet_nc - 580000000, wallet_held_nc = wallet_held_nc + 580000000 WHERE id = $1', [a.orgId]);
    await sql.query("INSERT INTO reservations (id, org_id, payer, held_nc, created_at) VALUES ('rsv_stale', $1, 'wallet', 580000000, now() - interval '1 hour')", [a.orgId]);
  });
  let usage = (await api<Usage & { wallet_held_cents: number }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  t.equal(usage.wallet_held_cents, 0.58);
  t.equal(await sweepReservations(srv.svc.store, 60_000), 1);
  usage = (await api<Usage & { wallet_held_cents: number }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  t.equal(usage.wallet_held_cents, 0);
  t.equal(usage.wallet_balance_cents, 100);
  t.equal(await sweepReservations(srv.svc.store, 60_000), 0, 'swept once');
});

t.test('concurrent wallet-paid queries never take the wallet below zero', async (t) => {
  const a = await signupAgent(srv.url);
  await srv.svc.store.query("UPDATE orgs SET trial_expires_at = now() - interval '1 second' WHERE id = $1", [a.orgId]);
  await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 100 } });
  // 100 cents pay for 172 holds of 0.58 cents; fire 200 at once
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const results = await Promise.all(Array.from({ length: 200 }, () => api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT 1 AS one' } })));
  const ok = results.filter((r) => r.status === 200).length;
  t.ok(ok >= 172 && ok < 200, `${ok} paid, the rest 402`);
  t.ok(results.every((r) => r.status === 200 || r.status === 402));
  const usage = (await api<Usage & { wallet_held_cents: number }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  t.ok(usage.wallet_balance_cents >= 0);
  t.equal(usage.wallet_held_cents, 0);
  const spent = results.filter((r) => r.status === 200).reduce((sum, r) => sum + r.body.cost_cents, 0);
  t.ok(Math.abs(100 - spent - usage.wallet_balance_cents) < 1e-6, 'balance = top-up − sum of costs');
});
