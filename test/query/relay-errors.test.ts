/** How errors the relay sends become API errors: a database rejection is never "relay unavailable". */
import t from 'tap';
import { ProtocolError } from '../../protocol/index.js';
import { relayFailure } from '../../control-plane/query/relay.js';

const remote = (code: string, message: string, detail?: unknown): ProtocolError => new ProtocolError(code, message, { remote: true, detail });

const cases: [ProtocolError, number, string][] = [
  [remote('RELAY_ERR_QUERY', 'division by zero', { sqlstate: '22012' }), 400, 'invalid_sql'],
  [remote('RELAY_ERR_QUERY', 'syntax error at or near "FROM"', { sqlstate: '42601' }), 400, 'invalid_sql'],
  [remote('RELAY_ERR_QUERY', 'empty statement'), 400, 'invalid_sql'],
  [remote('RELAY_ERR_QUERY', 'permission denied for table payroll', { sqlstate: '42501' }), 403, 'scope_violation'],
  [remote('RELAY_ERR_READ_ONLY', 'refused: read-only', { sqlstate: '25006' }), 403, 'scope_violation'],
  [remote('RELAY_ERR_MULTI_STATEMENT', 'refused: one statement per query', { sqlstate: '42601' }), 403, 'scope_violation'],
  [remote('RELAY_ERR_TIMEOUT', 'canceling statement due to statement timeout', { sqlstate: '57014' }), 504, 'query_timeout'],
  [remote('RELAY_ERR_DATABASE_UNAVAILABLE', 'connect ECONNREFUSED'), 503, 'relay_unavailable'],
  [remote('RELAY_ERR_DATABASE_UNAVAILABLE', 'the database system is shutting down', { sqlstate: '57P03' }), 503, 'relay_unavailable'],
  // a bare SQLSTATE as the code is no RELAY_ERR_* code (no relay ever sent that): the relay failing
  [remote('22012', 'division by zero'), 503, 'relay_unavailable'],
  [remote('RELAY_ERR_INTERNAL', 'boom'), 503, 'relay_unavailable'],
  // a value the relay's encoder refused (a JSON value nested too deeply): the statement ran
  [remote('RELAY_ERR_VALUE_UNSENDABLE', 'a value of the result cannot be sent: value is not JSON-serialisable'), 400, 'invalid_sql'],
  // every pool connection busy until just before the deadline: nothing ran (relay-agent/pool-busy)
  [remote('RELAY_ERR_POOL_BUSY', "all 4 of the relay's connections to its database stayed busy"), 503, 'service_unavailable'],
];
for (const [err, status, code] of cases) {
  const api = relayFailure(err, 'rly_x', 10_000);
  t.equal(api.status, status, `${err.code} ${err.message}: ${status}`);
  t.equal(api.code, code, `${err.code} ${err.message}: ${code}`);
}
