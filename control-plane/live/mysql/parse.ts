/**
 * The MySQL-dialect parser of the checker (node-sql-parser, MariaDB grammar), and its failures as
 * the agent should read them.
 */
import nodeSqlParser from 'node-sql-parser';
import { SqlPolicyError } from '../../query/sql/index.js';

const { Parser } = nodeSqlParser;
export const parser = new Parser();
export const OPT = { database: 'MariaDB' } as const;

export type Obj = Record<string, unknown>;

export function parseMysql(sql: string): Obj[] {
  if (sql.includes('\u0000')) throw new SqlPolicyError('invalid_sql', 'the statement contains a NUL character', { reason: 'syntax_error' });
  if (sql.trim() === '') throw new SqlPolicyError('invalid_sql', 'the statement is empty', { reason: 'empty_statement' });
  let ast: unknown;
  try {
    ast = parser.astify(sql, OPT);
  } catch (err) {
    throw parseFailure(sql, err);
  }
  return (Array.isArray(ast) ? ast : [ast]) as Obj[];
}

/**
 * A parser failure as the agent should read it: where, and which construct (the words at that
 * point) is not supported, never the grammar's list of expected tokens. The position is in
 * `position` (the API adds "at character N" once).
 */
const CLAUSE_WORDS = new Set(['SELECT', 'FROM', 'WHERE', 'AND', 'OR', 'NOT', 'ON', 'BY', 'JOIN', 'AS', 'WITH', 'HAVING', 'LIMIT', 'OFFSET', 'UNION', 'ALL', 'DISTINCT', 'IN', 'IS', 'NULL', 'CASE', 'WHEN', 'THEN', 'ELSE', 'END', 'USING', 'LEFT', 'RIGHT', 'INNER', 'OUTER', 'CROSS', 'GROUP', 'ORDER']);

function parseFailure(sql: string, err: unknown): SqlPolicyError {
  const e = err as { location?: { start?: { offset?: number } } };
  const at = typeof e.location?.start?.offset === 'number' ? Math.max(0, Math.min(sql.length, e.location.start.offset)) : undefined;
  if (at === undefined) return new SqlPolicyError('invalid_sql', "the statement is not valid MySQL, or uses syntax svc's MySQL checker does not support; only a single SELECT (WITH, JOIN, subqueries, UNION, window functions) can run", { reason: 'syntax_error' });
  const rest = sql.slice(at).trimStart();
  if (rest === '') {
    return new SqlPolicyError('invalid_sql', 'the statement ends unexpectedly (is a clause, a closing parenthesis or an operand missing?)', { reason: 'syntax_error' }, at);
  }
  // the construct: the keyword(s) or symbol where parsing stopped, e.g. `RETURNING`, `LATERAL (`, `::`
  const words = /^([A-Za-z_][A-Za-z0-9_$]*(?:\s+[A-Za-z_][A-Za-z0-9_$]*)?|::|[^\sA-Za-z0-9_$]{1,3})/.exec(rest)?.[1] ?? rest.slice(0, 1);
  // the word before is often the unsupported keyword, read as an alias (e.g. `TABLESAMPLE (`, `WINDOW w`)
  const before = /([A-Za-z_][A-Za-z0-9_$]*)\s*$/.exec(sql.slice(0, at))?.[1] ?? '';
  const prev = before && !CLAUSE_WORDS.has(before.toUpperCase()) ? before : '';
  const construct = `${prev ? `${prev} ` : ''}${words}`.replace(/\s+/g, ' ').slice(0, 40);
  const context = `${at > 30 ? '…' : ''}${sql.slice(Math.max(0, at - 30), at)}${sql.slice(at, at + 30)}${at + 30 < sql.length ? '…' : ''}`.replace(/\s+/g, ' ');
  const first = /^\s*\(*\s*([A-Za-z]+)/.exec(sql)?.[1]?.toUpperCase();
  const hint = first && first !== 'SELECT' && first !== 'WITH' ? ` (${first} statements are not supported: only a single SELECT can run)` : '';
  return new SqlPolicyError(
    'invalid_sql',
    `the statement does not parse as MySQL near ${JSON.stringify(construct)} (in ${JSON.stringify(context)}): this construct is not supported by svc's MySQL checker, or is not valid MySQL here${hint}`,
    { reason: 'syntax_error', construct },
    at,
  );
}
