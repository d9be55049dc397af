/**
 * The catalogue: 20 targets (12 demo, 8 live) and 6 packs, with each target's scope grammar,
 * tables and tiers. Static: built once from the dataset and connector definitions.
 */
import { DATASETS, PACKS } from '../demo/datasets/index.js';
import type { DatasetDef, PackDef } from '../demo/types.js';
import { LIVE_TARGETS, type LiveTargetDef } from './live.js';
import type { ScopeRule, ScopeTarget } from './scopes.js';

export { parseScopes, periodInterval, grammarText, isSystemSchema, POSTGRES_SYSTEM_SCHEMAS, MYSQL_SYSTEM_SCHEMAS, type ParsedScopes, type Interval, type ScopeRule } from './scopes.js';
export { LIVE_TARGETS, type LiveTargetDef } from './live.js';

export interface ColumnInfo {
  readonly name: string;
  readonly type: string;
  readonly description: string;
}

export interface TableInfo {
  readonly name: string;
  readonly description: string;
  /** the column `period:` scopes restrict, or null */
  readonly time_column: string | null;
  readonly columns: readonly ColumnInfo[];
}

/** Where a target's statements run (control-plane/query/backends.ts). */
export type BackendKind = 'demo' | 'relay' | 'connector';

export interface Target extends ScopeTarget {
  readonly id: string;
  readonly kind: 'demo' | 'live';
  /** the demo engines, the relay tunnel, or the target's live connector */
  readonly backend: BackendKind;
  readonly name: string;
  readonly description: string;
  readonly pack: string | null;
  readonly credential_kind: string | null;
  /** whether queries can run on it in this version */
  readonly queryable: boolean;
  readonly tables: readonly TableInfo[];
  readonly tiers: readonly string[];
  /** demo only */
  readonly dataset?: DatasetDef;
  readonly live?: LiveTargetDef;
}

export interface Pack {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly targets: readonly string[];
}

/** the tiers of every target, demo and live alike */
const TIERS = ['container'] as const;

const READ_DEMO: ScopeRule = {
  name: 'read',
  pattern: 'read:<table> | read:*',
  description: 'Tables the connection may read; read:* allows every table of the target.',
  required: true,
  examples: ['read:*'],
};
const PERIOD: ScopeRule = {
  name: 'period',
  pattern: 'period:<YYYY> | period:<YYYY>-Q<1-4> | period:<YYYY>-<MM>',
  description:
    "Restricts rows to a half-open UTC interval on each table's time column; several period scopes are a union. Tables without a time column are not restricted.",
  required: false,
  examples: ['period:2024', 'period:2024-Q1', 'period:2024-03'],
};

function demoTarget(d: DatasetDef): Target {
  const tables = d.tables.map<TableInfo>((t) => ({
    name: t.name,
    description: t.description,
    time_column: t.timeColumn ?? null,
    columns: t.columns.map((c) => ({ name: c.name, type: c.type, description: c.description })),
  }));
  const first = tables[0]?.name ?? 'table';
  return {
    id: d.targetId,
    kind: 'demo',
    backend: 'demo',
    name: d.name,
    description: d.description,
    pack: d.pack,
    credential_kind: null,
    queryable: true,
    grammar: [{ ...READ_DEMO, examples: [`read:${first}`, 'read:*'] }, PERIOD],
    tableNames: tables.map((t) => t.name),
    tables,
    tiers: TIERS,
    dataset: d,
  };
}

/** how a PostgreSQL database's scopes spell names (catalogue/scopes.ts readPgPath) */
const PG_NAMES = 'Names fold to lower case as in SQL; a name with capitals or other characters is double-quoted, as in SQL (read:public."Sales").';

function filterRule(schema: string, pgNames: boolean): ScopeRule {
  return {
    name: 'filter',
    pattern: 'filter:<schema>.<table>.<column>=<value> | filter:<table>.<column>=<value>',
    description: `Only rows of that table whose column equals the value (several filters on one table all apply); the table must also be in a read: scope. System schemas can never be named.${pgNames ? ' Names fold to lower case unless double-quoted, as in SQL (filter:"Sales"."Region"=eu).' : ''}`,
    required: false,
    examples: [`filter:${schema}.orders.tenant_id=42`],
  };
}

function liveTarget(l: LiveTargetDef): Target {
  const grammar: ScopeRule[] = [];
  if (l.id === 'postgres-relay') {
    grammar.push({ name: 'relay', pattern: 'relay:<relay_id>', description: "The organization's relay that carries the queries.", required: true, examples: ['relay:rly_…'] });
    grammar.push({ name: 'read', pattern: 'read:<schema>.<table> | read:<table>', description: `Tables the connection may read (an unqualified name means public.<table>). ${PG_NAMES}`, required: true, examples: ['read:public.orders', 'read:public."Sales"'] });
    grammar.push(filterRule('public', true));
  } else if (l.database) {
    const schema = l.id === 'mysql' ? 'shop' : 'public';
    const unqualified = l.id === 'mysql' ? "a table of the credential's database" : 'public.<table>';
    const pg = l.id === 'mysql' ? '' : ` ${PG_NAMES}`;
    grammar.push({ name: 'read', pattern: 'read:<schema>.<table> | read:<table>', description: `Tables the connection may read (an unqualified name means ${unqualified}); read:* is not available on databases.${pg}`, required: true, examples: [`read:${schema}.orders`, ...(pg ? [`read:${schema}."Sales"`] : [])] });
    grammar.push(filterRule(schema, l.id !== 'mysql'));
  } else grammar.push({ ...READ_DEMO, examples: l.tables?.[0] ? [`read:${l.tables[0].name}`, 'read:*'] : ['read:*'] });
  if (l.period) grammar.push({ ...PERIOD, description: "Restricts objects to a half-open UTC interval on their creation time; out-of-period objects are never fetched." });
  return {
    id: l.id,
    kind: 'live',
    backend: l.backend,
    name: l.name,
    description: l.description,
    pack: null,
    credential_kind: l.credentialKind,
    queryable: true,
    grammar,
    tableNames: l.tables ? l.tables.map((t) => t.name) : null,
    ...(l.id === 'postgres-relay' || l.id === 'postgres'
      ? { systemSchemas: 'postgres' as const, defaultSchema: 'public' }
      : l.id === 'mysql'
        ? { systemSchemas: 'mysql' as const, defaultSchema: null, preserveCase: true }
        : {}),
    tables: (l.tables ?? []).map((t) => ({
      name: t.name,
      description: t.description,
      time_column: l.period && t.columns.some((c) => c.name === 'created') ? 'created' : null,
      columns: t.columns.map((c) => ({ name: c.name, type: c.type, description: c.description })),
    })),
    tiers: TIERS,
    live: l,
  };
}

export class Catalogue {
  readonly targets: readonly Target[];
  readonly packs: readonly Pack[];
  private readonly byId: ReadonlyMap<string, Target>;

  constructor(datasets: readonly DatasetDef[] = DATASETS, packs: readonly PackDef[] = PACKS) {
    this.targets = [...datasets.map(demoTarget), ...LIVE_TARGETS.map(liveTarget)];
    this.packs = packs.map((p) => ({ id: p.id, name: p.name, description: p.description, targets: [...p.targets] }));
    this.byId = new Map(this.targets.map((t) => [t.id, t]));
  }

  target(id: string): Target | undefined {
    return this.byId.get(id);
  }

  get datasets(): readonly DatasetDef[] {
    return this.targets.flatMap((t) => (t.dataset ? [t.dataset] : []));
  }
}

/** The public record of a target (what the API returns): its scope grammar is served as `scopes`. */
export function targetRecord(t: Target): Record<string, unknown> {
  return {
    id: t.id,
    kind: t.kind,
    name: t.name,
    description: t.description,
    pack: t.pack,
    credential_kind: t.credential_kind,
    queryable: t.queryable,
    scopes: t.grammar,
    tables: t.tables,
    tiers: t.tiers,
  };
}
