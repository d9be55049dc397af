import { createHash } from 'node:crypto';
import t from 'tap';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

type Verify = { verified: boolean; events_checked: number; broken_at: number | null };

async function connectionWithEvents(n: number): Promise<{ key: string; conn: string }> {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters', 'period:2024-Q1']);
  for (let i = 0; i < n; i++) {
    const r = await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: `SELECT count(*) + ${i} AS n FROM encounters` } });
    if (r.status !== 200) throw new Error(r.text);
  }
  return { key: a.key, conn };
}

const verify = async (key: string, conn: string): Promise<Verify> => (await api<Verify>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key })).body;

t.test('an intact chain verifies; the export checks offline with the published algorithm', async (t) => {
  const { key, conn } = await connectionWithEvents(5);
  t.same(await verify(key, conn), { ...(await verify(key, conn)), verified: true, events_checked: 5, broken_at: null });

  const info = await api<{ audit_genesis_hash: string; scopes: string[]; target_id: string; created_at: string }>(srv.url, 'GET', `/v1/connections/${conn}`, { key });
  const res = await api(srv.url, 'GET', `/v1/connections/${conn}/audit?format=jsonl`, { key });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /application\/x-ndjson/);
  const lines = res.text.trim().split('\n');
  t.equal(lines.length, 5);

  // independent implementation of the algorithm docs/audit.md publishes (RFC 8785 for our plain JSON values)
  const canon = (v: unknown): string =>
    v === null || typeof v !== 'object'
      ? JSON.stringify(v)
      : Array.isArray(v)
        ? `[${v.map(canon).join(',')}]`
        : `{${Object.keys(v as object)
            .sort()
            .map((k) => `${JSON.stringify(k)}:${canon((v as Record<string, unknown>)[k])}`)
            .join(',')}}`;
  const sha = (s: string) => createHash('sha256').update(s).digest('hex');
  const orgId = (await srv.svc.store.query<{ org_id: string }>('SELECT org_id FROM connections WHERE id = $1', [conn]))[0]?.org_id;
  const genesis = sha(`svc-audit-v1\n${canon({ connection_id: conn, org_id: orgId, target_id: info.body.target_id, scopes: info.body.scopes, created_at: info.body.created_at })}`);
  t.equal(genesis, info.body.audit_genesis_hash, 'genesis recomputed from the connection');
  let prev = genesis;
  lines.forEach((line, i) => {
    const ev = JSON.parse(line) as Record<string, unknown>;
    t.equal(line, canon(ev), 'each line is canonical JSON');
    const { hash, ...rest } = ev;
    t.equal(ev['seq'], i + 1);
    t.equal(ev['prev_hash'], prev);
    t.equal(sha(`${prev}\n${canon(rest)}`), hash);
    prev = hash as string;
  });

  // the JSON listing carries the same events, and no row data
  const listed = await api<{ events: { hash: string; sql: string; rows?: unknown }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key });
  t.same(listed.body.events.map((e) => e.hash), lines.map((l) => (JSON.parse(l) as { hash: string }).hash));
  t.ok(listed.body.events.every((e) => e.rows === undefined));
  const accept = await api(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key, headers: { accept: 'application/x-ndjson' } });
  t.equal(accept.text, res.text, 'Accept: application/x-ndjson gives the same export');
});

t.test('tampering is found at the right seq', async (t) => {
  const store = srv.svc.store;
  const edit = await connectionWithEvents(5);
  await store.query(`UPDATE audit_events SET body = replace(body, '"row_count":1', '"row_count":2') WHERE connection_id = $1 AND seq = 3`, [edit.conn]);
  t.match(await verify(edit.key, edit.conn), { verified: false, broken_at: 3 }, 'edited event');

  const middle = await connectionWithEvents(5);
  await store.query('DELETE FROM audit_events WHERE connection_id = $1 AND seq = 2', [middle.conn]);
  t.match(await verify(middle.key, middle.conn), { verified: false, broken_at: 2 }, 'deleted from the middle');

  const tail = await connectionWithEvents(5);
  await store.query('DELETE FROM audit_events WHERE connection_id = $1 AND seq >= 4', [tail.conn]);
  t.match(await verify(tail.key, tail.conn), { verified: false, events_checked: 3, broken_at: 4 }, 'deleted tail');

  const swap = await connectionWithEvents(5);
  await store.tx(async (sql) => {
    await sql.query('UPDATE audit_events SET seq = -1 WHERE connection_id = $1 AND seq = 2', [swap.conn]);
    await sql.query('UPDATE audit_events SET seq = 2 WHERE connection_id = $1 AND seq = 3', [swap.conn]);
    await sql.query('UPDATE audit_events SET seq = 3 WHERE connection_id = $1 AND seq = -1', [swap.conn]);
  });
  t.match(await verify(swap.key, swap.conn), { verified: false, broken_at: 2 }, 'two events swapped');
});

t.test('concurrent queries on one connection append one unforked chain', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const results = await Promise.all(
    Array.from({ length: 30 }, (_, i) => api<{ audit_event_id: string }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: `SELECT ${i} AS i` } })),
  );
  t.ok(results.every((r) => r.status === 200));
  t.same(await verify(a.key, conn), { ...(await verify(a.key, conn)), verified: true, events_checked: 30, broken_at: null });
  const ids = new Set(results.map((r) => r.body.audit_event_id));
  t.equal(ids.size, 30);
});

t.test('verify is consistent while queries append, and events past the head are caught', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const work: Promise<unknown>[] = [];
  const verdicts: Verify[] = [];
  for (let i = 0; i < 20; i++) {
    work.push(api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: `SELECT ${i} AS i` } }));
    work.push(verify(a.key, conn).then((v) => verdicts.push(v)));
  }
  await Promise.all(work);
  t.ok(verdicts.every((v) => v.verified), 'never a false break');

  // an event appended behind the head's back
  const [last] = await srv.svc.store.query<{ body: string; hash: string }>('SELECT body, hash FROM audit_events WHERE connection_id = $1 ORDER BY seq DESC LIMIT 1', [conn]);
  const forged = { ...(JSON.parse(last?.body ?? '{}') as Record<string, unknown>), seq: 21, prev_hash: last?.hash, id: 'evt_forged' };
  await srv.svc.store.query('INSERT INTO audit_events (connection_id, seq, event_id, body, hash) VALUES ($1, 21, $2, $3, $4)', [conn, 'evt_forged', JSON.stringify(forged), 'f'.repeat(64)]);
  t.match(await verify(a.key, conn), { verified: false, broken_at: 21 });
});

t.test('long statements are audited by hash with a bounded copy; bad paging input is a 400', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const sql = `SELECT 1 AS x ${' '.repeat(20_000)}FROM patients LIMIT 1`;
  const r = await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
  t.equal(r.status, 200);
  const listed = await api<{ events: { sql: string; sql_sha256: string; sql_truncated?: boolean }[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key: a.key });
  const ev = listed.body.events[0];
  t.equal(ev?.sql.length, 4096);
  t.equal(ev?.sql_truncated, true);
  t.equal(ev?.sql_sha256, createHash('sha256').update(sql).digest('hex'));
  for (const q of ['after_seq=9999999999', 'after_seq=-1', 'limit=abc', 'format=xml']) {
    const bad = await api<{ error: { code: string } }>(srv.url, 'GET', `/v1/connections/${conn}/audit?${q}`, { key: a.key });
    t.equal(bad.status, 400, q);
    t.equal(bad.body.error.code, 'invalid_request', q);
  }
});
