/**
 * Each app owns its SQL check worker, its cache of checked statements and its cache of
 * connections: two apps in one process (replicas in tests) share none of them, and closing one
 * stops its worker only, the other keeps checking large statements off the event loop.
 */
import t from 'tap';
import { OFFLOAD_MIN_CHARS } from '../../control-plane/query/sql/offload.js';
import { demoPolicy } from '../../control-plane/query/backends.js';
import { parseScopes } from '../../control-plane/catalogue/index.js';
import { mysqlPolicy } from '../../control-plane/live/mysql/policy.js';
import { api, openConnection, signupAgent, startServer } from '../helpers/server.js';

/** a statement long enough to be checked in the worker thread (padded with a comment) */
const big = `SELECT count(*)::int AS n FROM patients /* ${'x'.repeat(OFFLOAD_MIN_CHARS)} */`;

t.test('two apps: their own check caches and check workers; closing one leaves the other checking', async (t) => {
  const a = await startServer();
  let aClosed = false;
  t.teardown(() => (aClosed ? undefined : a.close()));
  const b = await startServer();
  t.teardown(() => b.close());
  const sa = a.svc.services;
  const sb = b.svc.services;
  t.not(sa.sqlChecker, sb.sqlChecker, 'a check worker each');
  t.not(sa.checkedStatements, sb.checkedStatements, 'a check cache each');
  t.not(sa.connections, sb.connections, 'a connection cache each');

  const query = async (srv: typeof a): Promise<{ status: number; text: string; rows?: { n: number }[] }> => {
    const agent = await signupAgent(srv.url, 'Checker Org');
    const conn = await openConnection(srv.url, agent.key, 'demo-healthcare', ['read:patients']);
    const r = await api<{ rows?: { n: number }[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: agent.key, body: { sql: big } });
    return { status: r.status, text: r.text, ...(r.body.rows ? { rows: r.body.rows } : {}) };
  };

  const bBefore = sb.checkedStatements.stats();
  const first = await query(a);
  t.equal(first.status, 200, first.text.slice(0, 300));
  t.equal(sa.checkedStatements.stats().entries, 1, 'app A keeps its check');
  t.same(sb.checkedStatements.stats(), bBefore, "app B's cache is untouched by app A's query");

  // the demo target's policy, as the backends build it, for checking directly
  const target = sa.catalogue.target('demo-healthcare');
  if (!target) throw new Error('no demo-healthcare target');
  const policy = demoPolicy(target, parseScopes(target, ['read:patients']));

  await a.close();
  aClosed = true;
  await t.rejects(sa.sqlChecker.check(big, policy), /the SQL check worker was stopped/, "a closed app's worker checks nothing more");
  t.match((await sa.sqlChecker.check('SELECT 1', policy)).sql, /SELECT 1/, 'short statements are still checked on the main thread');

  t.match((await sb.sqlChecker.check(big, policy, 'org_b')).tables, ['patients'], "app B's worker still checks large statements");
  const mysqlScopes = { read: new Set(['orders']), filters: [], periods: [], relay: undefined, normalized: ['read:orders'] };
  t.match((await sb.sqlChecker.checkMysql('SELECT id FROM orders', mysqlPolicy(mysqlScopes), 'org_b')).sql, /SELECT `id` FROM/, 'and MySQL-dialect ones');
  const second = await query(b);
  t.equal(second.status, 200, second.text.slice(0, 300));
  t.same(second.rows, first.rows, 'app B answers the large statement through its own worker');
  t.equal(sb.checkedStatements.stats().hits, bBefore.hits, "app B checked it itself, not from app A's cache");
});
