/**
 * Scope grammar and parsing (CONTRACT.md "Catalogue"): `read:<table>` / `read:*`,
 * `period:<YYYY>` / `period:<YYYY>-Q<1-4>` / `period:<YYYY>-<MM>` (half-open UTC intervals), and
 * the target's own scopes (e.g. `relay:<relay_id>`).
 */
import { ApiError } from '../errors.js';

export interface ScopeRule {
  readonly name: string;
  readonly pattern: string;
  readonly description: string;
  readonly required: boolean;
  readonly examples: readonly string[];
}

export interface Interval {
  readonly label: string;
  /** inclusive, ISO 8601 UTC */
  readonly start: string;
  /** exclusive, ISO 8601 UTC */
  readonly end: string;
}

export interface ParsedScopes {
  /** tables the connection may read (agent-facing names), or every table of the target */
  readonly read: 'all' | ReadonlySet<string>;
  /** row periods; empty means no period restriction; several are a union */
  readonly periods: readonly Interval[];
  readonly relay: string | undefined;
  /** row filters (relay): rows of `table` whose `column` equals `value` */
  readonly filters: readonly { table: string; column: string; value: string }[];
  /** the scopes as given, de-duplicated, in order */
  readonly normalized: readonly string[];
}

export interface ScopeTarget {
  readonly id: string;
  readonly grammar: readonly ScopeRule[];
  /** tables that `read:` may name; null when any `<table>` / `<schema>.<table>` is allowed (databases) */
  readonly tableNames: readonly string[] | null;
}

const MAX_SCOPES = 64;
const IDENT = /^[a-z_][a-z0-9_$]{0,62}$/;

export function periodInterval(value: string): Interval | undefined {
  if (value.startsWith('0000')) return undefined; // there is no year 0
  let m = /^(\d{4})$/.exec(value);
  if (m) {
    const y = Number(m[1]);
    return { label: value, start: iso(y, 1), end: iso(y + 1, 1) };
  }
  m = /^(\d{4})-Q([1-4])$/.exec(value);
  if (m) {
    const y = Number(m[1]);
    const q = Number(m[2]);
    const startMonth = (q - 1) * 3 + 1;
    return { label: value, start: iso(y, startMonth), end: startMonth + 3 > 12 ? iso(y + 1, 1) : iso(y, startMonth + 3) };
  }
  m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(value);
  if (m) {
    const y = Number(m[1]);
    const mo = Number(m[2]);
    return { label: value, start: iso(y, mo), end: mo === 12 ? iso(y + 1, 1) : iso(y, mo + 1) };
  }
  return undefined;
}

function iso(year: number, month: number): string {
  return `${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}-01T00:00:00.000Z`;
}

export function grammarText(target: ScopeTarget): string {
  return target.grammar.map((r) => `${r.pattern}${r.required ? ' (required)' : ''}`).join('; ');
}

export function parseScopes(target: ScopeTarget, scopes: readonly string[]): ParsedScopes {
  const fail = (message: string, scope?: string): never => {
    throw new ApiError('invalid_scope', `${message}. Scope grammar of ${target.id}: ${grammarText(target)}`, {
      ...(scope !== undefined ? { scope } : {}),
      grammar: target.grammar,
      ...(target.tableNames ? { tables: target.tableNames } : {}),
    });
  };
  if (scopes.length === 0) fail('at least one scope is required');
  if (scopes.length > MAX_SCOPES) fail(`at most ${MAX_SCOPES} scopes`);

  const ruleNames = new Set(target.grammar.map((r) => r.name));
  const reads = new Set<string>();
  let readAll = false;
  const periods: Interval[] = [];
  let relay: string | undefined;
  const filters: { table: string; column: string; value: string }[] = [];
  const normalized: string[] = [];

  for (const raw of scopes) {
    const scope = raw.trim();
    const colon = scope.indexOf(':');
    if (colon <= 0) fail(`scope ${JSON.stringify(raw)} is not of the form <name>:<value>`, raw);
    const name = scope.slice(0, colon);
    const value = scope.slice(colon + 1);
    if (!ruleNames.has(name)) fail(`unknown scope ${JSON.stringify(name)}`, raw);
    if (value === '') fail(`scope ${JSON.stringify(raw)} has an empty value`, raw);
    if (normalized.includes(scope)) continue;
    normalized.push(scope);
    switch (name) {
      case 'read': {
        if (value === '*') {
          readAll = true;
          break;
        }
        const table = value.toLowerCase();
        if (target.tableNames) {
          if (!target.tableNames.includes(table)) fail(`unknown table ${JSON.stringify(value)} in ${JSON.stringify(raw)}; tables of ${target.id}: ${target.tableNames.join(', ')}`, raw);
        } else {
          const parts = table.split('.');
          if (parts.length > 2 || !parts.every((p) => IDENT.test(p))) fail(`${JSON.stringify(raw)} must name a table as read:<table> or read:<schema>.<table>`, raw);
        }
        reads.add(table);
        break;
      }
      case 'period': {
        const interval = periodInterval(value);
        if (!interval) fail(`${JSON.stringify(raw)} is not a period: use period:<YYYY>, period:<YYYY>-Q<1-4> or period:<YYYY>-<MM>`, raw);
        else periods.push(interval);
        break;
      }
      case 'relay': {
        if (!/^[A-Za-z0-9_-]{1,64}$/.test(value)) fail(`${JSON.stringify(raw)} must name a relay id`, raw);
        if (relay !== undefined && relay !== value) fail('only one relay: scope per connection', raw);
        relay = value;
        break;
      }
      case 'filter': {
        const m = /^([a-z_][a-z0-9_$]{0,62})\.([a-z_][a-z0-9_$]{0,62})\.([a-z_][a-z0-9_$]{0,62})=(.{0,200})$/.exec(value);
        if (!m) fail(`${JSON.stringify(raw)} must be filter:<schema>.<table>.<column>=<value>`, raw);
        else filters.push({ table: `${m[1]}.${m[2]}`, column: m[3] as string, value: m[4] as string });
        break;
      }
      default:
        fail(`scope ${JSON.stringify(name)} is not supported yet`, raw);
    }
  }

  if (!readAll && reads.size === 0) fail('at least one read: scope is required (read:<table> or read:*)');
  for (const rule of target.grammar) {
    if (rule.required && !normalized.some((s) => s.startsWith(`${rule.name}:`))) fail(`a ${rule.name}: scope is required`);
  }
  for (const f of filters) {
    if (readAll || !reads.has(f.table)) fail(`filter on ${f.table} needs read:${f.table} in the same connection`);
  }
  return { read: readAll ? 'all' : reads, periods, relay, filters, normalized };
}
