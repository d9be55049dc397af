/**
 * Quoting for the PostgreSQL text svc writes itself (never the agent's statement): identifiers
 * in double quotes, string literals in single quotes. The one copy, used by the SQL policy's
 * rewrite and messages, the period predicate, the demo load script, the row-security settings,
 * the relay filters, the schema listing and the REST connectors' tables.
 */

/**
 * `"name"`, every `"` doubled. Any other character is kept as it is (unicode, backslashes, and a
 * NUL byte too: PostgreSQL refuses that one itself).
 */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * `'text'`, every `'` doubled; backslashes are kept as they are (a plain literal reads them as
 * written, with PostgreSQL's default standard_conforming_strings = on). A NUL byte cannot be in a
 * PostgreSQL string: it throws `NUL byte in <what>` (by default "a demo value", the wording
 * this error has always had).
 */
export function quoteLiteral(text: string, what = 'a demo value'): string {
  if (text.includes('\0')) throw new Error(`NUL byte in ${what}`);
  return `'${text.replace(/'/g, "''")}'`;
}
