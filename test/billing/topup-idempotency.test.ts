/**
 * POST /v1/agent/topup with an Idempotency-Key: an agent whose answer was lost (a timeout, a
 * dropped connection) sends the same top-up again and is credited once. The same key with the
 * same body within a day answers the first answer again (`Idempotent-Replayed: true`); with
 * another body it is `409 conflict`; requests with one key at once credit once; a top-up refused
 * (the wallet's ceiling) leaves no key behind; keys are per organization. On the embedded store,
 * and on a PostgreSQL store where one answers (its transactions run at once).
 */
import t, { type Test } from 'tap';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { hostedMcpClient } from '../helpers/mcp.js';
import { api, freshDatabase, realPostgresAvailable, signupAgent, startServer, type TestServer } from '../helpers/server.js';

interface Answer {
  credited_cents: number;
  wallet_balance_cents: number;
  auto_reload: { threshold_cents: number; amount_cents: number } | null;
  error?: { code: string; details?: Record<string, unknown> };
}

const topup = (srv: TestServer, key: string, body: Record<string, unknown>, idem?: string) =>
  api<Answer>(srv.url, 'POST', '/v1/agent/topup', { key, body, ...(idem !== undefined ? { headers: { 'idempotency-key': idem } } : {}) });
const balance = async (srv: TestServer, key: string): Promise<number> => (await api<{ wallet_balance_cents: number }>(srv.url, 'GET', '/v1/agent/account/usage', { key })).body.wallet_balance_cents;

async function cases(t: Test, srv: TestServer): Promise<void> {
  const a = await signupAgent(srv.url);
  const first = await topup(srv, a.key, { amount_cents: 500 }, 'order-1');
  t.equal(first.status, 200, first.text);
  t.equal(first.headers.get('idempotent-replayed'), null, 'the first answer is not a replay');
  const again = await topup(srv, a.key, { amount_cents: 500 }, 'order-1');
  t.equal(again.status, 200);
  t.equal(again.headers.get('idempotent-replayed'), 'true');
  t.same(again.body, first.body, 'the first answer, again');
  t.equal(await balance(srv, a.key), 500, 'credited once');

  const other = await topup(srv, a.key, { amount_cents: 700 }, 'order-1');
  t.equal(other.status, 409, 'the same key with another body');
  t.equal(other.body.error?.code, 'conflict');
  t.equal(other.body.error?.details?.['reason'], 'idempotency_key_reused');
  t.equal(await balance(srv, a.key), 500, 'nothing credited');

  t.equal((await topup(srv, a.key, { amount_cents: 500 }, 'order-2')).status, 200, 'another key is another top-up');
  t.equal((await topup(srv, a.key, { amount_cents: 500 })).status, 200, 'no key: a top-up each time');
  t.equal(await balance(srv, a.key), 1500);

  // auto_reload is part of the request: the same key with a different auto_reload is refused
  const ar = { amount_cents: 0, auto_reload: { threshold_cents: 100, amount_cents: 500 } };
  t.equal((await topup(srv, a.key, ar, 'reload-1')).status, 200);
  t.equal((await topup(srv, a.key, { ...ar, auto_reload: null }, 'reload-1')).status, 409);
  t.same((await topup(srv, a.key, ar, 'reload-1')).body.auto_reload, { threshold_cents: 100, amount_cents: 500 });

  // at once: one credit, every answer the same
  const b = await signupAgent(srv.url);
  const many = await Promise.all(Array.from({ length: 12 }, () => topup(srv, b.key, { amount_cents: 300 }, 'burst')));
  t.same([...new Set(many.map((r) => r.status))], [200], 'every request answered 200');
  t.equal(many.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 11, 'eleven of them replays');
  t.same([...new Set(many.map((r) => r.body.wallet_balance_cents))], [300], 'all with the one answer');
  t.equal(await balance(srv, b.key), 300, 'credited once');

  // keys are per organization
  t.equal((await topup(srv, a.key, { amount_cents: 300 }, 'burst')).headers.get('idempotent-replayed'), null, "another organization's key is not this one's");

  // a refused top-up (over the wallet's ceiling) keeps no key: the same request is refused again, not replayed
  const c = await signupAgent(srv.url);
  const big = { amount_cents: 1_000_000 };
  for (let i = 0; i < 5; i++) t.equal((await topup(srv, c.key, big)).status, 200);
  const over = await topup(srv, c.key, big, 'too-much');
  t.equal(over.status, 400, over.text);
  t.equal((await topup(srv, c.key, big, 'too-much')).status, 400, 'refused again, not answered from the key');
  t.equal((await topup(srv, c.key, { amount_cents: 0, auto_reload: null }, 'too-much')).status, 200, 'and the key is free for another request');

  for (const bad of ['', 'x'.repeat(256), 'tab\there', 'é']) {
    const r = await topup(srv, a.key, { amount_cents: 500 }, bad);
    t.equal(r.status, 400, `Idempotency-Key ${JSON.stringify(bad).slice(0, 20)}: ${r.status}`);
  }
}

t.test('embedded store', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  await cases(t, srv);

  // the MCP tool takes the key as an argument (the SDK's own client, the hosted server)
  const a = await signupAgent(srv.url);
  const client = await hostedMcpClient(srv.url, a.key, 'svc-test-topup');
  t.teardown(() => client.close());
  for (let i = 0; i < 2; i++) {
    const r = (await client.callTool({ name: 'top_up_wallet', arguments: { amount_cents: 400, idempotency_key: 'mcp-order-1' } })) as CallToolResult;
    t.notOk(r.isError, JSON.stringify(r.content));
  }
  t.equal(await balance(srv, a.key), 400, 'top_up_wallet with idempotency_key twice: credited once');
});

const pgAnswers = await realPostgresAvailable();
t.test('PostgreSQL store', { skip: pgAnswers ? false : 'no PostgreSQL answers at TEST_DATABASE_URL' }, async (t) => {
  const db = await freshDatabase('svc_topup_idem');
  const srv = await startServer({ databaseUrl: db.url });
  t.teardown(async () => {
    await srv.close();
    await db.drop();
  });
  await cases(t, srv);
});
