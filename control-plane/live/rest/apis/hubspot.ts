/**
 * HubSpot CRM v3 (https://developers.hubspot.com/docs/api/crm): `GET /crm/v3/objects/<type>` with
 * `limit` (≤ 100), `properties` and cursor paging by `paging.next.after`; with a creation-time
 * window, `POST /crm/v3/objects/<type>/search` filtering `createdate` GTE/LT (epoch ms) with the
 * same `after` cursor in the body. Errors: `{"status": "error", "category": "…", "message": "…"}`.
 */
import type { ApiSpec, ColumnSpec, PageRequest, TableSpec } from '../spec.js';
import { arrayAt, col, endpoint, isObj, path, shortCode, timeOf, withQuery } from '../spec.js';

const prop = (name: string, type: ColumnSpec['type'], description: string, property: string = name): ColumnSpec => ({
  name,
  type,
  description,
  get: (o) => path(o, 'properties', property),
});

function crm(name: string, objectType: string, description: string, properties: ColumnSpec[], propertyNames: string[]): TableSpec {
  const after = (res: unknown): string | undefined => {
    const v = path(res, 'paging', 'next', 'after');
    return typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined;
  };
  return {
    name,
    description,
    columns: [
      col('id', 'text', 'Record id'),
      ...properties,
      { name: 'created', type: 'timestamptz', description: 'When the record was created (UTC); period: scopes restrict this column', get: (o) => timeOf(o['createdAt'], 'iso') },
      { name: 'updated', type: 'timestamptz', description: 'Last modification', get: (o) => timeOf(o['updatedAt'], 'iso') },
      col('archived', 'boolean', 'Whether archived'),
    ],
    first: (base, window, pageSize): PageRequest =>
      window === null
        ? { method: 'GET', url: withQuery(endpoint(base, `/crm/v3/objects/${objectType}`), { limit: pageSize, properties: propertyNames.join(','), archived: 'false' }) }
        : {
            method: 'POST',
            url: endpoint(base, `/crm/v3/objects/${objectType}/search`),
            body: {
              filterGroups: [
                {
                  filters: [
                    { propertyName: 'createdate', operator: 'GTE', value: String(window.start) },
                    { propertyName: 'createdate', operator: 'LT', value: String(window.end) },
                  ],
                },
              ],
              sorts: [{ propertyName: 'createdate', direction: 'ASCENDING' }],
              properties: propertyNames,
              limit: pageSize,
            },
          },
    items: (body) => arrayAt(body, 'results'),
    next: (_base, previous, res, pageSize) => {
      const cursor = after(res.body);
      if (cursor === undefined) return null;
      if (previous.method === 'GET') return { method: 'GET', url: withQuery(previous.url, { after: cursor, limit: pageSize }) };
      return { method: 'POST', url: previous.url, body: { ...(isObj(previous.body) ? previous.body : {}), after: cursor, limit: pageSize } };
    },
    created: (o) => timeOf(o['createdAt'], 'iso'),
  };
}

export const HUBSPOT: ApiSpec = {
  id: 'hubspot',
  provider: 'HubSpot',
  defaultBase: 'https://api.hubapi.com',
  maxPageSize: 100,
  base: (configured) => new URL(configured ?? 'https://api.hubapi.com'),
  headers: (c) => ({ authorization: `Bearer ${c.secret}`, accept: 'application/json' }),
  errorCode: (body) => shortCode(path(body, 'category')),
  tables: [
    crm(
      'contacts',
      'contacts',
      'CRM contacts',
      [
        prop('email', 'text', 'Email'),
        prop('firstname', 'text', 'First name'),
        prop('lastname', 'text', 'Last name'),
        prop('phone', 'text', 'Phone'),
        prop('company', 'text', 'Company name'),
        prop('lifecyclestage', 'text', 'Lifecycle stage'),
      ],
      ['email', 'firstname', 'lastname', 'phone', 'company', 'lifecyclestage', 'createdate'],
    ),
    crm(
      'companies',
      'companies',
      'CRM companies',
      [
        prop('name', 'text', 'Name'),
        prop('domain', 'text', 'Web domain'),
        prop('industry', 'text', 'Industry'),
        prop('city', 'text', 'City'),
        prop('country', 'text', 'Country'),
        prop('numberofemployees', 'bigint', 'Number of employees'),
        prop('annualrevenue', 'numeric', 'Annual revenue'),
      ],
      ['name', 'domain', 'industry', 'city', 'country', 'numberofemployees', 'annualrevenue', 'createdate'],
    ),
    crm(
      'deals',
      'deals',
      'CRM deals',
      [
        prop('dealname', 'text', 'Deal name'),
        prop('amount', 'numeric', 'Amount'),
        prop('dealstage', 'text', 'Deal stage'),
        prop('pipeline', 'text', 'Pipeline'),
        { name: 'closedate', type: 'timestamptz', description: 'Close date', get: (o) => timeOf(path(o, 'properties', 'closedate'), 'iso') },
      ],
      ['dealname', 'amount', 'dealstage', 'pipeline', 'closedate', 'createdate'],
    ),
  ],
};
