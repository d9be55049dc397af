/** The MySQL checker's refusals that more than one of its parts makes. */
import { SqlPolicyError, type SqlPolicyErrorDetail } from '../../query/sql/index.js';

export const violation = (message: string, detail: Partial<SqlPolicyErrorDetail> = {}): SqlPolicyError =>
  new SqlPolicyError('scope_violation', message, { reason: 'construct_not_allowed', ...detail });
/** the checker could not reproduce a statement it accepted: its limitation, not a scope violation (nothing runs) */
export const rewriteFailed = (): SqlPolicyError =>
  new SqlPolicyError('invalid_sql', "this statement uses syntax that svc's MySQL checker cannot reproduce faithfully, so it is not supported (nothing ran); write it another way, e.g. with a subquery or CTE", {
    reason: 'unsupported',
    construct: 'rewrite',
  });

export function literalReadDifferently(): SqlPolicyError {
  return new SqlPolicyError(
    'invalid_sql',
    "a string literal of this statement would be read differently by the server than by svc's MySQL checker (a backslash escape such as \\u or \\f that MySQL does not define), so it is not supported (nothing ran); write the literal without that escape",
    { reason: 'unsupported', construct: 'string literal escape' },
  );
}
