/**
 * Resolving the agent's table references (RangeVar nodes) against a connection's policy.
 *
 * Order matters: a system schema (`pg_catalog`, `information_schema`, `pg_toast`, `pg_temp*`,
 * `pg_toast_temp*`, any `pg_*`), in any letter case or quoting, is refused BEFORE the allowed
 * tables are looked up, so no scope (however it was created) can make a catalog readable. An
 * allowed table is always read through its template, which names the scope's own schema, so an
 * unqualified name never reaches a catalog relation through `search_path`.
 *
 * `orders` and `public.orders` (or `<schema>.orders` for any schema the policy qualifies with)
 * are the same table when the policy says so: a qualified name is looked up as written, and under
 * a schema the policy allows as the unqualified name.
 *
 * A table outside the scopes is `table_not_in_scope` when the target's tables are known and it is
 * one of them, or when they are not known (`known: null`, a customer's database: whether it
 * exists there is never said); `unknown_table` only when svc knows the target has no such table.
 */
import { violation } from './errors.js';
import type { Obj } from './grammar.js';
import type { Resolver, Template } from './rewrite.js';

/** the relation part of a policy (structural, so index.ts's SqlPolicy / ScopedTable fit) */
export interface ResolverPolicy {
  readonly allowed: ReadonlyMap<string, { readonly name: string; readonly schema: string; readonly table: string; readonly predicate: string | null }>;
  /** every table of the target, or null when svc does not know them (a customer's database) */
  readonly known: readonly string[] | null;
  readonly schemas: readonly string[];
}

const SYSTEM_SCHEMAS = new Set(['pg_catalog', 'information_schema', 'pg_toast']);

/** A PostgreSQL system schema, in any letter case (quoted or not): pg_catalog, information_schema, pg_toast, pg_temp*, pg_toast_temp*, any pg_*. */
export function isPgSystemSchema(schema: string): boolean {
  const s = schema.toLowerCase();
  return SYSTEM_SCHEMAS.has(s) || s.startsWith('pg_');
}

export function makeResolver<E extends ResolverPolicy['allowed'] extends ReadonlyMap<string, infer V> ? V : never>(
  policy: ResolverPolicy,
  templateFor: (entry: E) => Template,
): Resolver {
  const readable = (): string => {
    const names = [...new Set([...policy.allowed.values()].map((e) => e.name))].sort();
    return names.length ? `readable tables: ${names.join(', ')}` : 'this connection cannot read any table';
  };
  // a target whose tables svc does not know (a customer's database): every table outside the
  // scopes is reported as out of scope, so a refusal never tells whether it exists at the source
  const known = (n: string): boolean => policy.known === null || policy.known.includes(n);
  const found = (key: string): { template: Template; name: string } | undefined => {
    const entry = policy.allowed.get(key);
    if (!entry || isPgSystemSchema(entry.schema)) return undefined;
    return { template: templateFor(entry as E), name: entry.name };
  };
  // every schema a table name may be qualified with: the policy's, and those of the scoped tables
  const qualifiers = new Set<string>(policy.schemas);
  for (const e of policy.allowed.values()) if (!isPgSystemSchema(e.schema)) qualifiers.add(e.schema);

  return {
    resolve(rv: Obj) {
      const catalog = rv['catalogname'] as string | undefined;
      const schema = rv['schemaname'] as string | undefined;
      const rel = rv['relname'] as string;
      const written = [catalog, schema, rel].filter((p) => p !== undefined).join('.');
      const detail = { table: written };

      // system catalogs first: no scope can make them readable
      if (schema !== undefined && isPgSystemSchema(schema)) {
        throw violation(`table "${written}" is in the system schema ${schema} and cannot be read; ${readable()}`, { reason: 'system_catalog', ...detail });
      }
      if (catalog !== undefined) {
        throw violation(`table "${written}": database-qualified names are not allowed; ${readable()}`, { reason: 'qualified_name', ...detail });
      }
      if (schema !== undefined) {
        const hit = found(`${schema}.${rel}`) ?? (policy.schemas.includes(schema) ? found(rel) : undefined);
        if (hit) return hit;
        if (!qualifiers.has(schema)) {
          const allowedSchemas = qualifiers.size ? `tables can be qualified only with ${[...qualifiers].sort().join(', ')}` : 'use unqualified table names';
          throw violation(`table "${written}" is not in this connection's scopes: schema "${schema}" is not readable here (${allowedSchemas}); ${readable()}`, {
            reason: 'schema_not_allowed',
            ...detail,
          });
        }
        if (known(rel) || known(`${schema}.${rel}`)) {
          throw violation(`table "${written}" is not in this connection's scopes; ${readable()}`, { reason: 'table_not_in_scope', ...detail });
        }
        throw violation(`table "${written}" does not exist in this target; ${readable()}`, { reason: 'unknown_table', ...detail });
      }
      const hit = found(rel);
      if (hit) return hit;
      if (rel.toLowerCase().startsWith('pg_')) {
        throw violation(`table "${written}" is a system catalog and cannot be read; ${readable()}`, { reason: 'system_catalog', ...detail });
      }
      if (known(rel)) {
        throw violation(`table "${written}" is not in this connection's scopes; ${readable()}`, { reason: 'table_not_in_scope', ...detail });
      }
      throw violation(`table "${written}" does not exist in this target; ${readable()}`, { reason: 'unknown_table', ...detail });
    },
  };
}
