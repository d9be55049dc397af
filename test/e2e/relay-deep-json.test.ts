/**
 * A JSON value nested thousands of levels deep through a real relay (found by review): the
 * control plane answered depth 3000 `503 relay_unavailable`, "the tunnel was lost during the
 * statement; retry" (its own row building overflowed the stack; the tunnel was fine), and at depth
 * 12000 svc-relay could not encode the value and reported `RELAY_ERR_DATABASE_UNAVAILABLE`, "the
 * relay cannot reach its database; retry shortly", while the database answered. Either way an
 * agent was told to retry a statement that fails the same way every time. Both are the
 * statement's answer: `400 invalid_sql`, `details.reason: "value_too_deep"`, charged the query
 * price (the statement ran), and the relay serves on.
 */
import t from 'tap';
import { customerDatabase } from '../helpers/customer-db.js';
import { startRelay } from '../helpers/relay.js';
import { api, openConnection, signupAgent, startServer } from '../helpers/server.js';

type Answer = { rows?: Record<string, unknown>[]; error?: { code: string; message: string; details?: Record<string, unknown> } };

t.test('a deeply nested JSON value through the relay is the statement’s error, not an unavailable relay', async (t) => {
  const customer = await customerDatabase('svc_relay_deep');
  t.comment(`customer database: ${customer.kind}`);
  const srv = await startServer();
  const a = await signupAgent(srv.url);
  const relay = await startRelay(srv, a.key, customer.url);
  t.teardown(async () => {
    await relay.close();
    await srv.close();
    await customer.drop();
  });
  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relay.relayId}`, 'read:orders']);
  const q = (sql: string) => api<Answer>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } });
  const nested = (depth: number) => `SELECT (repeat('[', ${depth}) || repeat(']', ${depth}))::json AS j`;

  const shallow = await q(nested(100));
  t.equal(shallow.status, 200, 'a value 100 levels deep is answered');
  let v: unknown = shallow.body.rows?.[0]?.['j'];
  let depth = 0;
  while (Array.isArray(v)) {
    depth++;
    v = v[0];
  }
  t.equal(depth, 100);

  // 3000: the relay sends it, the control plane must not build it; 12000: the relay cannot encode it
  for (const d of [3000, 12000]) {
    const r = await q(nested(d));
    t.equal(r.status, 400, `depth ${d}: ${r.text.slice(0, 300)}`);
    t.equal(r.body.error?.code, 'invalid_sql');
    // (the embedded stand-in for a customer database fails its own way on such values)
    if (customer.kind === 'postgres') {
      t.equal(r.body.error?.details?.['reason'], 'value_too_deep', `depth ${d}: the reason says what to change`);
      t.ok(typeof r.body.error?.details?.['cost_cents'] === 'number', `depth ${d}: it ran, so it is charged the query price`);
    }
    const after = await q('SELECT 1 AS one');
    t.equal(after.status, 200, `depth ${d}: the relay serves on: ${after.text.slice(0, 200)}`);
  }
});
