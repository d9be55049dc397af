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

/**
 * A literal that reads the same whatever the session's standard_conforming_strings: as
 * {@link quoteLiteral}, but `E'…'` with every backslash doubled when the text holds one. For text
 * svc sends to a customer's database as it is, not through the checker's deparser (which writes
 * such strings as `E'…'` itself): the schema listing's catalog statement (query/schema.ts). There a
 * plain `'…\''…'` (a scoped name may hold both) read with the setting off as an escaped quote,
 * and the rest of the name as SQL.
 */
export function quoteLiteralAnySetting(text: string, what?: string): string {
  const plain = quoteLiteral(text, what);
  return text.includes('\\') ? `E${plain.replace(/\\/g, '\\\\')}` : plain;
}
