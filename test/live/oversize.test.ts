/**
 * Issue #12 point 1: a single huge value must not take the control plane down. A 600 MB value on
 * a live `postgres` target (and MySQL) is refused before the driver decodes it: the process
 * stays up, the answer is `truncated: true` with the rows that fit (or `400 invalid_sql` reason
 * `row_too_large` when not even the first row fits), the query is audited, and the next query on
 * the same connection works. The result budget is lowered to 1 MB so the test stays small; the
 * value is never materialised in this process (heap growth is checked).
 */
import t from 'tap';
import pg from 'pg';
import { customerDatabase, quietServerLog, withSslmode } from '../helpers/customer-db.js';
import { api, openConnection, realPostgresAvailable, signupAgent, startServer, type TestServer } from '../helpers/server.js';

interface QueryBody {
  rows: Record<string, unknown>[];
  row_count: number;
  truncated: boolean;
  error?: { code: string; message: string; details?: Record<string, unknown> };
}
interface AuditBody {
  events: { type: string; outcome: string; error_code?: string | null }[];
}

const MAX_BYTES = 1_000_000;
let srv: TestServer | undefined;

t.before(async () => {
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { maxResultBytes: MAX_BYTES, queryTimeoutMs: 60_000 } });
});
t.teardown(async () => {
  await srv?.close();
});

async function setup(kind: 'postgres' | 'mysql', url: string, scopes: string[]): Promise<{ key: string; conn: string }> {
  const s = srv as TestServer;
  const a = await signupAgent(s.url);
  const r = await api(s.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: kind, secret: url } });
  if (r.status !== 201) throw new Error(`credential: ${r.status} ${r.text}`);
  return { key: a.key, conn: await openConnection(s.url, a.key, kind, scopes) };
}

const query = (key: string, conn: string, sql: string) => api<QueryBody>((srv as TestServer).url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql } });
const audit = (key: string, conn: string) => api<AuditBody>((srv as TestServer).url, 'GET', `/v1/connections/${conn}/audit`, { key });

t.test('postgres: a 600 MB value is never read; the answer is truncated or row_too_large, audited, and the server goes on', async (t) => {
  if (!(await realPostgresAvailable())) return t.skip('no PostgreSQL server at TEST_DATABASE_URL (PGlite cannot build a 600 MB value)', () => undefined);
  const customer = await customerDatabase('svc_live_oversize');
  t.teardown(() => customer.drop());
  if (customer.kind !== 'postgres') return t.skip('the customer database is not a real PostgreSQL', () => undefined);
  const c = new pg.Client({ connectionString: customer.url });
  await c.connect();
  await c.query('CREATE TABLE svc_oversize (id int)');
  await c.end();
  if (!(await quietServerLog(customer.url))) t.comment('the server logs this database\'s errors: the 600 MB error message goes to its log');
  const { key, conn } = await setup('postgres', withSslmode(customer.url), ['read:public.svc_oversize']);
  const heapBefore = process.memoryUsage().rss;

  // not a single row fits
  const big = await query(key, conn, "SELECT repeat('x', 600000000) AS v");
  t.equal(big.status, 400, big.text);
  t.equal(big.body.error?.code, 'invalid_sql');
  t.equal(big.body.error?.details?.['reason'], 'row_too_large');
  t.match(big.body.error?.message, /bytes/);

  // small rows first, then the huge one: the rows that fit, truncated
  const mixed = await query(key, conn, "SELECT g AS n, CASE WHEN g < 4 THEN 'small' ELSE repeat('x', 600000000) END AS v FROM (SELECT generate_series(1, 5) AS g) s");
  t.equal(mixed.status, 200, mixed.text);
  t.equal(mixed.body.truncated, true);
  t.same(mixed.body.rows.map((r) => r['n']), [1, 2, 3], 'the rows before the huge one');

  // an error message quoting the 600 MB value (PostgreSQL puts the whole input in it)
  const quoted = await query(key, conn, "SELECT repeat('x', 600000000)::int AS v");
  t.equal(quoted.status, 400, quoted.text);
  t.equal(quoted.body.error?.details?.['reason'], 'message_too_large');

  t.ok(process.memoryUsage().rss - heapBefore < 400_000_000, 'the 600 MB value was never held');

  // the server still answers, and the same connection works
  const next = await query(key, conn, 'SELECT 1 AS one');
  t.equal(next.status, 200, next.text);
  t.same(next.body.rows, [{ one: 1 }]);

  const events = (await audit(key, conn)).body.events;
  const outcomes = events.filter((e) => e.type === 'query').map((e) => e.outcome);
  t.ok(outcomes.length >= 4, `every query is audited: ${JSON.stringify(events.map((e) => [e.type, e.outcome]))}`);
  t.ok(outcomes[0] === 'refused' || outcomes[0] === 'error', `the row_too_large answer is audited as refused: ${outcomes[0]}`);
  t.equal(outcomes[1], 'ok', 'the truncated answer is audited as ok');

  // no backend of ours is left running the statement
  const c2 = new pg.Client({ connectionString: customer.url });
  await c2.connect();
  let left = 1;
  for (let i = 0; i < 50 && left > 0; i++) {
    // this database's statements only (other test files run svc-live statements on the same server)
    left = (
      await c2.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'svc-live' AND state = 'active' AND datname = current_database() AND pid <> pg_backend_pid()",
      )
    ).rows[0]?.n ?? 0;
    if (left > 0) await new Promise((r) => setTimeout(r, 100));
  }
  await c2.end();
  t.equal(left, 0, 'the statement was stopped at the database');
});

t.test('mysql: a 600 MB value is never read (max_allowed_packet raised to 1 GB for the test)', async (t) => {
  const mysql = (await import('mysql2/promise')).default;
  const ADMIN = { host: '127.0.0.1', port: 3306, user: 'root', password: '' };
  let admin: Awaited<ReturnType<typeof mysql.createConnection>>;
  try {
    admin = await mysql.createConnection({ ...ADMIN, connectTimeout: 1500 });
  } catch {
    return t.skip('no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)', () => undefined);
  }
  const [[setting]] = (await admin.query('SELECT @@GLOBAL.max_allowed_packet AS p')) as unknown as [{ p: number }[]];
  const previous = Number(setting?.p ?? 16777216);
  // string functions answer NULL beyond max_allowed_packet (RPAD counts 4 bytes a character in
  // utf8mb4, hence three of 200 M): raise it (new sessions take it) so the server really sends 600 MB
  await admin.query('SET GLOBAL max_allowed_packet = 1073741824');
  const db = `svc_oversize_${process.pid}`;
  await admin.query(`CREATE DATABASE IF NOT EXISTS ${db}`);
  await admin.query(`CREATE TABLE IF NOT EXISTS ${db}.nums (n int)`);
  await admin.query(`INSERT INTO ${db}.nums VALUES (1), (2), (3), (4), (5)`);
  t.teardown(async () => {
    await admin.query(`SET GLOBAL max_allowed_packet = ${previous}`).catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${db}`).catch(() => undefined);
    await admin.end().catch(() => undefined);
  });
  const { key, conn } = await setup('mysql', `mysql://root@127.0.0.1:3306/${db}?sslmode=disable`, [`read:${db}.nums`]);
  const rssBefore = process.memoryUsage().rss;

  const big = await query(key, conn, `SELECT n, CONCAT(RPAD('x', 200000000, 'x'), RPAD('x', 200000000, 'x'), RPAD('x', 200000000, 'x')) AS v FROM ${db}.nums WHERE n = 1`);
  t.equal(big.status, 400, big.text);
  t.equal(big.body.error?.code, 'invalid_sql');
  t.equal(big.body.error?.details?.['reason'], 'row_too_large');

  const mixed = await query(key, conn, `SELECT n, CASE WHEN n < 4 THEN 'small' ELSE CONCAT(RPAD('x', 200000000, 'x'), RPAD('x', 200000000, 'x'), RPAD('x', 200000000, 'x')) END AS v FROM ${db}.nums ORDER BY n`);
  t.equal(mixed.status, 200, mixed.text);
  t.equal(mixed.body.truncated, true);
  t.same(
    mixed.body.rows.map((r) => r['n']),
    [1, 2, 3],
    'the rows before the huge one',
  );
  t.ok(process.memoryUsage().rss - rssBefore < 400_000_000, 'the 600 MB value was never held');

  const next = await query(key, conn, `SELECT n FROM ${db}.nums WHERE n = 2`);
  t.equal(next.status, 200, next.text);
  t.same(next.body.rows, [{ n: 2 }]);

  const outcomes = (await audit(key, conn)).body.events.filter((e) => e.type === 'query').map((e) => e.outcome);
  t.same(outcomes.slice(0, 3), ['refused', 'ok', 'ok'], `every query audited: ${JSON.stringify(outcomes)}`);

  // the statements were killed at the server
  let left = 1;
  for (let i = 0; i < 50 && left > 0; i++) {
    const [rows] = (await admin.query("SELECT COUNT(*) AS c FROM information_schema.PROCESSLIST WHERE INFO LIKE '%RPAD(%200000000%' AND COMMAND = 'Query' AND ID <> CONNECTION_ID()")) as unknown as [{ c: number }[]];
    left = Number(rows[0]?.c ?? 0);
    if (left > 0) await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(left, 0, 'no statement left running at the server');
});
