/**
 * GET /v1/connections/{id}/schema end to end on a real control plane: the demo and API targets
 * from their definitions, `postgres` against a real customer PostgreSQL (PGlite over the wire when
 * none answers), `postgres-relay` through a real svc-relay over mutual TLS, and `mysql` against
 * the MariaDB on 127.0.0.1:3306 (skipped with the reason when none answers). Only what the scopes
 * allow is listed (and only the columns the credential may read), with readable types; the call is
 * audited (the chain still verifies, online and offline) and not billed; revoked, expired, unknown
 * and other organizations' connections are refused; an unreachable source is 503.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import pg from 'pg';
import mysql from 'mysql2/promise';
import { verifyExport } from '../../cli/svc/commands/audit.js';
import { PendingEvent } from '../../control-plane/audit/index.js';
import { appendIfAnswerable } from '../../control-plane/billing/index.js';
import { customerDatabase, dropWithRole, withSslmode, type CustomerDatabase } from '../helpers/customer-db.js';
import { MARIADB_ADMIN, mariadbAnswers } from '../helpers/mariadb.js';
import { startRelay } from '../helpers/relay.js';
import { api, openConnection, signupAgent, startServer, type Agent, type TestServer } from '../helpers/server.js';

interface Column {
  name: string;
  type: string;
  nullable: boolean;
}
interface Table {
  name: string;
  columns: Column[];
  row_estimate?: number;
}
interface SchemaBody {
  connection_id: string;
  target_id: string;
  tables: Table[];
  missing_tables: string[];
  truncated: boolean;
  audit_event_id: string;
  error?: { code: string; message: string; details?: Record<string, unknown> };
}
interface AuditEvent {
  id: string;
  seq: number;
  type: string;
  outcome?: string;
  error_code?: string | null;
  tables?: string[];
  missing_tables?: string[];
}

let srv: TestServer;
let db: CustomerDatabase;
const ROLE = `svc_schema_rd_${process.pid}`;

t.before(async () => {
  db = await customerDatabase('svc_schema');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query(`CREATE TABLE orders (id int PRIMARY KEY, tenant_id int NOT NULL, total numeric(10,2), placed_at timestamptz NOT NULL DEFAULT now(), note varchar(255))`);
  await c.query(`INSERT INTO orders (id, tenant_id, total, note) SELECT g, g % 10, g * 1.5, 'order ' || g FROM generate_series(1, 300) g`);
  await c.query(`CREATE SCHEMA reports`);
  await c.query(`CREATE TABLE reports.daily (day date NOT NULL, n bigint, "Odd Name" text)`);
  await c.query(`CREATE TABLE secrets (id int, value text)`);
  await c.query(`ALTER TABLE orders DROP COLUMN total`); // a dropped column is never listed
  await c.query(`ANALYZE orders`);
  if (db.kind === 'postgres') {
    await c.query(`DROP ROLE IF EXISTS ${ROLE}`).catch(() => undefined);
    await c.query(`CREATE ROLE ${ROLE} LOGIN PASSWORD 'reader-pw'`);
    await c.query(`GRANT USAGE ON SCHEMA reports TO ${ROLE}`);
    await c.query(`GRANT SELECT (id, note) ON orders TO ${ROLE}`);
    // a table the role may select in a schema it may not use: every query of it is refused
    await c.query(`CREATE SCHEMA locked`);
    await c.query(`CREATE TABLE locked.vault (id int, secret text)`);
    await c.query(`GRANT SELECT ON locked.vault TO ${ROLE}`);
  }
  await c.end();
  // the customer databases are on loopback: allowed only by SVC_LIVE_ALLOW_PRIVATE=1
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 3000 } });
});
t.teardown(async () => {
  await srv?.close();
  await dropWithRole(db, ROLE);
});

/** a second control plane whose responses hold at most 800 bytes of rows (started once, when first needed) */
let small: TestServer | undefined;
const smallServer = async (): Promise<TestServer> => (small ??= await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 3000, maxResultBytes: 800 } }));
t.teardown(async () => small?.close());

const schema = (key: string, conn: string) => api<SchemaBody>(srv.url, 'GET', `/v1/connections/${conn}/schema`, { key });
const events = async (key: string, conn: string): Promise<AuditEvent[]> => (await api<{ events: AuditEvent[] }>(srv.url, 'GET', `/v1/connections/${conn}/audit`, { key })).body.events;
async function agentWith(kind: string, secret: string, options?: Record<string, unknown>): Promise<Agent> {
  const a = await signupAgent(srv.url);
  const r = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: kind, secret, ...(options ? { options } : {}) } });
  if (r.status !== 201) throw new Error(`credential: ${r.status} ${r.text}`);
  return a;
}

/** the listing's tables by name */
const byName = (b: SchemaBody): Record<string, Table> => Object.fromEntries(b.tables.map((x) => [x.name, x]));

t.test('demo target: only the scoped tables, every column with its readable type; audited, not billed, the chain verifies', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters', 'read:patients', 'period:2024-Q1']);
  const usage = async () => (await api<{ queries: number; spend_cents: number; trial: { queries_left: number } }>(srv.url, 'GET', '/v1/agent/account/usage', { key: a.key })).body;
  const before = await usage();

  const r = await schema(a.key, conn);
  t.equal(r.status, 200, r.text);
  t.equal(r.body.connection_id, conn);
  t.equal(r.body.target_id, 'demo-healthcare');
  t.same(r.body.tables.map((x) => x.name).sort(), ['encounters', 'patients'], 'claims, prior_authorizations, … are not listed');
  t.same(r.body.missing_tables, []);
  t.equal(r.body.truncated, false);
  const target = srv.svc.services.catalogue.target('demo-healthcare');
  const def = target?.dataset?.tables.find((x) => x.name === 'encounters');
  const enc = byName(r.body)['encounters'];
  t.same(
    enc?.columns.map((c) => c.name),
    def?.columns.map((c) => c.name),
    'every column of the table, in order',
  );
  t.same(enc?.columns.find((c) => c.name === 'period_start'), { name: 'period_start', type: 'timestamp with time zone', nullable: false }, 'timestamptz is spelled out');
  const nullableColumn = def?.columns.find((c) => c.notNull === false);
  if (nullableColumn) t.equal(enc?.columns.find((c) => c.name === nullableColumn.name)?.nullable, true, `${nullableColumn.name} may hold null`);
  t.notOk('row_estimate' in (enc ?? {}), 'no row estimate: periods restrict the rows');

  // the same table through the query path: the listing's columns are the ones a query gets
  const q = await api<{ columns: { name: string }[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT * FROM encounters LIMIT 0' } });
  t.same(q.body.columns.map((c) => c.name), enc?.columns.map((c) => c.name));

  const after = await usage();
  t.equal(after.queries, before.queries + 1, 'only the query is counted, the listing is not billed');
  t.equal(after.trial.queries_left, before.trial.queries_left - 1);

  const evs = await events(a.key, conn);
  const ev = evs.find((e) => e.id === r.body.audit_event_id);
  t.ok(ev, 'the audit_event_id is in the chain');
  t.equal(ev?.type, 'schema');
  t.equal(ev?.outcome, 'ok');
  t.same(ev?.tables?.slice().sort(), ['encounters', 'patients']);
  const connRow = await api<{ queries: number; audit_events: number }>(srv.url, 'GET', `/v1/connections/${conn}`, { key: a.key });
  t.equal(connRow.body.queries, 1, 'the listing is not counted as a query of the connection');
  t.equal(connRow.body.audit_events, 2);

  const v = await api<{ verified: boolean; events_checked: number }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key });
  t.same([v.body.verified, v.body.events_checked], [true, 2], 'the chain verifies on the server');
  const genesis = (await api<{ audit_genesis_hash: string }>(srv.url, 'GET', `/v1/connections/${conn}`, { key: a.key })).body.audit_genesis_hash;
  const jsonl = await api(srv.url, 'GET', `/v1/connections/${conn}/audit?format=jsonl`, { key: a.key });
  const offline = verifyExport(jsonl.text, { link: genesis });
  t.same([offline.verified, offline.events_checked, offline.broken_at], [true, 2, null], 'the export verifies offline with the published algorithm');
});

t.test('the listing’s event is appended only while the connection may be answered (under its row lock)', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const store = srv.svc.services.store;
  const append = () => appendIfAnswerable(store, { orgId: a.orgId, connectionId: conn, check: { keyId: undefined, relayId: undefined }, event: new PendingEvent(conn, { type: 'schema', outcome: 'ok' }) });
  t.equal((await append()).outcome, 'ok');
  t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/revoke`, { key: a.key })).status, 200);
  t.equal((await append()).outcome, 'revoked', 'a listing that finishes after the revocation is not appended as answered');
  t.same((await events(a.key, conn)).map((e) => e.type), ['schema', 'connection.revoked']);
});

t.test('declared in the served OpenAPI document with its exact success body and its errors', async (t) => {
  type Op = { responses: Record<string, { content?: Record<string, { schema: Record<string, unknown> }> }> };
  const doc = (await api<{ paths: Record<string, Record<string, Op>> }>(srv.url, 'GET', '/openapi.json')).body;
  const op = doc.paths['/v1/connections/{connection_id}/schema']?.['get'];
  t.ok(op, 'GET /v1/connections/{connection_id}/schema is in the document');
  const ok = op?.responses['200']?.content?.['application/json']?.schema ?? {};
  t.same(ok['required'], ['connection_id', 'target_id', 'tables', 'missing_tables', 'truncated', 'audit_event_id']);
  t.equal(ok['additionalProperties'], false, 'exact: no undeclared field');
  const table = ((ok['properties'] as Record<string, { items: Record<string, unknown> }>)['tables']?.items ?? {}) as { required?: string[]; properties?: Record<string, { items?: { required?: string[] } }> };
  t.same(table.required, ['name', 'columns']);
  t.same(table.properties?.['columns']?.items?.required, ['name', 'type', 'nullable']);
  for (const status of ['400', '401', '404', '410', '429', '503', '504']) t.ok(op?.responses[status], `${status} is declared`);
});

t.test('API target: the spec’s columns of the scoped tables', async (t) => {
  const a = await agentWith('stripe', 'rk_test_SchemaListing0123456789');
  const conn = await openConnection(srv.url, a.key, 'stripe', ['read:charges']);
  const r = await schema(a.key, conn);
  t.equal(r.status, 200, r.text);
  t.same(r.body.tables.map((x) => x.name), ['charges']);
  const cols = Object.fromEntries(r.body.tables[0]?.columns.map((c) => [c.name, c]) ?? []);
  t.same(cols['created'], { name: 'created', type: 'timestamp with time zone', nullable: true });
  t.equal(cols['paid']?.type, 'boolean');
  t.equal(cols['metadata']?.type, 'jsonb');
});

t.test('refused: unknown, another organization’s, revoked and expired connections', async (t) => {
  const a = await signupAgent(srv.url);
  const other = await signupAgent(srv.url, 'Other Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);

  const unknown = await schema(a.key, 'conn_doesnotexist');
  t.equal(unknown.status, 404);
  t.equal(unknown.body.error?.code, 'not_found');
  const foreign = await schema(other.key, conn);
  t.equal(foreign.status, 404, 'another organization’s connection is not found, never forbidden');
  t.equal(foreign.body.error?.code, 'not_found');
  t.equal((await api(srv.url, 'GET', `/v1/connections/${conn}/schema`)).status, 401, 'the agent key is required');

  t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/revoke`, { key: a.key })).status, 200);
  const revoked = await schema(a.key, conn);
  t.equal(revoked.status, 410, revoked.text);
  t.equal(revoked.body.error?.code, 'connection_revoked');
  t.notOk(revoked.body.tables, 'nothing is listed');
  const evs = await events(a.key, conn);
  t.same(
    evs.map((e) => [e.type, e.outcome ?? null, e.error_code ?? null]),
    [
      ['connection.revoked', null, null],
      ['schema', 'refused', 'connection_revoked'],
    ],
    'the refusal is audited after the revocation',
  );
  t.equal(revoked.body.error?.details?.['audit_event_id'], evs[1]?.id);
  t.equal((await api<{ verified: boolean }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key })).body.verified, true);

  const short = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients'], { ttl_seconds: 1 });
  await new Promise((r) => setTimeout(r, 1100));
  const expired = await schema(a.key, short);
  t.equal(expired.status, 410, expired.text);
  t.equal(expired.body.error?.code, 'connection_expired');
});

t.test('postgres: the catalog of the scoped tables, one table however it is named, readable types, row estimates', async (t) => {
  const a = await agentWith('postgres', withSslmode(db.url));
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:orders', 'read:public.orders', 'read:reports.daily', 'read:nope']);
  const r = await schema(a.key, conn);
  t.equal(r.status, 200, r.text);
  t.same(r.body.tables.map((x) => x.name), ['public.orders', 'reports.daily'], 'orders and public.orders are one table; secrets is not scoped');
  t.same(r.body.missing_tables, ['public.nope'], 'a scoped table that does not exist is named');
  const orders = byName(r.body)['public.orders'];
  t.same(orders?.columns, [
    { name: 'id', type: 'integer', nullable: false },
    { name: 'tenant_id', type: 'integer', nullable: false },
    { name: 'placed_at', type: 'timestamp with time zone', nullable: false },
    { name: 'note', type: 'character varying(255)', nullable: true },
  ]);
  t.equal(orders?.row_estimate, 300, 'reltuples after ANALYZE');
  const daily = byName(r.body)['reports.daily'];
  t.same(daily?.columns, [
    { name: 'day', type: 'date', nullable: false },
    { name: 'n', type: 'bigint', nullable: true },
    { name: 'Odd Name', type: 'text', nullable: true },
  ]);
  t.notOk('row_estimate' in (daily ?? {}), 'never analyzed: no estimate rather than -1');

  // a filter: scope restricts rows: the table's estimate (of every row) is not given
  const filtered = await openConnection(srv.url, a.key, 'postgres', ['read:orders', 'filter:public.orders.tenant_id=7']);
  const f = await schema(a.key, filtered);
  t.equal(f.status, 200, f.text);
  t.same(f.body.tables.map((x) => x.name), ['public.orders']);
  t.notOk('row_estimate' in (f.body.tables[0] ?? {}));

  const evs = await events(a.key, conn);
  t.same([evs[0]?.type, evs[0]?.outcome, evs[0]?.tables, evs[0]?.missing_tables], ['schema', 'ok', ['public.orders', 'reports.daily'], ['public.nope']]);

  // a connection whose stored scopes name a catalog (as before creation refused them) lists nothing of it
  await srv.svc.services.store.query('UPDATE connections SET scopes = $1 WHERE id = $2', [JSON.stringify(['read:orders', 'read:pg_catalog.pg_authid']), filtered]);
  const forged = await schema(a.key, filtered);
  t.not(forged.status, 200, forged.text);
  t.notMatch(forged.text, /rolpassword/);
  t.equal((await api<{ verified: boolean }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key })).body.verified, true);
});

t.test('postgres: only the columns the credential’s role may select (real PostgreSQL)', async (t) => {
  if (db.kind !== 'postgres') {
    t.skip('roles and column privileges need a real PostgreSQL (PGlite fallback in use)', () => undefined);
    return;
  }
  const u = new URL(withSslmode(db.url));
  u.username = ROLE;
  u.password = 'reader-pw';
  const a = await agentWith('postgres', u.toString());
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:orders', 'read:secrets', 'read:locked.vault']);
  const r = await schema(a.key, conn);
  t.equal(r.status, 200, r.text);
  t.same(r.body.tables, [{ name: 'public.orders', columns: [{ name: 'id', type: 'integer', nullable: false }, { name: 'note', type: 'character varying(255)', nullable: true }], row_estimate: 300 }]);
  t.same(r.body.missing_tables, ['public.secrets', 'locked.vault'], 'a table the role cannot read is not listed, nor one in a schema it may not use');
  // what the listing leaves out is what a query is refused
  const q = await api<{ error?: { message: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT * FROM locked.vault' } });
  t.equal(q.status, 403, q.text);
  t.match(q.body.error?.message, /permission denied for schema locked/);
});

t.test('postgres: a listing cut by the byte cap lists only whole tables and calls no unread table missing', async (t) => {
  // the same database through a control plane whose responses hold at most 800 bytes of rows: the
  // catalog answer (one row per column) is cut inside the scoped tables
  const small = await smallServer();
  const scopes = ['read:orders', 'read:reports.daily', 'read:secrets', 'read:nope'];
  const whole = async (url: string): Promise<SchemaBody> => {
    const a = await signupAgent(url);
    const reg = await api(url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: withSslmode(db.url) } });
    t.equal(reg.status, 201, reg.text);
    const conn = await openConnection(url, a.key, 'postgres', scopes);
    const r = await api<SchemaBody>(url, 'GET', `/v1/connections/${conn}/schema`, { key: a.key });
    t.equal(r.status, 200, r.text);
    return r.body;
  };
  const full = await whole(srv.url);
  t.equal(full.truncated, false);
  t.same(full.missing_tables, ['public.nope']);
  const cut = await whole(small.url);
  t.equal(cut.truncated, true, 'the catalog answer was cut');
  const complete = byName(full);
  for (const table of cut.tables) t.same(table.columns, complete[table.name]?.columns, `${table.name} is listed with every column or not at all`);
  t.ok(cut.tables.length < full.tables.length, `fewer tables listed (${cut.tables.length} of ${full.tables.length})`);
  t.same(cut.missing_tables, [], 'no table is called missing: the ones after the cut were not read');
});

t.test('postgres: a database that cannot be reached is 503, audited', async (t) => {
  const a = await agentWith('postgres', 'postgres://nobody:pw@127.0.0.1:1/none?sslmode=disable');
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:orders']);
  const r = await schema(a.key, conn);
  t.equal(r.status, 503, r.text);
  t.equal(r.body.error?.code, 'service_unavailable');
  const evs = await events(a.key, conn);
  t.same([evs[0]?.type, evs[0]?.outcome, evs[0]?.error_code], ['schema', 'error', 'service_unavailable']);
});

t.test('postgres-relay: the catalog through a real svc-relay; 503 relay_unavailable once it is gone', async (t) => {
  const a = await signupAgent(srv.url);
  const relay = await startRelay(srv, a.key, db.url, { name: 'schema-db' });
  let closed = false;
  t.teardown(async () => {
    if (!closed) await relay.close();
  });
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relay.relayId}`, 'read:orders', 'read:reports.daily', 'filter:orders.tenant_id=3']);
  const r = await schema(a.key, conn);
  t.equal(r.status, 200, r.text);
  t.same(r.body.tables.map((x) => x.name), ['public.orders', 'reports.daily']);
  t.same(
    byName(r.body)['public.orders']?.columns.map((c) => `${c.name} ${c.type}${c.nullable ? '' : ' not null'}`),
    ['id integer not null', 'tenant_id integer not null', 'placed_at timestamp with time zone not null', 'note character varying(255)'],
  );
  t.notOk('row_estimate' in (byName(r.body)['public.orders'] ?? {}), 'filtered: no estimate');
  t.same(r.body.missing_tables, []);

  await relay.close();
  closed = true;
  let gone = await schema(a.key, conn);
  for (let i = 0; i < 50 && gone.status === 200; i++) {
    await new Promise((res) => setTimeout(res, 100));
    gone = await schema(a.key, conn);
  }
  t.equal(gone.status, 503, gone.text);
  t.equal(gone.body.error?.code, 'relay_unavailable');
  const evs = await events(a.key, conn);
  const last = evs[evs.length - 1];
  t.same([last?.type, last?.outcome, last?.error_code], ['schema', 'error', 'relay_unavailable']);
  t.equal((await api<{ verified: boolean }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key: a.key })).body.verified, true);
});

t.test('mysql: information_schema of the scoped tables (MariaDB)', async (t) => {
  if (!(await mariadbAnswers())) {
    t.skip('no MariaDB/MySQL answers on 127.0.0.1:3306 (root, no password)', () => undefined);
    return;
  }
  const name = `svc_schema_my_${randomBytes(5).toString('hex')}`;
  const other = `${name}_other`;
  const reader = `svc_srd_${randomBytes(4).toString('hex')}`;
  const admin = await mysql.createConnection({ ...MARIADB_ADMIN, multipleStatements: true });
  t.teardown(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name}; DROP DATABASE IF EXISTS ${other}; DROP USER IF EXISTS '${reader}'@'%'`);
    await admin.end();
  });
  await admin.query(`CREATE DATABASE ${name}; CREATE DATABASE ${other}`);
  await admin.query(`CREATE TABLE ${name}.orders (id INT PRIMARY KEY, note VARCHAR(255), total DECIMAL(10,2) NOT NULL, placed_at DATETIME NULL) ENGINE=InnoDB`);
  await admin.query(`INSERT INTO ${name}.orders VALUES ${Array.from({ length: 50 }, (_, i) => `(${i + 1}, 'n', 1.5, NULL)`).join(',')}; ANALYZE TABLE ${name}.orders`);
  await admin.query(`CREATE TABLE ${other}.items (sku CHAR(8) NOT NULL, qty SMALLINT)`);
  await admin.query(`CREATE TABLE ${name}.secrets (id INT)`);
  await admin.query(`CREATE USER '${reader}'@'%' IDENTIFIED BY 'Reader-Pw-77'; GRANT SELECT (id, note) ON ${name}.orders TO '${reader}'@'%'`);

  const a = await agentWith('mysql', `mysql://root@127.0.0.1:3306/${name}`);
  const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders', `read:${name}.orders`, `read:${other}.items`, 'read:nope']);
  const r = await schema(a.key, conn);
  t.equal(r.status, 200, r.text);
  t.same(r.body.tables.map((x) => x.name), ['orders', `${other}.items`], 'orders and <database>.orders are one table; secrets is not scoped');
  t.same(r.body.missing_tables, ['nope']);
  const orders = byName(r.body)['orders'];
  t.match(orders?.columns[0], { name: 'id', type: /^int/, nullable: false });
  t.same(orders?.columns.slice(1), [
    { name: 'note', type: 'varchar(255)', nullable: true },
    { name: 'total', type: 'decimal(10,2)', nullable: false },
    { name: 'placed_at', type: 'datetime', nullable: true },
  ]);
  t.type(orders?.row_estimate, 'number', 'information_schema.tables.table_rows');
  const items = byName(r.body)[`${other}.items`]?.columns;
  t.same(items?.[0], { name: 'sku', type: 'char(8)', nullable: false });
  t.match(items?.[1], { name: 'qty', type: /^smallint/, nullable: true }, 'smallint(6) on MariaDB, smallint on MySQL 8');

  // the credential's user sees only the columns it was granted
  const ra = await agentWith('mysql', `mysql://${reader}:Reader-Pw-77@127.0.0.1:3306/${name}`);
  const rc = await openConnection(srv.url, ra.key, 'mysql', ['read:orders', 'read:secrets']);
  const rr = await schema(ra.key, rc);
  t.equal(rr.status, 200, rr.text);
  t.same(rr.body.tables.map((x) => [x.name, x.columns.map((c) => c.name)]), [['orders', ['id', 'note']]]);
  t.same(rr.body.missing_tables, ['secrets']);

  // a credential whose database is a system schema: an unqualified scope never lists the catalog
  const sa = await agentWith('mysql', 'mysql://root@127.0.0.1:3306/mysql');
  const sc = await openConnection(srv.url, sa.key, 'mysql', ['read:user', 'read:db']);
  const sr = await schema(sa.key, sc);
  t.equal(sr.status, 200, sr.text);
  t.same(sr.body.tables, [], 'mysql.user is never listed');
  t.same(sr.body.missing_tables, ['user', 'db']);
  const evs = await events(a.key, conn);
  t.same([evs[0]?.type, evs[0]?.outcome], ['schema', 'ok']);

  // cut by the byte cap: only whole tables, and no unread table called missing
  const cutServer = await smallServer();
  const ca = await signupAgent(cutServer.url);
  t.equal((await api(cutServer.url, 'POST', '/v1/connections/credentials', { key: ca.key, body: { connector_kind: 'mysql', secret: `mysql://root@127.0.0.1:3306/${name}` } })).status, 201);
  const cconn = await openConnection(cutServer.url, ca.key, 'mysql', ['read:orders', `read:${other}.items`, 'read:secrets']);
  const cut = await api<SchemaBody>(cutServer.url, 'GET', `/v1/connections/${cconn}/schema`, { key: ca.key });
  t.equal(cut.status, 200, cut.text);
  t.equal(cut.body.truncated, true, 'the catalog answer was cut');
  const whole = Object.fromEntries(r.body.tables.map((x) => [x.name, x.columns.length]));
  for (const table of cut.body.tables) t.equal(table.columns.length, whole[table.name] ?? 1, `${table.name} is listed with every column or not at all`);
  t.same(cut.body.missing_tables, [], 'no table is called missing: the ones after the cut were not read');

  // a case-sensitive server (lower_case_table_names = 0) holds orders and Orders as two tables:
  // each is listed with its own columns, once each
  const [[caseRow]] = (await admin.query('SELECT @@lower_case_table_names AS n')) as unknown as [[{ n: number | string }]];
  if (Number(caseRow.n) !== 0) {
    t.skip(`two tables differing only in case need lower_case_table_names = 0 (this server: ${caseRow.n})`, () => undefined);
    return;
  }
  await admin.query(`CREATE TABLE ${name}.Orders (x INT NOT NULL)`);
  const cc = await openConnection(srv.url, a.key, 'mysql', ['read:orders', 'read:Orders']);
  const cr = await schema(a.key, cc);
  t.equal(cr.status, 200, cr.text);
  t.same(
    cr.body.tables.map((x) => [x.name, x.columns.map((c) => c.name)]),
    [
      ['orders', ['id', 'note', 'total', 'placed_at']],
      ['Orders', ['x']],
    ],
    'each table its own columns, none twice',
  );
});
