/**
 * Checked statements are kept by target, scopes and text: the same statement under the same
 * scopes is not checked again, under other scopes it is (a statement refused under one scope set
 * is never served from another's check), and the cache is bounded.
 */
import t from 'tap';
import { CheckCache } from '../../control-plane/query/sql/check-cache.js';
import { api, openConnection, signupAgent, startServer } from '../helpers/server.js';

t.test('bounded by entries and by characters, least recently used out first', async (t) => {
  const cache = new CheckCache<{ sql: string }>(3, 1000);
  for (const k of ['a', 'b', 'c']) cache.set(k, { sql: k });
  t.ok(cache.get('a'), 'a is used: now the most recent');
  cache.set('d', { sql: 'd' });
  t.equal(cache.get('b'), undefined, 'b, the least recently used, went out');
  t.ok(cache.get('a') && cache.get('c') && cache.get('d'));
  cache.set('big', { sql: 'x'.repeat(990) });
  t.ok(cache.stats().chars <= 1000, `at most 1000 characters held (${cache.stats().chars})`);
  cache.set('huge', { sql: 'x'.repeat(2000) });
  t.equal(cache.get('huge'), undefined, 'an entry over the whole bound is not kept');
  t.equal(CheckCache.key('demo', ['read:b', 'read:a'], 'SELECT 1'), CheckCache.key('demo', ['read:a', 'read:b'], 'SELECT 1'), 'scopes in any order');
  t.not(CheckCache.key('demo', ['read:a'], 'SELECT 1'), CheckCache.key('demo', ['read:a', 'period:2024'], 'SELECT 1'));
  // a filter value may hold any character but a line break, a separator of the key's too: two
  // different scope lists must never make one key
  t.not(
    CheckCache.key('postgres', ['filter:t.c=X\u0001read:public.t', 'read:t'], 'SELECT 1'),
    CheckCache.key('postgres', ['filter:t.c=X', 'read:public.t', 'read:t'], 'SELECT 1'),
    'a separator inside a filter value',
  );
});

t.test('through the API: a repeated statement is served from its check; other scopes are checked on their own', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const a = await signupAgent(srv.url, 'Cache Org');
  const patients = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients', 'read:encounters']);
  const samePatients = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters', 'read:patients']);
  const encountersOnly = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:encounters']);
  const q = (conn: string) => api<{ rows?: { n: number }[]; error?: { code: string } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*)::int AS n FROM patients /* check-cache test */' } });

  const checkedStatements = srv.svc.services.checkedStatements;
  const before = checkedStatements.stats();
  const first = await q(patients);
  t.equal(first.status, 200, first.text);
  const second = await q(samePatients);
  t.equal(second.status, 200);
  t.same(second.body.rows, first.body.rows);
  const after = checkedStatements.stats();
  t.equal(after.hits - before.hits, 1, 'the second connection (same scopes, another order) was served from the check');

  const refused = await q(encountersOnly);
  t.equal(refused.status, 403, 'the same text under scopes without patients is refused, not served from the other check');
  t.equal(refused.body.error?.code, 'scope_violation');
});
