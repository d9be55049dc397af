/** pg-read's SQLSTATE table: what a failure means, whichever caller maps it to its own errors. */
import t from 'tap';
import pg from 'pg';
import { classifyPgError, sqlstateOf } from '../../pg-read/index.js';

function dbError(code: string, message: string, extra: Partial<pg.DatabaseError> = {}): pg.DatabaseError {
  const e = new pg.DatabaseError(message, message.length, 'error');
  e.code = code;
  e.severity = 'ERROR';
  Object.assign(e, extra);
  return e;
}

t.test('SQLSTATEs and classes', async (t) => {
  const kind = (code: string, message = 'x') => classifyPgError(dbError(code, message)).kind;
  t.equal(kind('57014'), 'query_canceled');
  t.equal(kind('25006'), 'read_only');
  t.equal(kind('42501'), 'insufficient_privilege');
  t.equal(kind('42601', 'cannot insert multiple commands into a prepared statement'), 'multiple_statements');
  t.equal(kind('42601', 'syntax error at or near "x"'), 'statement');
  t.equal(kind('08006'), 'connection');
  t.equal(kind('08P01', 'invalid message format'), 'connection');
  t.equal(kind('57P01'), 'server_shutdown');
  t.equal(kind('57P03'), 'server_shutdown');
  t.equal(kind('57P02'), 'operator_intervention');
  t.equal(kind('53300'), 'too_many_connections');
  t.equal(kind('53200'), 'insufficient_resources');
  t.equal(kind('22012'), 'statement');
  t.equal(kind('42P01'), 'statement');
});

t.test('a parameter count the statement does not take', async (t) => {
  const e = classifyPgError(dbError('08P01', 'bind message supplies 2 parameters, but prepared statement "" requires 1'));
  t.equal(e.kind, 'parameter_count');
  t.same(e.parameters, { supplied: 2, required: 1 });
  t.equal(e.sqlstate, '08P01');
});

t.test('errors that are not the server’s', async (t) => {
  const sock = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
  t.equal(sqlstateOf(sock), undefined, 'a socket error code that looks like a SQLSTATE is not one');
  t.equal(classifyPgError(sock).kind, 'connection');
  t.equal(classifyPgError(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })).kind, 'connection');
  t.equal(classifyPgError(new Error('Connection terminated unexpectedly')).kind, 'unknown');
  t.equal(classifyPgError('a string').message, 'a string');
});

t.test('position and message', async (t) => {
  const e = classifyPgError(dbError('42703', 'column "nope" does not exist', { position: '8' }));
  t.same({ kind: e.kind, sqlstate: e.sqlstate, message: e.message, position: e.position }, { kind: 'statement', sqlstate: '42703', message: 'column "nope" does not exist', position: 8 });
});
