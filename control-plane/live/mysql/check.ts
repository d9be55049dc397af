/**
 * The MySQL/MariaDB statement checker: the agent's SQL is parsed with a MySQL-dialect parser
 * (node-sql-parser, MariaDB grammar), exactly one SELECT is accepted, and its tree is walked with
 * allow-lists (node types, operators, functions, SELECT options); every table reference is
 * resolved with CTE scoping against the connection's `read:` scopes. A table with `filter:`
 * scopes is replaced by an in-scope derived table:
 * `(SELECT * FROM `schema`.`table` WHERE <filters> LIMIT 18446744073709551615)` — the LIMIT keeps
 * MySQL from merging the derived table into the agent's query, so none of the agent's expressions
 * is evaluated on an out-of-scope row; a table without filters (every row in scope) is named as
 * scoped, `schema`.`table` AS alias, so its indexes serve the statement. What runs is the regenerated text
 * (comments, executable comments and hints in the agent's text are gone), and that text is parsed
 * and checked again ("verify"), its table list checked against a white list of the physical
 * tables in scope. Refused: INTO (OUTFILE, DUMPFILE, variables), locking reads, user and system
 * variables, assignments, placeholders, functions outside the allow-list (SLEEP, BENCHMARK,
 * LOAD_FILE, GET_LOCK, DATABASE(), USER(), …), system schemas (in any letter case, checked before
 * the scoped tables are looked up), other schemas. Table and database names keep their letter
 * case; the agent's references are compared as the server compares them (`MysqlNameCase`, from
 * `@@lower_case_table_names`). A statement the checker cannot reproduce is `invalid_sql`
 * (`unsupported`), and a parse error names the construct where parsing stopped.
 *
 * Pure: no I/O. Throws SqlPolicyError (`invalid_sql` / `scope_violation`).
 */
import { SqlPolicyError } from '../../query/sql/index.js';
import { literalReadDifferently, rewriteFailed, violation } from './errors.js';
import { lexMysql } from './lexer.js';
import { OPT, parseMysql, parser, type Obj } from './parse.js';
import type { MysqlPolicy } from './policy.js';
import { MysqlWalker } from './walker.js';

export interface MysqlChecked {
  readonly sql: string;
  readonly tables: readonly string[];
  /**
   * databases the statement named a table scoped without a schema with (`read:orders`, written
   * `shop.orders`): it reads the credential's database's table, so it runs only if the
   * credential's database is that one (checked when the query runs, see checkForServer)
   */
  readonly assumedDatabases: readonly string[];
}

/** Nesting the MySQL checker accepts (its parser's time grows about 3x a level of CAST-like calls). */
export const MAX_SPECIAL_DEPTH = 2;
export const MAX_PAREN_DEPTH = 64;

/** Check one MySQL statement against the policy and rewrite it to read only in-scope rows. */
export function checkMysql(sql: string, policy: MysqlPolicy): MysqlChecked {
  // executable comments and optimizer hints would be gone from what runs; refuse them so the
  // agent is never surprised, and so that nothing depends on how a comment is lexed
  if (/\/\*(?:[!+]|M!)/i.test(sql)) throw violation('executable comments and optimizer hints (/*! … */, /*M! … */, /*+ … */) are not allowed', { construct: 'executable comment' });
  // where the server and the checker's parser would split the text differently, refuse before
  // parsing: what the parser reads as a comment or an escaped character the server would run
  const lexed = lexMysql(sql);
  if (lexed.specialDepth > MAX_SPECIAL_DEPTH || lexed.parenDepth > MAX_PAREN_DEPTH) {
    // the parser backtracks through nested CAST(… AS …)-like calls in exponential time (a
    // 244-byte statement of 16 nested CASTs held the check for minutes)
    throw new SqlPolicyError(
      'invalid_sql',
      lexed.specialDepth > MAX_SPECIAL_DEPTH
        ? `CAST, CONVERT, TRIM, SUBSTRING, EXTRACT, POSITION and CHAR calls can be nested at most ${MAX_SPECIAL_DEPTH} deep on the mysql target (this statement nests them ${lexed.specialDepth} deep); use a subquery or CTE for the inner part`
        : `parentheses can be nested at most ${MAX_PAREN_DEPTH} deep on the mysql target (this statement nests them ${lexed.parenDepth} deep)`,
      { reason: 'too_complex' },
    );
  }
  if (lexed.undefinedEscapes > 0) throw literalReadDifferently();
  if (lexed.bareDashes > 0) {
    throw new SqlPolicyError(
      'invalid_sql',
      "`--` not followed by a space is two minus signs to MySQL but the start of a comment to svc's MySQL checker, so it is not supported (nothing ran); write `- -1` for a double negation, or `-- ` (with a space) for a comment",
      { reason: 'unsupported', construct: '--' },
    );
  }
  const stmts = parseMysql(sql);
  if (stmts.length !== 1) throw new SqlPolicyError('scope_violation', `exactly one statement can run per query; got ${stmts.length}`, { reason: 'multiple_statements' });
  const stmt = stmts[0] as Obj;
  const checker = new MysqlWalker(policy, 'check');
  guard(() => checker.statement(stmt));
  let out: string;
  try {
    out = parser.sqlify(stmt as unknown as Parameters<typeof parser.sqlify>[0], OPT);
  } catch {
    throw rewriteFailed();
  }
  assertServerReadsAsChecked(sql, out, policy);
  // verify what runs: one SELECT, the same checks, and only our own physical tables and CTEs
  let again: Obj[];
  try {
    again = parseMysql(out);
  } catch {
    throw rewriteFailed();
  }
  if (again.length !== 1) throw rewriteFailed();
  const verifier = new MysqlWalker(policy, 'verify');
  for (const p of checker.physical) verifier.physical.add(p);
  guard(() => verifier.statement(again[0]));
  try {
    const white = [...checker.physical, ...[...checker.cteNames].map((c) => `select::null::${c}`)];
    parser.whiteListCheck(out, white.length ? white : ['select::null::dual'], { ...OPT, type: 'table' });
  } catch {
    throw rewriteFailed();
  }
  return { sql: out, tables: [...checker.tables].sort(), assumedDatabases: [...checker.assumedDatabases].sort() };
}

/**
 * The rewritten text is what the server runs, so it must mean to the server what the checker
 * checked: lexed as the server lexes it (lexer.ts), it holds no comment, and each of its string
 * literals is one the agent wrote (as the server decodes it) or a scope filter's own value. The
 * parser decodes some escapes the server does not (`\u0027` becomes a quote), which would
 * otherwise turn a literal into SQL the checker never saw.
 */
function assertServerReadsAsChecked(input: string, out: string, policy: MysqlPolicy): void {
  const written = lexMysql(input);
  const runs = lexMysql(out);
  const left = new Map<string, number>();
  for (const v of written.literals) left.set(v, (left.get(v) ?? 0) + 1);
  const ours = new Set<string>();
  for (const e of new Set(policy.allowed.values())) if (e.predicate !== null) for (const v of lexMysql(e.predicate).literals) ours.add(v);
  for (const v of runs.literals) {
    const n = left.get(v) ?? 0;
    if (n > 0) left.set(v, n - 1);
    else if (!ours.has(v)) throw literalReadDifferently();
  }
  if (runs.comments > 0 || runs.bareDashes > 0 || runs.undefinedEscapes > 0 || runs.unterminated) throw rewriteFailed();
}

function guard<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof RangeError) throw new SqlPolicyError('invalid_sql', 'the statement is too complex', { reason: 'too_complex' });
    throw err;
  }
}
