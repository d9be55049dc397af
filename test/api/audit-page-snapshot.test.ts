/**
 * A page of GET /v1/connections/{id}/audit is read from one snapshot of the store: its `head`
 * and its `events` agree even while other replicas append to the chain, and `next_after_seq` is
 * null only when no event comes after the page's last. The head used to be read before the
 * events, in another statement: events appended between the two passed the head the page gave,
 * and a full page whose last event passed it said `next_after_seq: null` with more events after
 * it. Appends from "another replica" are held back here by a lock on audit_events until the
 * page has read its head, then committed (a real PostgreSQL store is needed).
 */
import pg from 'pg';
import t from 'tap';
import { appendEvent } from '../../control-plane/audit/index.js';
import type { Sql } from '../../control-plane/store/index.js';
import { api, freshDatabase, openConnection, realPostgresAvailable, signupAgent, startServer } from '../helpers/server.js';
import { until } from '../helpers/tap.js';

type Page = { head: { seq: number; hash: string }; events: { seq: number; hash: string }[]; next_after_seq: number | null };

if (!(await realPostgresAvailable())) {
  t.skip('audit page snapshot: no PostgreSQL answers at TEST_DATABASE_URL for the store', () => undefined);
} else {
  t.test('events appended while a page is read do not pass its head, and a page with more after it says so', async (t) => {
    const db = await freshDatabase('svc_test_audit_page');
    const srv = await startServer({ databaseUrl: db.url });
    const other = new pg.Client({ connectionString: db.url }); // another replica's appends
    const watcher = new pg.Client({ connectionString: db.url });
    await other.connect();
    await watcher.connect();
    t.teardown(async () => {
      await other.end();
      await watcher.end();
      await srv.close();
      await db.drop();
    });
    const org = await signupAgent(srv.url, 'Audit Page Org');
    const conn = await openConnection(srv.url, org.key, 'demo-healthcare', ['read:patients']);
    await appendEvent(srv.svc.store, conn, { type: 'query', org_id: org.orgId, outcome: 'ok', note: 'first' });

    const otherSql: Sql = { query: async <T extends object>(text: string, params?: readonly unknown[]) => (await other.query(text, params as unknown[])).rows as T[] };
    await other.query('BEGIN');
    await other.query('LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE');
    const page = api<Page>(srv.url, 'GET', `/v1/connections/${conn}/audit?limit=2`, { key: org.key });
    await until('the page waits for audit_events', async () => {
      const r = await watcher.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%audit_events%' AND pid <> $1", [
        (other as unknown as { processID: number }).processID,
      ]);
      return (r.rows[0]?.n ?? 0) > 0;
    });
    for (let i = 0; i < 3; i++) await appendEvent(otherSql, conn, { type: 'query', org_id: org.orgId, outcome: 'ok', note: `appended elsewhere ${i}` });
    await other.query('COMMIT');

    const r = await page;
    t.equal(r.status, 200, r.text.slice(0, 300));
    const { head, events, next_after_seq: next } = r.body;
    t.ok(
      events.every((e) => e.seq <= head.seq),
      `no event passes the head the page gives (head ${head.seq}, events ${events.map((e) => e.seq).join(',')})`,
    );
    const last = events[events.length - 1];
    if (last?.seq === head.seq) t.equal(last.hash, head.hash, 'the head is the last event when the page reaches it');
    const total = (await watcher.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_events WHERE connection_id = $1', [conn])).rows[0]?.n ?? 0;
    t.equal(total, 4, 'four events in all');
    if (next === null) t.equal(last?.seq, head.seq, 'a page that says it is the last ends at its head');
    else t.equal(next, last?.seq, 'next_after_seq is its last event');
  });
}
