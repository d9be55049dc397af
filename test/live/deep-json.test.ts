/**
 * A JSON value nested thousands of levels deep on the `postgres` live target (found by review):
 * building the row overflowed the stack inside the driver's row callback, which read it as a
 * broken connection: `503 service_unavailable`, "the connection to the postgres database was lost
 * during the statement; retry", for a statement that fails the same way every time (the relay
 * answered the same value 400 value_too_deep). Now the same 400 as through a relay, charged (it
 * ran), and the next statement on the connection runs. The embedded demo engine answered such
 * a value 500 internal_error (arrays) or lost its worker to it (objects: 504, then 429 for the
 * sender while a new one started).
 */
import t from 'tap';
import pg from 'pg';
import { customerDatabase } from '../helpers/customer-db.js';
import { api, openConnection, realPostgresAvailable, signupAgent, startServer } from '../helpers/server.js';

type Answer = { rows?: Record<string, unknown>[]; error?: { code: string; details?: Record<string, unknown> } };

t.test('postgres: a deeply nested JSON value is the statement’s 400 value_too_deep, not a lost connection', async (t) => {
  if (!(await realPostgresAvailable())) return t.skip('no PostgreSQL server at TEST_DATABASE_URL', () => undefined);
  const customer = await customerDatabase('rev_live_deep_json');
  const srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
  t.teardown(async () => {
    await srv.close();
    await customer.drop();
  });
  if (customer.kind !== 'postgres') return t.skip('the customer database is not a real PostgreSQL', () => undefined);
  const c = new pg.Client({ connectionString: customer.url });
  await c.connect();
  await c.query('CREATE TABLE orders (id int)');
  await c.end();
  const a = await signupAgent(srv.url);
  const cred = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: `${customer.url}?sslmode=disable` } });
  t.equal(cred.status, 201, cred.text);
  const conn = await openConnection(srv.url, a.key, 'postgres', ['read:public.orders']);
  const q = (sql: string) => api<Answer>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });

  const shallow = await q(`SELECT (repeat('[', 100) || repeat(']', 100))::json AS j`);
  t.equal(shallow.status, 200, 'a value 100 levels deep is answered');
  for (const [what, sql] of [
    ['array', `SELECT (repeat('[', 3000) || repeat(']', 3000))::json AS j`],
    ['object', `SELECT (repeat('{"a":', 12000) || '1' || repeat('}', 12000))::jsonb AS j`],
  ] as const) {
    const r = await q(sql);
    t.equal(r.status, 400, `${what}: ${r.text.slice(0, 300)}`);
    t.equal(r.body.error?.code, 'invalid_sql');
    t.equal(r.body.error?.details?.['reason'], 'value_too_deep', `${what}: the reason says what to change`);
    t.ok(typeof r.body.error?.details?.['cost_cents'] === 'number', `${what}: it ran, so it is charged the query price`);
    const after = await q('SELECT count(*) AS n FROM orders');
    t.equal(after.status, 200, `${what}: the connection serves on: ${after.text.slice(0, 200)}`);
  }
});

t.test('demo (embedded engine): a deeply nested JSON value is the statement’s 400 value_too_deep', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  if ((await srv.svc.demoReady).kind !== 'embedded') return t.skip('the demo engine is not the embedded one', () => undefined);
  const q = (sql: string) => api<Answer>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
  for (const [what, sql] of [
    ['array', `SELECT (repeat('[', 3000) || repeat(']', 3000))::json AS j FROM patients LIMIT 1`],
    ['object', `SELECT (repeat('{"a":', 3000) || '1' || repeat('}', 3000))::jsonb AS j FROM patients LIMIT 1`],
  ] as const) {
    const r = await q(sql);
    t.equal(r.status, 400, `${what}: ${r.text.slice(0, 300)}`);
    t.equal(r.body.error?.details?.['reason'], 'value_too_deep', `${what}: the reason says what to change`);
    t.ok(typeof r.body.error?.details?.['cost_cents'] === 'number', `${what}: it ran, so it is charged the query price`);
    const after = await q('SELECT count(*) AS n FROM patients');
    t.equal(after.status, 200, `${what}: the engine serves on: ${after.text.slice(0, 200)}`);
  }
});
