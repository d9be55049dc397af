/**
 * What the query path must keep at any concurrency, on both stores (the embedded PGlite and, when
 * one answers, PostgreSQL): money exact and never double spent, the trial's limits, one order per
 * connection's audit chain, and revocation cutting whatever this process caches (the connection
 * cache, the checked-statement cache), also when another replica revokes.
 */
import t from 'tap';
import { api, freshDatabase, openConnection, realPostgresAvailable, signupAgent, startServer, type TestServer } from '../helpers/server.js';

type Q = { billed_to: string; cost_cents: number; bytes_egressed: number; audit_event_id: string; error?: { code: string; details?: { audit_event_id?: string } } };
type Usage = { spend_cents: number; wallet_balance_cents: number; wallet_held_cents: number; queries: number; trial: { queries_left: number; egress_bytes_held: number } };
type AuditEventBody = { id: string; seq: number; type: string; outcome?: string; error_code?: string | null };

interface StoreCase {
  readonly name: string;
  readonly databaseUrl?: string;
  readonly drop?: () => Promise<void>;
}

const cases: StoreCase[] = [{ name: 'embedded store' }];
if (await realPostgresAvailable()) {
  const db = await freshDatabase('svc_invariants');
  cases.push({ name: 'PostgreSQL store', databaseUrl: db.url, drop: db.drop });
} else {
  t.comment('no PostgreSQL answers at TEST_DATABASE_URL: the PostgreSQL store cases do not run here');
}

async function events(srv: TestServer, key: string, conn: string): Promise<AuditEventBody[]> {
  const r = await api<{ events: AuditEventBody[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit?limit=1000`, { key });
  return r.body.events;
}

async function verified(srv: TestServer, key: string, conn: string): Promise<{ verified: boolean; events_checked: number; broken_at: number | null }> {
  return (await api<{ verified: boolean; events_checked: number; broken_at: number | null }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key })).body;
}

for (const c of cases) {
  t.test(c.name, async (t) => {
    const srv = await startServer({ ...(c.databaseUrl ? { databaseUrl: c.databaseUrl } : {}), limits: { queryTimeoutMs: 30_000 } });
    t.teardown(async () => {
      await srv.close();
      await c.drop?.();
    });

    t.test('300 queries 30 at a time: the trial pays exactly 100, the wallet the rest it can hold, sums exact, one chain', async (t) => {
      const a = await signupAgent(srv.url);
      t.equal((await api(srv.url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 100 } })).status, 200);
      const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
      const results: { status: number; body: Q }[] = [];
      for (let round = 0; round < 10; round++) {
        results.push(
          ...(await Promise.all(
            Array.from({ length: 30 }, (_, i) => api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: `SELECT patient_id FROM patients ORDER BY patient_id LIMIT ${1 + ((round * 30 + i) % 7)}` } })),
          )),
        );
      }
      const ok = results.filter((r) => r.status === 200);
      t.ok(results.every((r) => r.status === 200 || r.status === 402), `statuses: ${[...new Set(results.map((r) => r.status))].join(',')}`);
      t.equal(ok.filter((r) => r.body.billed_to === 'trial').length, 100, 'the trial paid exactly 100');
      const wallet = ok.filter((r) => r.body.billed_to === 'wallet');
      t.ok(wallet.length > 100, `the wallet paid ${wallet.length}`);
      const usage = (await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
      t.equal(usage.queries, ok.length, 'every answered query counted once');
      t.equal(usage.wallet_held_cents, 0, 'nothing left held');
      t.equal(usage.trial.egress_bytes_held, 0, 'no trial egress left held');
      t.equal(usage.trial.queries_left, 0);
      const spent = (rs: typeof ok): number => rs.reduce((sum, r) => sum + r.body.cost_cents, 0);
      t.ok(Math.abs(usage.spend_cents - spent(ok)) < 1e-6, `spend ${usage.spend_cents} = sum of costs ${spent(ok)}`);
      t.ok(Math.abs(100 - spent(wallet) - usage.wallet_balance_cents) < 1e-6, 'balance = top-up − wallet costs');
      t.ok(usage.wallet_balance_cents >= 0);

      // every query, answered or refused, is in the chain once, in one order
      const chain = await events(srv, a.key, conn);
      t.equal(chain.length, 300);
      t.same(
        chain.map((e) => e.seq),
        Array.from({ length: 300 }, (_, i) => i + 1),
      );
      const ids = new Set(chain.map((e) => e.id));
      t.ok(ok.every((r) => ids.has(r.body.audit_event_id)), 'every 200 names an event of the chain');
      t.ok(
        results.filter((r) => r.status === 402).every((r) => ids.has(r.body.error?.details?.audit_event_id ?? '')),
        'every 402 names an event of the chain',
      );
      t.match(await verified(srv, a.key, conn), { verified: true, events_checked: 300, broken_at: null });
    });

    t.test('a revocation under load: no answer after the revocation event, and the caches do not outlive it', async (t) => {
      const a = await signupAgent(srv.url);
      const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
      // warm this process's caches (connection, checked statement)
      const sql = 'SELECT patient_id FROM patients ORDER BY patient_id LIMIT 3';
      t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).status, 200);
      // 8 agents sending back to back; the revocation lands once some have been answered
      let answered = 0;
      let revoked = false;
      const answers: { status: number; body: Q }[] = [];
      let revocation: Promise<unknown> | undefined;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = 0; i < 8; i++) {
            const r = await api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
            answers.push(r);
            if (r.status === 200 && ++answered === 10 && !revoked) {
              revoked = true;
              revocation = api(srv.url, 'POST', `/v1/connections/${conn}/revoke`, { key: a.key });
            }
          }
        }),
      );
      t.equal(((await revocation) as { status: number } | undefined)?.status, 200);
      t.ok(answers.every((r) => r.status === 200 || r.status === 410), `statuses: ${[...new Set(answers.map((r) => r.status))].join(',')}`);
      t.ok(answers.filter((r) => r.status === 200).length >= 10 && answers.some((r) => r.status === 410), 'answers before it, refusals after it');
      const chain = await events(srv, a.key, conn);
      const revokedAt = chain.find((e) => e.type === 'connection.revoked')?.seq ?? -1;
      t.ok(revokedAt > 0, 'the revocation is in the chain');
      const bySeq = new Map(chain.map((e) => [e.id, e.seq]));
      for (const r of answers.filter((x) => x.status === 200)) t.ok((bySeq.get(r.body.audit_event_id) ?? Infinity) < revokedAt, 'answered before the revocation');
      t.ok(
        chain.filter((e) => e.seq > revokedAt).every((e) => e.outcome !== 'ok'),
        'nothing answered after it',
      );
      // the same statement (cached checked) and a bad one (refused before any reservation): both 410
      const again = await api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
      t.equal(again.status, 410);
      t.equal(again.body.error?.code, 'connection_revoked');
      const bad = await api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT nope FROM' } });
      t.equal(bad.status, 410, 'a revoked connection answers 410 before it looks at the statement');
      t.equal((await verified(srv, a.key, conn)).verified, true);
    });

    t.test('revoked in the store behind this process (as by another replica or the dashboard)', async (t) => {
      const a = await signupAgent(srv.url);
      const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
      const sql = 'SELECT count(*) AS n FROM patients';
      t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).status, 200, 'cached here now');
      await srv.svc.store.query('UPDATE connections SET revoked_at = now() WHERE id = $1', [conn]);
      const cachedStatement = await api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
      t.equal(cachedStatement.status, 410);
      t.equal(cachedStatement.body.error?.code, 'connection_revoked');
      const refused = await api<Q>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT * FROM secrets' } });
      t.equal(refused.status, 410, 'not the 403 the statement alone would get');
      const usage = (await api<Usage>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
      t.equal(usage.queries, 1, 'nothing charged after the revocation');
      t.equal(usage.trial.queries_left, 99, 'no trial query held or used after it');
    });

    if (c.databaseUrl) {
      t.test('two replicas on one store: a revocation on one is obeyed by the other at its next statement', async (t) => {
        const other = await startServer({ databaseUrl: c.databaseUrl as string });
        t.teardown(() => other.close());
        const a = await signupAgent(srv.url);
        const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
        const sql = 'SELECT patient_id FROM patients LIMIT 1';
        t.equal((await api(other.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).status, 200, 'the other replica caches it');
        t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/revoke`, { key: a.key })).status, 200);
        const r = await api<Q>(other.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
        t.equal(r.status, 410);
        t.equal(r.body.error?.code, 'connection_revoked');
        // concurrent queries through both replicas share one wallet and one chain
        const b = await signupAgent(srv.url);
        await srv.svc.store.query("UPDATE orgs SET trial_expires_at = now() - interval '1 second' WHERE id = $1", [b.orgId]);
        t.equal((await api(srv.url, 'POST', '/v1/agent/topup', { key: b.key, body: { amount_cents: 100 } })).status, 200);
        const conn2 = await openConnection(srv.url, b.key, 'demo-healthcare', ['read:patients']);
        const results = await Promise.all(
          Array.from({ length: 200 }, (_, i) => api<Q>(i % 2 ? srv.url : other.url, 'POST', `/v1/connections/${conn2}/query`, { key: b.key, body: { sql: 'SELECT 1 AS one' } })),
        );
        const ok = results.filter((x) => x.status === 200);
        t.ok(results.every((x) => x.status === 200 || x.status === 402));
        // 100 cents hold 172 queries of 0.58 cents; each costs 0.5 + egress
        t.ok(ok.length >= 172 && ok.length < 200, `${ok.length} paid`);
        const usage = (await api<Usage>(other.url, 'GET', '/v1/agent/account/usage', { key: b.key })).body;
        t.equal(usage.wallet_held_cents, 0);
        t.ok(Math.abs(100 - ok.reduce((s, x) => s + x.body.cost_cents, 0) - usage.wallet_balance_cents) < 1e-6, 'balance = top-up − costs');
        t.match(await verified(other, b.key, conn2), { verified: true, events_checked: 200, broken_at: null });
      });
    }
  });
}
