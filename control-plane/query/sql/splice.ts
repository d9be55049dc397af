/**
 * The SQL policy's fast path: the rewritten statement as the agent's own text, with only the
 * table-name tokens of each rewritten table reference replaced by its template's text (a
 * `(SELECT … OFFSET 0)` subquery, or the quoted physical name), instead of deparsing the whole
 * rewritten tree.
 *
 * It only has to be usually right, never trusted: its output goes through the same verify pass
 * as the deparser's (re-parse, walk in verify mode, same kind), and when anything about it is
 * doubtful (the answer here is null), or its output fails that pass, the policy deparses the tree
 * as it always did (index.ts).
 *
 * Doubtful, so null:
 * - text that is not pure ASCII (the parser's locations count bytes; JavaScript, UTF-16 units);
 * - any `--` or `/*`: a comment between the parts of a name, or one that would swallow what
 *   follows it, is not worth reasoning about;
 * - any backslash: the agent's string literals are kept as written, and a database running with
 *   standard_conforming_strings = off would read `'…\'…'` differently from the parser that checked
 *   it (the deparser writes such strings as E'…', which every setting reads alike);
 * - a number written as only PostgreSQL 16 and later read it (`0x1F`, `0o17`, `0b101`, `1_000`),
 *   or a vertical tab (whitespace from 16 on): the policy's parser is 18's, a customer's server
 *   may be older, and 15 refuses them while 14 and older read `0x1F` as `0 AS x1F` (the deparser
 *   writes such a number in decimal, and its own spacing);
 * - a reference with ONLY or `*`, or after TABLE (`TABLE t` has no room for a subquery);
 * - a name at the recorded location that is not, part for part, the one the parser reported
 *   (U&"…" names, names longer than PostgreSQL keeps, anything unexpected).
 */
import type { Obj } from './grammar.js';
import { quoteIdent } from './quote.js';
import type { Template } from './rewrite.js';

/** a table reference the check rewrote: the agent's RangeVar (its location included) and its template */
export interface Rewritten {
  readonly rv: Obj;
  readonly template: Template;
}

/** where the one statement lies in the agent's text (libpg_query's RawStmt; len 0: to the end) */
export interface StatementSpan {
  readonly stmt_location?: number;
  readonly stmt_len?: number;
}

const NOT_ASCII = /[^\x00-\x7f]/;
/** a number token PostgreSQL 15 and older read otherwise: a 0x/0o/0b prefix, or an underscore among its digits */
const NEWER_NUMBER = /(?<![\w$])(?:0[xXoObB]|[0-9][0-9.eE+-]*_)/;
const SPACE = /[ \t\n\r\f\v]/;
const IDENT_START = /[A-Za-z_]/;
const IDENT_CHAR = /[A-Za-z0-9_$]/;

/** a name part as PostgreSQL reads it at `at`: unquoted (lower-cased) or double-quoted */
function identAt(sql: string, at: number, end: number): { name: string; end: number } | null {
  const c = sql[at];
  if (c === undefined || at >= end) return null;
  if (c === '"') {
    let name = '';
    let i = at + 1;
    for (;;) {
      const q = sql.indexOf('"', i);
      if (q < 0 || q >= end) return null;
      name += sql.slice(i, q);
      if (sql[q + 1] === '"') {
        name += '"';
        i = q + 2;
        continue;
      }
      return name === '' ? null : { name, end: q + 1 };
    }
  }
  if (!IDENT_START.test(c)) return null;
  let i = at + 1;
  while (i < end && IDENT_CHAR.test(sql[i] as string)) i++;
  if (sql[i] === '&' || sql[i] === '"' || sql[i] === "'") return null; // U&"…", or something else
  return { name: sql.slice(at, i).toLowerCase(), end: i };
}

function skipSpace(sql: string, i: number, end: number): number {
  while (i < end && SPACE.test(sql[i] as string)) i++;
  return i;
}

/** the qualified name at `at` (up to three parts, with optional spaces around the dots) */
function nameAt(sql: string, at: number, end: number): { parts: string[]; end: number } | null {
  const parts: string[] = [];
  let i = at;
  for (;;) {
    const id = identAt(sql, i, end);
    if (!id) return null;
    parts.push(id.name);
    i = id.end;
    if (parts.length === 3) return { parts, end: i };
    const dot = skipSpace(sql, i, end);
    if (sql[dot] !== '.' || dot >= end) return { parts, end: i };
    i = skipSpace(sql, dot + 1, end);
  }
}

/** the word that ends right before `at` (spaces skipped), lower-case */
function wordBefore(sql: string, at: number, start: number): string {
  let i = at;
  while (i > start && SPACE.test(sql[i - 1] as string)) i--;
  const last = i;
  while (i > start && IDENT_CHAR.test(sql[i - 1] as string)) i--;
  return sql.slice(i, last).toLowerCase();
}

/** what the reference becomes: the template, and `AS <name>` when the agent gave no alias (as `aliasOf` does) */
function replacement(r: Rewritten): string {
  const { rv, template } = r;
  const read = template.select ? `(${template.text})` : template.text;
  return rv['alias'] === undefined ? `${read} AS ${quoteIdent(rv['relname'] as string)}` : read;
}

function splice(sql: string, span: StatementSpan, rewrites: readonly Rewritten[]): string | null {
  if (NOT_ASCII.test(sql) || sql.includes('--') || sql.includes('/*') || sql.includes('\\')) return null;
  if (sql.includes('\v') || NEWER_NUMBER.test(sql)) return null;
  const start = span.stmt_location ?? 0;
  const len = span.stmt_len ?? 0;
  const end = len > 0 ? start + len : sql.length;
  if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end > sql.length || start > end) return null;

  const sorted = [...rewrites].sort((a, b) => (a.rv['location'] as number) - (b.rv['location'] as number));
  const out: string[] = [];
  let at = start;
  for (const r of sorted) {
    const { rv } = r;
    const loc = rv['location'];
    if (typeof loc !== 'number' || !Number.isInteger(loc) || loc < at || loc >= end) return null;
    if (rv['inh'] !== true) return null; // ONLY
    const name = nameAt(sql, loc, end);
    if (!name) return null;
    const expected = [rv['catalogname'], rv['schemaname'], rv['relname']].filter((p) => p !== undefined);
    if (expected.length !== name.parts.length || expected.some((p, i) => p !== name.parts[i])) return null;
    const next = skipSpace(sql, name.end, end);
    if (sql[next] === '*' || wordBefore(sql, loc, start) === 'table') return null;
    out.push(sql.slice(at, loc), replacement(r));
    // keep the agent's alias a token of its own (`patients"p"`)
    const after = sql[name.end];
    if (name.end < end && after !== undefined && (after === '"' || IDENT_CHAR.test(after))) out.push(' ');
    at = name.end;
  }
  out.push(sql.slice(at, end));
  const text = out.join('').trim();
  return text === '' ? null : text;
}

/**
 * The splice behind an indirection, so tests can substitute a faulty one and prove that the verify
 * pass catches whatever it gets wrong (the policy then deparses the tree instead).
 */
export const splicer = {
  /** the agent's statement with each rewritten reference replaced, or null when that is doubtful */
  splice(sql: string, span: StatementSpan, rewrites: readonly Rewritten[]): string | null {
    return splice(sql, span, rewrites);
  },
};
