/**
 * The one error type of the SQL policy layer, and its constructors. `code` maps 1:1 onto the API
 * error codes of docs/api.md ("Errors"): `invalid_sql` (400, the statement does not parse) and
 * `scope_violation` (403, it reaches outside the connection's scopes or is not a read).
 */

export type SqlPolicyErrorCode = 'invalid_sql' | 'scope_violation';

export interface SqlPolicyErrorDetail {
  /**
   * A stable snake_case reason, e.g. `syntax_error`, `empty_statement`, `multiple_statements`,
   * `not_a_read`, `explain_analyze`, `table_not_in_scope`, `unknown_table`, `system_catalog`,
   * `schema_not_allowed`, `qualified_name`, `function_not_allowed`, `type_not_allowed`,
   * `operator_not_allowed`, `construct_not_allowed`, `writable_cte`, `select_into`,
   * `locking_clause`, `tablesample_method`, `too_complex`, `unsupported` (invalid_sql: the rewriter
   * cannot reproduce the statement faithfully, so it does not run).
   */
  readonly reason: string;
  /** the table name as the agent wrote it (schema-qualified when it was) */
  readonly table?: string;
  /** the function name as the agent wrote it (qualified when it was) */
  readonly function?: string;
  /** the statement kind or SQL construct that was refused, e.g. `INSERT`, `FOR UPDATE`, `regclass` */
  readonly construct?: string;
}

export class SqlPolicyError extends Error {
  readonly code: SqlPolicyErrorCode;
  /** 0-based character offset into the submitted SQL (invalid_sql, when the parser gives one) */
  readonly position?: number;
  readonly detail: SqlPolicyErrorDetail;

  constructor(code: SqlPolicyErrorCode, message: string, detail: SqlPolicyErrorDetail, position?: number) {
    super(message);
    this.name = 'SqlPolicyError';
    this.code = code;
    this.detail = detail;
    if (position !== undefined) this.position = position;
  }
}

export function violation(message: string, detail: SqlPolicyErrorDetail): SqlPolicyError {
  return new SqlPolicyError('scope_violation', message, detail);
}

/** A construct the checker does not know (a node type or field outside the grammar): refused. */
export function unsupported(what: string): SqlPolicyError {
  const construct = what.replace(/\..*$/, '');
  return violation(`the SQL construct ${construct} is not supported by svc's read-only query checker`, {
    reason: 'construct_not_allowed',
    construct,
  });
}

/**
 * The rewriter could not reproduce a statement it had accepted (deparse → parse → verify did not
 * give back what was checked). The statement is refused, never run altered; it is the checker's
 * limitation, not a scope violation: `400 invalid_sql` with reason `unsupported`.
 */
export function rewriteFailed(): SqlPolicyError {
  return new SqlPolicyError(
    'invalid_sql',
    "this statement uses syntax that svc's scope rewriter cannot reproduce faithfully, so it is not supported (nothing ran); write the expression another way, e.g. move a subscript or field access on a parenthesised ARRAY[…]/ROW(…) expression into a subquery or CTE",
    { reason: 'unsupported', construct: 'rewrite' },
  );
}
