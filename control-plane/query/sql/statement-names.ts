/** Human names of the statements the SQL policy refuses, for its messages. */
import type { Obj } from './grammar.js';

const STATEMENT_NAMES: Record<string, string> = {
  InsertStmt: 'INSERT', UpdateStmt: 'UPDATE', DeleteStmt: 'DELETE', MergeStmt: 'MERGE',
  CopyStmt: 'COPY', DoStmt: 'DO', CallStmt: 'CALL', LockStmt: 'LOCK', ListenStmt: 'LISTEN',
  UnlistenStmt: 'UNLISTEN', NotifyStmt: 'NOTIFY', PrepareStmt: 'PREPARE', ExecuteStmt: 'EXECUTE',
  DeallocateStmt: 'DEALLOCATE', VariableShowStmt: 'SHOW', CreateStmt: 'CREATE TABLE',
  CreateTableAsStmt: 'CREATE TABLE AS', DropStmt: 'DROP', TruncateStmt: 'TRUNCATE',
  GrantStmt: 'GRANT/REVOKE', GrantRoleStmt: 'GRANT/REVOKE', CheckPointStmt: 'CHECKPOINT',
  DiscardStmt: 'DISCARD', DeclareCursorStmt: 'DECLARE CURSOR', FetchStmt: 'FETCH',
  ClosePortalStmt: 'CLOSE', LoadStmt: 'LOAD', IndexStmt: 'CREATE INDEX', ViewStmt: 'CREATE VIEW',
  CreateFunctionStmt: 'CREATE FUNCTION', RenameStmt: 'ALTER … RENAME', CommentStmt: 'COMMENT',
  ExplainStmt: 'EXPLAIN',
};

const TRANSACTION_NAMES: Record<string, string> = {
  TRANS_STMT_BEGIN: 'BEGIN', TRANS_STMT_START: 'START TRANSACTION', TRANS_STMT_COMMIT: 'COMMIT',
  TRANS_STMT_ROLLBACK: 'ROLLBACK', TRANS_STMT_SAVEPOINT: 'SAVEPOINT', TRANS_STMT_RELEASE: 'RELEASE',
  TRANS_STMT_ROLLBACK_TO: 'ROLLBACK TO SAVEPOINT', TRANS_STMT_PREPARE: 'PREPARE TRANSACTION',
  TRANS_STMT_COMMIT_PREPARED: 'COMMIT PREPARED', TRANS_STMT_ROLLBACK_PREPARED: 'ROLLBACK PREPARED',
};

/** A human name for a statement node, e.g. `INSERT`, `SET`, `COMMIT`, `CREATE FUNCTION`. */
export function statementName(type: string, body: Obj | undefined): string {
  if (type === 'TransactionStmt') return TRANSACTION_NAMES[String(body?.['kind'])] ?? 'transaction control';
  if (type === 'VariableSetStmt') {
    const kind = String(body?.['kind']);
    if (kind.startsWith('VAR_RESET')) return 'RESET';
    return body?.['name'] === 'role' ? 'SET ROLE' : body?.['name'] === 'session_authorization' ? 'SET SESSION AUTHORIZATION' : 'SET';
  }
  if (type === 'VacuumStmt') return body?.['is_vacuumcmd'] === true ? 'VACUUM' : 'ANALYZE';
  const known = STATEMENT_NAMES[type];
  if (known) return known;
  return type
    .replace(/Stmt$/, '')
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toUpperCase();
}
