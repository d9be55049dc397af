import t, { type Test } from 'tap';
import pg from 'pg';
import { Session, memoryTransportPair } from '../../protocol/index.js';
import { createExecutor } from '../../relay-agent/executor.js';
import { customerDatabase as openShared, type CustomerDatabase } from '../../bench/customer-db.js';
import { customerDatabase } from '../helpers/customer-db.js';
import { realPostgresAvailable, TEST_DATABASE_URL } from '../helpers/server.js';

async function exercise(t: Test, db: CustomerDatabase): Promise<void> {
  t.match(db.url, /^postgres:\/\/postgres@127\.0\.0\.1:\d+\/\w+$/);
  t.ok(db.maxConnections >= 8, `room for a pool plus the cancel connection (${db.maxConnections})`);

  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  await client.query('CREATE TABLE cdb_t (id int PRIMARY KEY, name text)');
  await client.query("INSERT INTO cdb_t SELECT g, 'n' || g FROM generate_series(1, 1000) g");
  const one = await client.query<{ n: number; s: string }>('SELECT count(*)::int AS n, max(name) AS s FROM cdb_t WHERE id > $1', [990]);
  t.same(one.rows, [{ n: 10, s: 'n999' }]);
  await client.end();

  // a pool of several connections, parameterised statements of two shapes at once: each answer is its own
  const pool = new pg.Pool({ connectionString: db.url, max: 6 });
  const answers = await Promise.all(
    Array.from({ length: 60 }, (_, i) =>
      i % 2 ? pool.query<{ id: number; name: string }>('SELECT id, name FROM cdb_t WHERE id = $1', [i + 1]) : pool.query<{ id: number; name: string }>('SELECT name, id, $2::text AS tag FROM cdb_t WHERE id = $1', [i + 1, `t${i}`]),
    ),
  );
  answers.forEach((r, i) => {
    t.equal(r.rows[0]?.id, i + 1, `pool answer ${i}`);
    t.equal(r.rows[0]?.name, `n${i + 1}`);
  });
  const pids = await Promise.all(Array.from({ length: 3 }, async () => {
    const c = await pool.connect();
    try {
      return (await c.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one;
    } finally {
      c.release();
    }
  }));
  t.same(pids, [1, 1, 1], 'three pooled connections held at once');
  await pool.end();

  // the relay's executor (a pg.Pool plus a cancel connection) streams a result in many batches
  const [a, b] = memoryTransportPair();
  const server = new Session(a, { role: 'server', pingIntervalMs: 0 });
  const relay = new Session(b, { role: 'client', pingIntervalMs: 0 });
  const exec = createExecutor({ databaseUrl: db.url, poolSize: 4, limits: { fetchRows: 200 } });
  relay.onStream(exec.handle);
  try {
    await server.ready;
    let rows = 0;
    let sum = 0;
    let batches = 0;
    for await (const ev of server.openStream({ statement: 'SELECT c.id, c.name, g FROM public.cdb_t c CROSS JOIN generate_series(1, 5) g WHERE c.id <= $1', params: [1000] })) {
      if (ev.type !== 'rows') continue;
      batches++;
      for (const r of ev.rows) {
        rows++;
        sum += r[0] as number;
      }
    }
    t.equal(rows, 5000);
    t.equal(sum, 5 * (1000 * 1001) / 2);
    t.ok(batches >= 25, `streamed in ${batches} batches of at most 200 rows`);
    // several streams at once through the pool, each answer its own
    const many = await Promise.all(Array.from({ length: 12 }, (_, i) => server.openStream({ statement: 'SELECT name FROM public.cdb_t WHERE id = $1', params: [i + 1] }).collect()));
    t.same(many.map((r) => r.rows[0]?.[0]), Array.from({ length: 12 }, (_, i) => `n${i + 1}`));
    if (db.kind === 'postgres') {
      const err = await server.openStream({ statement: 'DELETE FROM public.cdb_t' }).collect().then(() => null, (e: unknown) => e as { code?: string });
      t.equal(err?.code, 'RELAY_ERR_READ_ONLY');
    } else {
      // the executor answers a failed query by opening a pg_cancel_backend connection (its abort
      // listener fires on its own q.fail) and waits for it before ROLLBACK; on one-backend PGlite
      // that connection queues behind the still-open transaction: a deadlock (see bench/customer-db.ts)
      t.skip('on PGlite: a failed query deadlocks the executor cleanup (cancel connection behind the open transaction)', () => undefined);
    }
  } finally {
    server.close();
    relay.close();
    await exec.close();
  }
}

t.test('PGlite over the wire (forced)', async (t) => {
  const db = await openShared('svc_cdb', { forcePglite: true });
  t.teardown(() => db.drop()); // idempotent
  t.match(db, { kind: 'pglite', concurrent: false, cancelAtDatabase: false });
  await exercise(t, db);
  await db.drop();
  const c = new pg.Client({ connectionString: db.url, connectionTimeoutMillis: 2000 });
  c.on('error', () => undefined);
  await t.rejects(c.connect(), 'the embedded server is gone after drop()');
});

t.test('SVC_TEST_FORCE_PGLITE=1 forces the fallback through the test helper', async (t) => {
  const before = process.env['SVC_TEST_FORCE_PGLITE'];
  process.env['SVC_TEST_FORCE_PGLITE'] = '1';
  try {
    const db = await customerDatabase('svc_cdb');
    t.equal(db.kind, 'pglite');
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    t.same((await c.query<{ v: string }>('SELECT version() AS v')).rows[0]?.v.includes('PostgreSQL'), true);
    await c.end();
    await db.drop();
  } finally {
    if (before === undefined) delete process.env['SVC_TEST_FORCE_PGLITE'];
    else process.env['SVC_TEST_FORCE_PGLITE'] = before;
  }
});

const up = await realPostgresAvailable();
t.test('a fresh database on the real PostgreSQL', { skip: up ? false : `no PostgreSQL at ${TEST_DATABASE_URL}: only the PGlite kind is exercised` }, async (t) => {
  const db = await customerDatabase('svc_cdb');
  t.teardown(() => db.drop()); // idempotent
  t.match(db, { kind: 'postgres', concurrent: true, cancelAtDatabase: true });
  const other = await customerDatabase('svc_cdb');
  t.not(other.url, db.url, 'each call is a fresh database');
  await other.drop();
  await exercise(t, db);
  await db.drop();
  const c = new pg.Client({ connectionString: db.url });
  c.on('error', () => undefined);
  await t.rejects(c.connect(), { code: '3D000' }, 'the database is dropped');
});

t.test('a hostile prefix cannot inject SQL into CREATE DATABASE', { skip: up ? false : `no PostgreSQL at ${TEST_DATABASE_URL}` }, async (t) => {
  const db = await customerDatabase('x; DROP DATABASE postgres; --');
  t.teardown(() => db.drop());
  t.equal(new URL(db.url).pathname.replace(/_[0-9a-f]{12}$/, ''), '/x__drop_database_postgres____', 'only [a-z0-9_] reach the SQL');
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  t.same((await c.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_database WHERE datname = 'postgres'")).rows, [{ n: 1 }]);
  await c.end();
});
