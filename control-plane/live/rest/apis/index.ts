/**
 * The four declarative API specs, and their tables as the catalogue shows them: each table's name
 * and description, and each column's name, SQL type and description. A leaf: it loads only the
 * spec files and ../spec.ts (whose one import is a type), never the connectors, the query engines
 * or the HTTP client, so control-plane/catalogue reads the column lists from here and they cannot
 * drift from what a query really gets.
 */
import type { SqlType } from '../spec.js';
import { GITHUB } from './github.js';
import { HUBSPOT } from './hubspot.js';
import { SALESFORCE } from './salesforce.js';
import { STRIPE } from './stripe.js';

export { GITHUB, HUBSPOT, SALESFORCE, STRIPE };

export const API_SPECS = [STRIPE, GITHUB, HUBSPOT, SALESFORCE] as const;

export interface ApiColumnInfo {
  readonly name: string;
  readonly type: SqlType;
  readonly description: string;
}

export interface ApiTableInfo {
  readonly name: string;
  readonly description: string;
  readonly columns: readonly ApiColumnInfo[];
}

/** The tables of the API target `targetId` (stripe, github, hubspot, salesforce), or null for any other id. */
export function apiTables(targetId: string): readonly ApiTableInfo[] | null {
  const spec = API_SPECS.find((s) => s.id === targetId);
  if (!spec) return null;
  return spec.tables.map((t) => ({
    name: t.name,
    description: t.description,
    columns: t.columns.map((c) => ({ name: c.name, type: c.type, description: c.description })),
  }));
}
