/**
 * A relay query that waits for one of the relay's pool connections until its deadline never ran:
 * the relay says so (RELAY_ERR_POOL_BUSY, retryable) before the stream's deadline, which the
 * control plane would answer as a statement cancelled at the database and charge (found by an
 * outside review: 24 statements of 3 s at once on a pool of 4, 20 charged, 16 of them never sent).
 */
import t from 'tap';
import { ProtocolError } from '../../protocol/index.js';
import { poolWaitMs, POOL_WAIT_MARGIN_MS } from '../../relay-agent/executor.js';
import { relayFailure } from '../../control-plane/query/relay.js';
import { ranAtSource } from '../../control-plane/query/engine.js';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import type { TapTest } from '../helpers/tap.js';
import { executorSession } from '../helpers/executor-session.js';

/**
 * A customer database on a real PostgreSQL, or undefined (skipped): PGlite runs its statements on
 * this process's thread, where a pg_sleep holds every timer, the relay's bound on the wait too.
 */
async function realPostgres(t: TapTest, prefix: string): Promise<CustomerDatabase | undefined> {
  const cdb = await customerDatabase(prefix);
  t.teardown(() => cdb.drop());
  if (cdb.kind === 'postgres') return cdb;
  t.skip('needs a real PostgreSQL: a statement on the embedded stand-in holds this process, timers included', () => undefined);
  return undefined;
}

t.test('a query waits for a pool connection until just before its deadline', async (t) => {
  t.equal(poolWaitMs(30_000), 30_000 - POOL_WAIT_MARGIN_MS);
  t.equal(poolWaitMs(1_000), 900, 'a tenth of a short deadline');
  t.equal(poolWaitMs(5), 5);
  t.equal(poolWaitMs(1), 1);
});

t.test("RELAY_ERR_POOL_BUSY is the agent's retryable 503, not charged", async (t) => {
  const api = relayFailure(new ProtocolError('RELAY_ERR_POOL_BUSY', "all 4 of the relay's connections to its database stayed busy for 29750 ms", { remote: true, retryable: true }), 'rly_x', 30_000);
  t.equal(api.status, 503);
  t.equal(api.code, 'service_unavailable');
  t.equal(api.details?.['reason'], 'relay_pool_busy');
  t.equal(api.headers?.['Retry-After'], '1');
  t.notOk(ranAtSource(api), 'nothing ran: given back, not charged');
});

t.test('a query behind a busy pool is answered RELAY_ERR_POOL_BUSY before its deadline', async (t) => {
  const cdb = await realPostgres(t, 'svc_relay_pool');
  if (!cdb) return;
  const { server, exec } = executorSession(t, { databaseUrl: cdb.url, poolSize: 1, applicationName: 'svc-relay-test' });
  await server.ready;
  // the pool's one connection, held by a statement that outlasts the next one's deadline
  const holder = server.openStream({ statement: 'SELECT pg_sleep(1.5)', timeoutMs: 20_000 }).collect();
  while (exec.inflight < 1) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 100));
  const err = (await server.openStream({ statement: 'SELECT 1', timeoutMs: 600 }).collect().then(() => undefined, (e: unknown) => e)) as ProtocolError | undefined;
  t.ok(err instanceof ProtocolError, String(err));
  t.equal(err?.code, 'RELAY_ERR_POOL_BUSY', 'the relay says nothing ran, not the deadline');
  t.equal(err?.retryable, true);
  t.match(err?.message, /all 1 of the relay's connections to its database stayed busy for 540 ms/);
  const held = await holder;
  t.equal(held.rows.length, 1, 'the statement holding the connection ran to its end');
  // the connection the given-up query was handed late went back to the pool
  const next = await server.openStream({ statement: 'SELECT 2 AS two', timeoutMs: 5_000 }).collect();
  t.same(next.rows, [[2]]);
});

t.test('a query cancelled while it waits for a pool connection stops waiting at once', async (t) => {
  // review: it waited for the bound (up to its deadline) and, with the pool not full, then said
  // the database was unreachable
  const cdb = await realPostgres(t, 'svc_relay_pool_cancel');
  if (!cdb) return;
  const states: unknown[] = [];
  const { server, exec } = executorSession(t, { databaseUrl: cdb.url, poolSize: 1, applicationName: 'svc-relay-test', onDatabaseState: (s) => states.push(s) });
  await server.ready;
  let holderDone = false;
  const holder = server.openStream({ statement: 'SELECT pg_sleep(1.5)', timeoutMs: 20_000 }).collect().finally(() => (holderDone = true));
  while (exec.inflight < 1) await new Promise((r) => setTimeout(r, 10));
  const waiting = server.openStream({ statement: 'SELECT 1', timeoutMs: 20_000 });
  const answer = waiting.collect().then(() => undefined, (e: unknown) => e);
  while (exec.inflight < 2) await new Promise((r) => setTimeout(r, 10));
  waiting.cancel('the agent left');
  await answer;
  while (exec.inflight > 1 && !holderDone) await new Promise((r) => setTimeout(r, 10));
  t.notOk(holderDone, 'it stopped waiting while the connection was still held');
  t.equal(exec.inflight, 1);
  await holder;
  t.notOk(states.some((s) => (s as { reachable?: boolean }).reachable === false), 'the database is not reported unreachable');
});
