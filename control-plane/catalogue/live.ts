/**
 * The 8 live targets (docs/credentials-and-live-targets.md), each queryable through its connector
 * (control-plane/live/). The API targets' tables and columns are read from the declarative REST
 * specs (live/rest/apis/index.ts, a leaf that loads no connector code), so the catalogue shows
 * exactly the columns a query gets.
 */
import { apiTables, type ApiTableInfo } from '../live/rest/apis/index.js';

export type LiveTableInfo = ApiTableInfo;

export interface LiveTargetDef {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  /** the credential kind it needs; null for the relay */
  readonly credentialKind: string | null;
  /** where its statements run: the relay tunnel, or its live connector */
  readonly backend: 'relay' | 'connector';
  /** fixed tables for API connectors; null for databases (any table the credential can read) */
  readonly tables: readonly LiveTableInfo[] | null;
  /** databases accept `read:<schema>.<table>` */
  readonly database: boolean;
  /** whether the target supports `period:` (API connectors map it onto created-time filters) */
  readonly period: boolean;
}

/** the spec's tables of an API target (its id is also the spec's id) */
function tablesOf(id: string): readonly LiveTableInfo[] {
  const tables = apiTables(id);
  if (!tables) throw new Error(`no REST spec for the live target ${id}`);
  return tables;
}

export const LIVE_TARGETS: readonly LiveTargetDef[] = [
  {
    id: 'postgres-relay',
    name: 'PostgreSQL through svc-relay',
    description: 'A customer-owned PostgreSQL reached through an outbound mutual-TLS tunnel held by svc-relay. Requires a relay:<relay_id> scope.',
    credentialKind: null,
    backend: 'relay',
    tables: null,
    database: true,
    period: false,
  },
  {
    id: 'postgres',
    name: 'PostgreSQL (bring your own credentials)',
    description: 'A PostgreSQL server the control plane can reach, using the organization’s registered connection URL.',
    credentialKind: 'postgres',
    backend: 'connector',
    tables: null,
    database: true,
    period: false,
  },
  {
    id: 'mysql',
    name: 'MySQL / MariaDB (bring your own credentials)',
    description: 'A MySQL or MariaDB server the control plane can reach, using the organization’s registered connection URL.',
    credentialKind: 'mysql',
    backend: 'connector',
    tables: null,
    database: true,
    period: false,
  },
  {
    id: 'stripe',
    name: 'Stripe (restricted key)',
    description: 'Payment-provider objects as SQL tables, fetched with a restricted read-only key (rk_…).',
    credentialKind: 'stripe',
    backend: 'connector',
    tables: tablesOf('stripe'),
    database: false,
    period: true,
  },
  {
    id: 'github',
    name: 'GitHub',
    description: 'Repositories, issues and pull requests as SQL tables, with a fine-grained read-only token.',
    credentialKind: 'github',
    backend: 'connector',
    tables: tablesOf('github'),
    database: false,
    period: true,
  },
  {
    id: 'hubspot',
    name: 'HubSpot',
    description: 'CRM contacts, companies and deals as SQL tables, with a private-app token.',
    credentialKind: 'hubspot',
    backend: 'connector',
    tables: tablesOf('hubspot'),
    database: false,
    period: true,
  },
  {
    id: 'salesforce',
    name: 'Salesforce',
    description: 'Accounts, contacts and opportunities as SQL tables, with an OAuth access token.',
    credentialKind: 'salesforce',
    backend: 'connector',
    tables: tablesOf('salesforce'),
    database: false,
    period: true,
  },
  {
    id: 'http-files',
    name: 'CSV / JSON files over HTTPS',
    description: 'CSV or JSON files at HTTPS URLs (optionally with a bearer token) queried as tables.',
    credentialKind: 'http-files',
    backend: 'connector',
    tables: null,
    database: false,
    period: false,
  },
];
