/**
 * How a MySQL / MariaDB server splits a statement into string literals and comments, with the
 * session's sql_mode that the `mysql` target sets (backslash escapes on, `"` quotes a string, no
 * ANSI_QUOTES). The checker's parser (node-sql-parser) reads some literals differently from the
 * server (it decodes `\uXXXX` and `\f`, which the server reads as `uXXXX` and `f`), and the text it
 * writes back is what the server runs. So the rewritten statement is lexed here, the way the
 * server will lex it, and must hold no comment and only literals the agent wrote (or the scope's
 * own filter values): a literal the parser re-wrote into a quote or a comment opener shows up as
 * a literal or comment the agent never wrote, and the statement is refused.
 */

export interface MysqlLexed {
  /** every string literal's value, as the server decodes it, in order */
  readonly literals: readonly string[];
  /** comments the server sees (`#`, `-- `, `/* … *\/`, including executable `/*! … *\/`, `/*M! … *\/` and hints) */
  readonly comments: number;
  /** a literal, quoted identifier or block comment that never ends */
  readonly unterminated: boolean;
  /**
   * backslash escapes in literals that MySQL does not define (`\u`, `\f`, …): the server reads
   * the letter alone, the checker's parser may decode them into other characters
   */
  readonly undefinedEscapes: number;
  /**
   * `--` not followed by whitespace, outside literals: two minus signs to the server, the start of
   * a comment to the checker's parser, which would not see the rest of the line
   */
  readonly bareDashes: number;
  /** deepest nesting of parentheses */
  readonly parenDepth: number;
  /**
   * deepest nesting of calls with a syntax of their own (`CAST(… AS …)`, `CONVERT`, `TRIM`, …):
   * the checker's parser backtracks through them in time exponential in their nesting
   */
  readonly specialDepth: number;
}

/** calls the checker's parser takes exponential time to nest (measured: CAST ×3 a level) */
const SPECIAL_CALLS = new Set(['CAST', 'CONVERT', 'TRIM', 'SUBSTRING', 'SUBSTR', 'EXTRACT', 'POSITION', 'CHAR']);

const ESCAPES: Record<string, string> = { '0': '\u0000', "'": "'", '"': '"', b: '\b', n: '\n', r: '\r', t: '\t', Z: '\u001a', '\\': '\\' };

/** escapes MySQL defines; `\%` and `\_` keep their backslash (LIKE escapes) */
const DEFINED_ESCAPES = new Set([...Object.keys(ESCAPES), '%', '_']);

/** `-- ` starts a comment only when followed by whitespace or a control character (or the end). */
function dashComment(sql: string, i: number): boolean {
  if (sql[i] !== '-' || sql[i + 1] !== '-') return false;
  const next = sql.charCodeAt(i + 2);
  return Number.isNaN(next) || next <= 0x20;
}

export function lexMysql(sql: string): MysqlLexed {
  const literals: string[] = [];
  let comments = 0;
  let undefinedEscapes = 0;
  let bareDashes = 0;
  let parenDepth = 0;
  let specialDepth = 0;
  /** for each open parenthesis, whether it opened a special call */
  const parens: boolean[] = [];
  let specials = 0;
  /** the word just before, if it names a special call */
  let special = false;
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql[i] as string;
    if (c === "'" || c === '"') {
      let value = '';
      i++;
      let closed = false;
      while (i < n) {
        const d = sql[i] as string;
        if (d === '\\' && i + 1 < n) {
          const e = sql[i + 1] as string;
          if (!DEFINED_ESCAPES.has(e)) undefinedEscapes++;
          // \% and \_ keep their backslash (they are LIKE escapes); any other unknown escape is the character itself
          value += e === '%' || e === '_' ? `\\${e}` : (ESCAPES[e] ?? e);
          i += 2;
          continue;
        }
        if (d === c) {
          if (sql[i + 1] === c) {
            value += c;
            i += 2;
            continue;
          }
          i++;
          closed = true;
          break;
        }
        value += d;
        i++;
      }
      if (!closed) return { literals, comments, unterminated: true, undefinedEscapes, bareDashes, parenDepth, specialDepth };
      literals.push(value);
      continue;
    }
    if (c === '`') {
      i++;
      let closed = false;
      while (i < n) {
        if (sql[i] === '`') {
          if (sql[i + 1] === '`') {
            i += 2;
            continue;
          }
          i++;
          closed = true;
          break;
        }
        i++;
      }
      if (!closed) return { literals, comments, unterminated: true, undefinedEscapes, bareDashes, parenDepth, specialDepth };
      continue;
    }
    if (c === '#' || dashComment(sql, i)) {
      comments++;
      while (i < n && sql[i] !== '\n') i++;
      continue;
    }
    if (/[A-Za-z_$]/.test(c)) {
      let j = i + 1;
      while (j < n && /[A-Za-z0-9_$]/.test(sql[j] as string)) j++;
      special = SPECIAL_CALLS.has(sql.slice(i, j).toUpperCase());
      i = j;
      continue;
    }
    if (c === '(') {
      parens.push(special);
      if (special) specialDepth = Math.max(specialDepth, ++specials);
      parenDepth = Math.max(parenDepth, parens.length);
      special = false;
      i++;
      continue;
    }
    if (c === ')') {
      if (parens.pop() === true) specials--;
      special = false;
      i++;
      continue;
    }
    if (c > ' ') special = false; // only whitespace may stand between a call's name and its parenthesis
    if (c === '-' && sql[i + 1] === '-') {
      bareDashes++;
      i += 2;
      continue;
    }
    if (c === '/' && sql[i + 1] === '*') {
      comments++;
      const end = sql.indexOf('*/', i + 2);
      if (end < 0) return { literals, comments, unterminated: true, undefinedEscapes, bareDashes, parenDepth, specialDepth };
      i = end + 2;
      continue;
    }
    i++;
  }
  return { literals, comments, unterminated: false, undefinedEscapes, bareDashes, parenDepth, specialDepth };
}
