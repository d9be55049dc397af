/**
 * Salesforce REST (https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta): SOQL through
 * `GET /services/data/v60.0/query?q=…`, the next batch at `nextRecordsUrl` until `done`, the
 * creation-time window as `WHERE CreatedDate >= … AND CreatedDate < …` and the cap as `LIMIT`.
 * Errors: `[{"message": "…", "errorCode": "INVALID_SESSION_ID"}]`. Requests go to the credential's
 * `instance_url` (or SVC_SALESFORCE_API_BASE when the operator set it).
 */
import type { ApiSpec, ColumnSpec, TableSpec } from '../spec.js';
import { arrayAt, endpoint, path, shortCode, timeOf, withQuery } from '../spec.js';

export const SALESFORCE_API_VERSION = 'v60.0';

const f = (name: string, type: ColumnSpec['type'], description: string, field: string): ColumnSpec => ({
  name,
  type,
  description,
  get: (o) => (type === 'timestamptz' ? timeOf(o[field], 'iso') : o[field]),
});

/**
 * A SOQL datetime literal (unquoted ISO 8601 in UTC, four digits of year, whole seconds): the end
 * of period:9999, 10000-01-01, is written as the last second of 9999 (so `<` leaves out that one
 * second).
 */
const soqlTime = (ms: number): string => new Date(Math.min(ms, Date.UTC(9999, 11, 31, 23, 59, 59))).toISOString().replace(/\.\d{3}Z$/, 'Z');

function sobject(name: string, object: string, description: string, fields: [string, ColumnSpec['type'], string, string][]): TableSpec {
  const columns: ColumnSpec[] = [
    f('id', 'text', 'Record id', 'Id'),
    ...fields.map(([n, t, d, field]) => f(n, t, d, field)),
    f('created', 'timestamptz', 'When the record was created (UTC); period: scopes restrict this column', 'CreatedDate'),
    f('last_modified', 'timestamptz', 'Last modification', 'LastModifiedDate'),
  ];
  const select = ['Id', ...fields.map((x) => x[3]), 'CreatedDate', 'LastModifiedDate'].join(', ');
  return {
    name,
    description,
    columns,
    first: (base, window, pageSize) => {
      const where = window ? ` WHERE CreatedDate >= ${soqlTime(window.start)} AND CreatedDate < ${soqlTime(window.end)}` : '';
      return { method: 'GET', url: withQuery(endpoint(base, `/services/data/${SALESFORCE_API_VERSION}/query`), { q: `SELECT ${select} FROM ${object}${where} ORDER BY CreatedDate LIMIT ${pageSize}` }) };
    },
    items: (body) => arrayAt(body, 'records'),
    next: (base, _previous, res) => {
      const next = path(res.body, 'nextRecordsUrl');
      if (path(res.body, 'done') === true || typeof next !== 'string' || !next.startsWith('/')) return null;
      const url = new URL(next, base.origin);
      return { method: 'GET', url };
    },
    created: (o) => timeOf(o['CreatedDate'], 'iso'),
  };
}

export const SALESFORCE: ApiSpec = {
  id: 'salesforce',
  provider: 'Salesforce',
  defaultBase: null,
  // the LIMIT of the SOQL statement: Salesforce returns it in batches of up to 2000 itself
  maxPageSize: 50_000,
  base: (configured, credential) => new URL(configured ?? String(credential.options['instance_url'])),
  headers: (c) => ({ authorization: `Bearer ${c.secret}`, accept: 'application/json' }),
  errorCode: (body) => shortCode(Array.isArray(body) ? path(body[0], 'errorCode') : path(body, 'errorCode')),
  tables: [
    sobject('accounts', 'Account', 'Accounts', [
      ['name', 'text', 'Name', 'Name'],
      ['type', 'text', 'Type', 'Type'],
      ['industry', 'text', 'Industry', 'Industry'],
      ['billing_city', 'text', 'Billing city', 'BillingCity'],
      ['billing_country', 'text', 'Billing country', 'BillingCountry'],
      ['annual_revenue', 'numeric', 'Annual revenue', 'AnnualRevenue'],
      ['number_of_employees', 'bigint', 'Employees', 'NumberOfEmployees'],
      ['owner_id', 'text', 'Owner user id', 'OwnerId'],
    ]),
    sobject('contacts', 'Contact', 'Contacts', [
      ['account_id', 'text', 'Account id', 'AccountId'],
      ['first_name', 'text', 'First name', 'FirstName'],
      ['last_name', 'text', 'Last name', 'LastName'],
      ['email', 'text', 'Email', 'Email'],
      ['title', 'text', 'Title', 'Title'],
      ['phone', 'text', 'Phone', 'Phone'],
    ]),
    sobject('opportunities', 'Opportunity', 'Opportunities', [
      ['account_id', 'text', 'Account id', 'AccountId'],
      ['name', 'text', 'Name', 'Name'],
      ['stage_name', 'text', 'Stage', 'StageName'],
      ['amount', 'numeric', 'Amount', 'Amount'],
      ['probability', 'numeric', 'Probability (%)', 'Probability'],
      ['close_date', 'text', 'Close date (YYYY-MM-DD)', 'CloseDate'],
      ['is_closed', 'boolean', 'Whether closed', 'IsClosed'],
      ['is_won', 'boolean', 'Whether won', 'IsWon'],
    ]),
  ],
};
