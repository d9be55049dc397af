/**
 * The relay tells its operator whether its database answers (relay-agent/executor.ts
 * `onDatabaseState`, `probe()`; `svc-relay run` logs it). Found in a walk-through: a relay started
 * with a wrong database URL logged "tunnel connected", its /healthz said ok, and only the agents
 * saw `relay_unavailable` ("the relay cannot reach its database").
 */
import { once } from 'node:events';
import pg from 'pg';
import t from 'tap';
import { Session, memoryTransportPair, type ProtocolError } from '../../protocol/index.js';
import { createExecutor } from '../../relay-agent/executor.js';
import { customerDatabase } from '../helpers/customer-db.js';
import { tcpServer } from '../helpers/tcp.js';

type State = { reachable: true } | { reachable: false; message: string };

t.test('an unreachable database is reported once, at the probe and at a query', async (t) => {
  const states: State[] = [];
  const exec = createExecutor({ databaseUrl: 'postgres://nobody@127.0.0.1:1/none', onDatabaseState: (s) => states.push(s) });
  t.teardown(() => exec.close());
  t.match(await exec.probe(), /the database is unavailable: .*ECONNREFUSED/);
  t.match(states, [{ reachable: false, message: /ECONNREFUSED/ }], 'reported');
  const [a, b] = memoryTransportPair();
  const server = new Session(a, { role: 'server', pingIntervalMs: 0 });
  const relay = new Session(b, { role: 'client', pingIntervalMs: 0 });
  relay.onStream(exec.handle);
  await server.ready;
  const err = (await server.openStream({ statement: 'SELECT 1' }).collect().catch((e: unknown) => e)) as ProtocolError;
  t.equal(err.code, 'RELAY_ERR_DATABASE_UNAVAILABLE');
  t.equal(await exec.probe() !== null, true);
  t.equal(states.length, 1, 'not again while it stays unreachable');
  server.close();
  relay.close();
});

t.test('a reachable database is reported once', async (t) => {
  const cdb = await customerDatabase('svc_relay_dbstate');
  const states: State[] = [];
  const exec = createExecutor({ databaseUrl: cdb.url, onDatabaseState: (s) => states.push(s) });
  t.teardown(async () => {
    await exec.close();
    await cdb.drop();
  });
  t.equal(await exec.probe(), null);
  t.equal(await exec.probe(), null);
  t.same(states, [{ reachable: true }]);
});

t.test('close() does not wait for a probe the database never answers', { timeout: 20_000 }, async (t) => {
  // walk-through: a database that accepts the connection and never answers (a firewall, a hung
  // server) held the probe `svc-relay run` starts with; at SIGTERM (or a permanent refusal) the
  // relay then waited in close() for the pool's connection timeout, the longest a statement may
  // run (--statement-timeout-ms, up to a day), before it exited
  const { server: silent, port } = await tcpServer(t);
  const states: State[] = [];
  const exec = createExecutor({ databaseUrl: `postgres://nobody:pw@127.0.0.1:${port}/none`, limits: { maxTimeoutMs: 86_400_000 }, onDatabaseState: (s) => states.push(s) });
  const connected = once(silent, 'connection');
  const probe = exec.probe();
  await connected;
  await exec.close();
  t.type(await probe, 'string', 'the probe ends with close');
  t.same(states, [], 'and reports nothing about the database: the relay is stopping');
});

t.test('a connection attempt that fails after a later one got an answer is not reported', async (t) => {
  // found by review: a probe held by a database that did not answer yet failed at its timeout,
  // after a later connection had got an answer, and the log's last word was "cannot reach the
  // database" while it answered. A minimal server: the first connection gets no answer, the next
  // ones are accepted (AuthenticationOk, ReadyForQuery).
  const { server, port, sockets } = await tcpServer(t, (s, i) => {
    if (i > 0) s.once('data', () => s.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0, 0x5a, 0, 0, 0, 5, 0x49])));
  });
  const states: State[] = [];
  const exec = createExecutor({ databaseUrl: `postgres://nobody:pw@127.0.0.1:${port}/none`, onDatabaseState: (s) => states.push(s) });
  t.teardown(() => exec.close());
  const first = once(server, 'connection');
  const silent = exec.probe();
  await first;
  t.equal(await exec.probe(), null, 'a later probe gets an answer');
  sockets[0]!.destroy(); // the first attempt fails now
  t.type(await silent, 'string', 'the first one failed');
  t.same(states, [{ reachable: true }], 'and is not reported: the database answers');
});

t.test('a statement the control plane cancels does not make the database unreachable', async (t) => {
  // found by review (issue #14): every statement stopped by a revocation, a client that left or a
  // deadline on the control plane's side logged "cannot reach the database (… cancelled by the
  // peer: revoked)" and then "the database answers": the cancellation taken for a database failure
  const cdb = await customerDatabase('svc_relay_dbstate_cancel');
  if (!cdb.cancelAtDatabase) {
    // a statement on the embedded stand-in runs on this process's thread and cannot be stopped:
    // the long statement below would hold the test for good
    await cdb.drop();
    t.skip('needs a real PostgreSQL: nothing can cancel a running statement on the embedded stand-in', () => undefined);
    return;
  }
  const states: State[] = [];
  const exec = createExecutor({ databaseUrl: cdb.url, onDatabaseState: (s) => states.push(s) });
  const watch = new pg.Client({ connectionString: cdb.url });
  await watch.connect();
  t.teardown(async () => {
    await watch.end();
    await exec.close();
    await cdb.drop();
  });
  const [a, b] = memoryTransportPair();
  const server = new Session(a, { role: 'server', pingIntervalMs: 0 });
  const relay = new Session(b, { role: 'client', pingIntervalMs: 0 });
  t.teardown(() => {
    server.close();
    relay.close();
  });
  relay.onStream(exec.handle);
  await server.ready;
  const stream = server.openStream({ statement: 'SELECT count(*) FROM generate_series(1, 2000000000) g', timeoutMs: 60_000 });
  const outcome = stream.collect().catch((e: unknown) => e);
  for (let i = 0; i < 400; i++) {
    const r = await watch.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE '%generate_series%' AND pid <> pg_backend_pid()");
    if (r.rows.length > 0) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  stream.cancel('revoked');
  t.ok(await outcome, 'the statement ended');
  for (let i = 0; i < 400 && exec.inflight > 0; i++) await new Promise((r) => setTimeout(r, 25));
  t.equal(exec.cancels, 1, 'cancelled at the database');
  t.same(states, [{ reachable: true }], 'and the database is not reported unreachable');
});
