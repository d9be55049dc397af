/** The 8 live targets (CONTRACT.md "Catalogue"), each queryable through its connector (control-plane/live/). */

export interface LiveTableInfo {
  readonly name: string;
  readonly description: string;
}

export interface LiveTargetDef {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  /** the credential kind it needs; null for the relay */
  readonly credentialKind: string | null;
  /** fixed tables for API connectors; null for databases (any table the credential can read) */
  readonly tables: readonly LiveTableInfo[] | null;
  /** databases accept `read:<schema>.<table>` */
  readonly database: boolean;
  /** whether the target supports `period:` (API connectors map it onto created-time filters) */
  readonly period: boolean;
}

const t = (name: string, description: string): LiveTableInfo => ({ name, description });

export const LIVE_TARGETS: readonly LiveTargetDef[] = [
  {
    id: 'postgres-relay',
    name: 'PostgreSQL through svc-relay',
    description: 'A customer-owned PostgreSQL reached through an outbound mutual-TLS tunnel held by svc-relay. Requires a relay:<relay_id> scope.',
    credentialKind: null,
    tables: null,
    database: true,
    period: false,
  },
  {
    id: 'postgres',
    name: 'PostgreSQL (bring your own credentials)',
    description: 'A PostgreSQL server the control plane can reach, using the organization’s registered connection URL.',
    credentialKind: 'postgres',
    tables: null,
    database: true,
    period: false,
  },
  {
    id: 'mysql',
    name: 'MySQL / MariaDB (bring your own credentials)',
    description: 'A MySQL or MariaDB server the control plane can reach, using the organization’s registered connection URL.',
    credentialKind: 'mysql',
    tables: null,
    database: true,
    period: false,
  },
  {
    id: 'stripe',
    name: 'Stripe (restricted key)',
    description: 'Payment-provider objects as SQL tables, fetched with a restricted read-only key (rk_…).',
    credentialKind: 'stripe',
    tables: [
      t('customers', 'Customers'),
      t('charges', 'Charges'),
      t('payment_intents', 'Payment intents'),
      t('invoices', 'Invoices'),
      t('subscriptions', 'Subscriptions'),
      t('refunds', 'Refunds'),
      t('balance_transactions', 'Balance transactions'),
    ],
    database: false,
    period: true,
  },
  {
    id: 'github',
    name: 'GitHub',
    description: 'Repositories, issues and pull requests as SQL tables, with a fine-grained read-only token.',
    credentialKind: 'github',
    tables: [t('repositories', 'Repositories'), t('issues', 'Issues'), t('pull_requests', 'Pull requests')],
    database: false,
    period: true,
  },
  {
    id: 'hubspot',
    name: 'HubSpot',
    description: 'CRM contacts, companies and deals as SQL tables, with a private-app token.',
    credentialKind: 'hubspot',
    tables: [t('contacts', 'Contacts'), t('companies', 'Companies'), t('deals', 'Deals')],
    database: false,
    period: true,
  },
  {
    id: 'salesforce',
    name: 'Salesforce',
    description: 'Accounts, contacts and opportunities as SQL tables, with an OAuth access token.',
    credentialKind: 'salesforce',
    tables: [t('accounts', 'Accounts'), t('contacts', 'Contacts'), t('opportunities', 'Opportunities')],
    database: false,
    period: true,
  },
  {
    id: 'http-files',
    name: 'CSV / JSON files over HTTPS',
    description: 'CSV or JSON files at HTTPS URLs (optionally with a bearer token) queried as tables.',
    credentialKind: 'http-files',
    tables: null,
    database: false,
    period: false,
  },
];
