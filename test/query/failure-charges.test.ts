/**
 * Which failures ran at their source (charged the query price) and which did not (free): a
 * statement rejected before it ran, and a failure of the source itself (a dropped connection,
 * a shutdown, a deadlock), are free; a socket error's code is not a SQLSTATE.
 */
import t from 'tap';
import { ranAtSource } from '../../control-plane/query/engine.js';
import { DemoQueryError } from '../../control-plane/demo/query.js';
import { ApiError } from '../../control-plane/errors.js';
import { demoFailure } from '../../control-plane/query/errors.js';

t.test('demo engine errors (as the demo backend answers them)', async (t) => {
  const demo = (sqlState: string | undefined) => demoFailure(new DemoQueryError('DEMO_ERR_SQL', 'x', { sqlState }));
  t.equal(ranAtSource(demo('22012')), true, 'division by zero ran');
  t.equal(ranAtSource(demo('22P02')), true, 'invalid input ran');
  for (const s of ['42703', '42501', '0A000', '25006', '26000', '34000']) t.equal(ranAtSource(demo(s)), false, `${s}: rejected before running`);
  for (const s of ['08006', '57P01', '40P01', '53300', '58030', 'XX000']) t.equal(ranAtSource(demo(s)), false, `${s}: the source failed`);
  for (const s of ['ECONNRESET', 'EPIPE', 'ETIMEDOUT', '', undefined]) t.equal(ranAtSource(demo(s)), false, `${String(s)}: not a SQLSTATE`);
  t.equal(ranAtSource(demoFailure(new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'gone'))), false);
  t.equal(ranAtSource(demoFailure(new DemoQueryError('DEMO_ERR_BUSY', 'busy'))), false);
  t.equal(ranAtSource(new DemoQueryError('DEMO_ERR_SQL', 'x', { sqlState: '22012' })), false, "an unmapped engine error is not the engine's answer: the path answers it as internal_error, free");
});

t.test('API errors from live targets and relays', async (t) => {
  t.equal(ranAtSource(new ApiError('invalid_sql', 'x', { sqlstate: '22012' })), true);
  t.equal(ranAtSource(new ApiError('invalid_sql', 'x', { reason: 'row_too_large' })), true);
  t.equal(ranAtSource(new ApiError('invalid_sql', 'x', { reason: 'message_too_large' })), true);
  t.equal(ranAtSource(new ApiError('invalid_sql', 'x', { reason: 'out_of_memory', sqlstate: '53200' })), true, 'a value too large to build is the statement, not the source');
  t.equal(ranAtSource(new ApiError('invalid_sql', 'x', { sqlstate: '42601' })), false);
  t.equal(ranAtSource(new ApiError('scope_violation', 'x', { sqlstate: '25006' })), false, 'a write refused by the read-only transaction is free');
  t.equal(ranAtSource(new ApiError('invalid_sql', 'x', { reason: 'too_complex' })), false, 'refused by svc');
  t.equal(ranAtSource(new ApiError('relay_unavailable', 'x', { sqlstate: '22012' })), false, 'only invalid_sql / scope_violation');
  t.equal(ranAtSource(new Error('boom')), false);
});
