/**
 * A statement the SQL check refuses moves no money: it is answered with its refusal first (not
 * the payment it could not have made), nothing is charged or held, the trial's counters stay as
 * they were, its audit event is a refusal, and it is not kept waiting while the trial's egress is
 * all held by running queries. (These were written for a version that reserved while checking,
 * reverted since: the two did not overlap, and a refused statement held the trial meanwhile.)
 */
import t from 'tap';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import { TRIAL } from '../../control-plane/billing/index.js';

let srv: TestServer;
t.before(async () => {
  // a deadline past the subtests' own time limit: a refusal kept waiting for it fails by timing out
  srv = await startServer({ limits: { queryTimeoutMs: 120_000 } });
});
t.teardown(() => srv.close());

type Answer = { status: number; body: { error?: { code?: string; details?: Record<string, unknown> }; billed_to?: string } };
type OrgMoney = { wallet_nc: string; wallet_held_nc: string; trial_queries_used: number; trial_spent_nc: string; trial_egress_held: string; queries_total: string };

async function money(orgId: string): Promise<OrgMoney> {
  const [row] = await srv.svc.store.query<OrgMoney>(
    'SELECT wallet_nc::text, wallet_held_nc::text, trial_queries_used, trial_spent_nc::text, trial_egress_held::text, queries_total::text FROM orgs WHERE id = $1',
    [orgId],
  );
  if (!row) throw new Error('no org');
  return row;
}

async function reservations(orgId: string): Promise<number> {
  const [row] = await srv.svc.store.query<{ n: number }>('SELECT count(*)::int AS n FROM reservations WHERE org_id = $1', [orgId]);
  return row?.n ?? -1;
}

async function lastEvent(connectionId: string): Promise<Record<string, unknown>> {
  const [row] = await srv.svc.store.query<{ body: string }>('SELECT body FROM audit_events WHERE connection_id = $1 ORDER BY seq DESC LIMIT 1', [connectionId]);
  return JSON.parse(row?.body ?? '{}') as Record<string, unknown>;
}

const REFUSED: readonly [string, string][] = [
  ['a syntax error', 'SELEC 1'],
  ['a table outside the scopes', 'SELECT * FROM patients'],
  ['a write', 'DELETE FROM encounters'],
];

t.test('a refused statement on a funded wallet: refused, nothing held or charged, audited as a refusal', async (t) => {
  const a = await signupAgent(srv.url, 'Refused Wallet Org');
  await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 1000 } });
  // the trial used up: each reservation is a wallet hold
  await srv.svc.store.query('UPDATE orgs SET trial_queries_used = $2 WHERE id = $1', [a.orgId, TRIAL.queries]);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const before = await money(a.orgId);
  for (const [what, sql] of REFUSED) {
    const r = (await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })) as Answer;
    t.ok(r.status === 400 || r.status === 403, `${what}: refused (${r.status} ${r.body.error?.code})`);
    t.notOk(r.body.error?.details?.['cost_cents'], `${what}: no charge named`);
    const ev = await lastEvent(conn);
    t.equal(ev['outcome'], 'refused', `${what}: audited as a refusal`);
    t.equal(ev['cost_cents'], undefined, `${what}: its event charges nothing`);
  }
  t.same(await money(a.orgId), before, 'the wallet, its holds and the counters are as before');
  t.equal(await reservations(a.orgId), 0, 'no reservation left');
  // and a statement that runs is still charged from the wallet
  const ok = (await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) FROM encounters' } })) as Answer;
  t.equal(ok.status, 200);
  t.equal(ok.body.billed_to, 'wallet');
});

t.test('a refused statement on the trial leaves its counters as they were', async (t) => {
  const a = await signupAgent(srv.url, 'Refused Trial Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const before = await money(a.orgId);
  const answers = (await Promise.all(REFUSED.map(([, sql]) => api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })))) as Answer[];
  t.ok(answers.every((r) => r.status === 400 || r.status === 403), answers.map((r) => r.status).join(','));
  t.same(await money(a.orgId), before, 'trial queries, credit and egress held as before');
  t.equal(await reservations(a.orgId), 0, 'no reservation left');
});

t.test('with no trial left and no wallet, a refused statement is answered with its refusal, a valid one 402', async (t) => {
  const a = await signupAgent(srv.url, 'Broke Org');
  await srv.svc.store.query('UPDATE orgs SET trial_queries_used = $2 WHERE id = $1', [a.orgId, TRIAL.queries]);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const bad = (await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELEC 1' } })) as Answer;
  t.equal(bad.status, 400);
  t.equal(bad.body.error?.code, 'invalid_sql', 'the refusal, not the payment');
  const good = (await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT 1' } })) as Answer;
  t.equal(good.status, 402);
  t.equal(good.body.error?.code, 'payment_required');
});

t.test('a refused statement is not kept waiting while the trial egress is all held by running queries', { timeout: 60_000 }, async (t) => {
  const a = await signupAgent(srv.url, 'Held Trial Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  // as if running queries held all of the trial's egress: a reservation waits for them (up to the
  // statement's 120 s deadline, past this subtest's time limit)
  const held = TRIAL.egressBytes + srv.config.limits.maxResultBytes;
  await srv.svc.store.query('UPDATE orgs SET trial_egress_held = $2 WHERE id = $1', [a.orgId, held]);
  const r = (await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELEC 1' } })) as Answer;
  t.equal(r.status, 400);
  t.equal(r.body.error?.code, 'invalid_sql');
  const m = await money(a.orgId);
  t.equal(m.trial_egress_held, String(held), 'the holds are as they were');
  t.equal(m.trial_queries_used, 0, 'no trial query counted');
  t.equal(await reservations(a.orgId), 0, 'no reservation left');
});
