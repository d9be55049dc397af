/**
 * The query path's one error mapping (control-plane/query/errors.ts): the SQL policy's refusals,
 * a statement a source's database rejected, and the demo engines' errors, each as the API
 * answers it, the same whichever backend it came from; and the demo backend answers ApiError only.
 */
import t from 'tap';
import { DemoQueryError, type DemoEngine } from '../../control-plane/demo/query.js';
import { ApiError } from '../../control-plane/errors.js';
import { Catalogue, parseScopes } from '../../control-plane/catalogue/index.js';
import { DemoBackend } from '../../control-plane/query/backends.js';
import { abortAnswer, demoFailure, mapDemoFailure, mapPolicyRefusal, policyRefusal, shutdownStop, statementRejected } from '../../control-plane/query/errors.js';
import { ranAtSource } from '../../control-plane/query/engine.js';
import { SqlPolicyError } from '../../control-plane/query/sql/index.js';
import { initSqlParser, type CheckedQuery } from '../../control-plane/query/sql/index.js';
import { CheckCache } from '../../control-plane/query/sql/check-cache.js';
import { OFFLOAD_MIN_CHARS, SqlChecker } from '../../control-plane/query/sql/offload.js';

t.test('a policy refusal: invalid_sql gives its position once (1-based in the message, 0-based in details); scope_violation keeps its detail', async (t) => {
  const syntax = policyRefusal(new SqlPolicyError('invalid_sql', 'syntax error at or near "FORM"', { reason: 'syntax_error' }, 9));
  t.equal(syntax.code, 'invalid_sql');
  t.equal(syntax.status, 400);
  t.equal(syntax.message, 'syntax error at or near "FORM" (at character 10)');
  t.same(syntax.details, { reason: 'syntax_error', position: 9 });
  const scope = policyRefusal(new SqlPolicyError('scope_violation', 'table "x" is not in scope', { reason: 'table_not_in_scope', table: 'x' }));
  t.equal(scope.status, 403);
  t.same(scope.details, { reason: 'table_not_in_scope', table: 'x' });
  const other = new Error('other');
  t.equal(mapPolicyRefusal(other), other, 'anything else passes unchanged');
});

t.test('a statement the database rejected: privilege and read-only refusals are 403, other errors 400, with the SQLSTATE and no server position', async (t) => {
  const denied = statementRejected('the database', 'permission denied for table x', { sqlstate: '42501' });
  t.same([denied.code, denied.message, denied.details], ['scope_violation', 'the database refused the statement: permission denied for table x', { sqlstate: '42501' }]);
  const readOnly = statementRejected("the relay's database", 'cannot execute INSERT in a read-only transaction', { sqlstate: '25006' });
  t.same([readOnly.code, readOnly.message], ['scope_violation', "the relay's database refused the statement: cannot execute INSERT in a read-only transaction"]);
  const unknown = statementRejected('the database', 'column "nope" does not exist', { sqlstate: '42703' });
  t.same([unknown.code, unknown.status, unknown.details], ['invalid_sql', 400, { sqlstate: '42703' }]);
  const mysqlDenied = statementRejected('the database', 'SELECT command denied', { errno: 1142, refused: true });
  t.same([mysqlDenied.code, mysqlDenied.details], ['scope_violation', { errno: 1142 }], 'MySQL says refused by errno');
  const bare = statementRejected('the database', 'empty statement');
  t.same([bare.code, bare.details], ['invalid_sql', undefined], 'no details when the server said nothing more');
});

t.test("an abort is answered by its reason when that is ours (the shutdown's 503, not charged), else by the caller's own answer", async (t) => {
  const timeout = (): ApiError => new ApiError('query_timeout', 'past its deadline');
  const shutdown = new AbortController();
  shutdown.abort(shutdownStop());
  const stopped = abortAnswer(shutdown.signal, timeout);
  t.equal(stopped, shutdown.signal.reason, 'the reason itself');
  t.match(stopped, { code: 'service_unavailable', status: 503, headers: { 'Retry-After': '1' }, details: { reason: 'shutting_down' } });
  t.notOk(ranAtSource(stopped), 'not charged as a statement that ran (and it is no query_timeout, which is charged)');
  const bare = new AbortController();
  bare.abort(); // a DOMException, or a timer's TimeoutError: not an answer of ours
  t.equal(abortAnswer(bare.signal, timeout).code, 'query_timeout', "a bare abort gets the caller's answer");
  t.equal(abortAnswer(AbortSignal.abort(new Error('deadline')), timeout).code, 'query_timeout', 'so does a plain Error');
  t.equal(abortAnswer(new AbortController().signal, timeout).code, 'query_timeout', 'and a signal not aborted');
  t.equal(abortAnswer(undefined, timeout).code, 'query_timeout', 'and no signal');
});

t.test('every demo engine error maps to one API answer', async (t) => {
  const cases: [DemoQueryError, string, number, Record<string, string> | undefined][] = [
    [new DemoQueryError('DEMO_ERR_TIMEOUT', 'ran past 30000 ms'), 'query_timeout', 504, undefined],
    [new DemoQueryError('DEMO_ERR_BUSY', 'no engine', { retryAfter: 2 }), 'service_unavailable', 503, { 'Retry-After': '2' }],
    [new DemoQueryError('DEMO_ERR_COOLDOWN', 'cooling', { retryAfter: 3 }), 'rate_limited', 429, { 'Retry-After': '3' }],
    [new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'gone'), 'service_unavailable', 503, undefined],
    [new DemoQueryError('DEMO_ERR_SQL', 'division by zero', { sqlState: '22012' }), 'invalid_sql', 400, undefined],
    [new DemoQueryError('DEMO_ERR_SQL', 'permission denied', { sqlState: '42501' }), 'scope_violation', 403, undefined],
  ];
  for (const [err, code, status, headers] of cases) {
    const api = demoFailure(err);
    t.same([api.code, api.status, api.headers], [code, status, headers], err.code);
  }
  t.same(demoFailure(new DemoQueryError('DEMO_ERR_COOLDOWN', 'cooling', { retryAfter: 3 })).details, { retry_after_seconds: 3 });
  const other = new ApiError('connection_revoked', 'revoked');
  t.equal(mapDemoFailure(other), other, 'a stop reason (ApiError) passes unchanged');
});

t.test('the demo backend answers ApiError only: its engine errors are mapped at its boundary', async (t) => {
  await initSqlParser();
  const catalogue = new Catalogue();
  const target = catalogue.target('demo-healthcare');
  if (!target) throw new Error('no demo-healthcare target');
  const scopes = parseScopes(target, ['read:patients']);
  const failing: DemoEngine = {
    kind: 'embedded',
    run: async () => {
      throw new DemoQueryError('DEMO_ERR_SQL', 'division by zero', { sqlState: '22012' });
    },
    admissions: () => ({ paid: { atOnce: 0, queued: 0, timedOut: 0 }, trial: { atOnce: 0, queued: 0, timedOut: 0 }, trialPeak: 0, trialCapacity: 1 }),
    stats: () => ({ running: 0, waiting: 0 }),
    started: () => 0,
    close: async () => undefined,
  };
  const checker = new SqlChecker();
  t.teardown(() => checker.close());
  const backend = new DemoBackend(async () => failing, { checker, cache: new CheckCache<CheckedQuery>() });
  const prepared = await backend.prepare('SELECT 1/0 FROM patients', scopes, target, { tenant: 'org_x' });
  const ctx = { orgId: 'org_x', connectionId: 'conn_x', scopes, limits: { timeoutMs: 1000, maxRows: 10, maxBytes: 10_000 }, signal: new AbortController().signal, trial: false };
  const err = await backend.run(prepared, ctx).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof ApiError, 'an ApiError, not the engine error');
  t.same(err instanceof ApiError ? [err.code, err.details] : undefined, ['invalid_sql', { sqlstate: '22012' }]);
  const refused = await backend.prepare('DELETE FROM patients', scopes, target, { tenant: 'org_x' }).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(refused instanceof ApiError && refused.code === 'scope_violation', 'a policy refusal from prepare is an ApiError too');
});

t.test("a statement being checked when the app's check worker is closed (shutdown) is answered 503 with Retry-After, not 500", async (t) => {
  await initSqlParser();
  const catalogue = new Catalogue();
  const target = catalogue.target('demo-healthcare');
  if (!target) throw new Error('no demo-healthcare target');
  const scopes = parseScopes(target, ['read:patients']);
  const checker = new SqlChecker();
  const never: DemoEngine = {
    kind: 'embedded',
    run: async () => {
      throw new Error('not run');
    },
    admissions: () => ({ paid: { atOnce: 0, queued: 0, timedOut: 0 }, trial: { atOnce: 0, queued: 0, timedOut: 0 }, trialPeak: 0, trialCapacity: 1 }),
    stats: () => ({ running: 0, waiting: 0 }),
    started: () => 0,
    close: async () => undefined,
  };
  const backend = new DemoBackend(async () => never, { checker, cache: new CheckCache<CheckedQuery>() });
  // long enough to be checked in the worker thread
  const big = `SELECT count(*) FROM patients /* ${'x'.repeat(OFFLOAD_MIN_CHARS)} */`;
  const outcome = (p: Promise<unknown>): Promise<unknown> =>
    p.then(
      () => undefined,
      (e: unknown) => e,
    );
  const checking = outcome(backend.prepare(big, scopes, target, { tenant: 'org_x' }));
  await checker.close();
  for (const [what, err] of [
    ['in the worker when it closed', await checking],
    ['sent after it closed', await outcome(backend.prepare(`${big} `, scopes, target, { tenant: 'org_x' }))],
  ] as const) {
    t.ok(err instanceof ApiError, `${what}: an ApiError`);
    if (err instanceof ApiError) t.same([err.code, err.status, err.headers], ['service_unavailable', 503, { 'Retry-After': '1' }], what);
  }
});
