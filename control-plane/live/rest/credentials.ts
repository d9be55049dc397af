/**
 * The credential kinds of the REST targets (docs/credentials-and-live-targets.md). Validation messages say
 * what is expected and never contain the secret or any part of it.
 */
import { X509Certificate } from 'node:crypto';
import { ApiError } from '../../errors.js';
import type { CredentialKindDef } from '../types.js';
import type { FileSpec } from './files.js';

const bad = (field: string, message: string): never => {
  throw new ApiError('invalid_request', message, { field });
};

function noOptions(kind: string, options: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const extra = Object.keys(options);
  if (extra.length > 0) bad(`options.${extra[0]}`, `${kind} credentials take no options (got ${extra.map((k) => JSON.stringify(k.slice(0, 40))).join(', ')})`);
  return {};
}

const PRINTABLE = /^[\x21-\x7e]+$/;

export const STRIPE_KIND: CredentialKindDef = {
  kind: 'stripe',
  targets: ['stripe'],
  description: 'A Stripe restricted API key with read permissions on the objects to query.',
  secret: { description: 'a restricted read-only key: rk_test_… or rk_live_…', example: 'rk_test_51Hx…' },
  options: [],
  validation: 'must start with rk_test_ or rk_live_ followed by letters and digits; full secret keys (sk_…) and publishable keys (pk_…) are refused',
  validate(secret, options) {
    if (/^sk_/.test(secret)) {
      bad('secret', 'a full secret key (sk_…) can write and is refused: create a restricted key (rk_test_… or rk_live_…) with read permissions only, in the Stripe dashboard under Developers → API keys');
    }
    if (/^pk_/.test(secret)) bad('secret', 'a publishable key (pk_…) cannot read account data: use a restricted key (rk_test_… or rk_live_…) with read permissions');
    if (!/^rk_(test|live)_[A-Za-z0-9]{8,255}$/.test(secret)) bad('secret', 'expected a restricted key: rk_test_… or rk_live_… followed by letters and digits');
    return noOptions('stripe', options);
  },
};

export const GITHUB_KIND: CredentialKindDef = {
  kind: 'github',
  targets: ['github'],
  description: 'A GitHub token that can read the repositories, issues and pull requests to query (a fine-grained token with read-only access is best).',
  secret: { description: 'a token: github_pat_… (fine-grained), ghp_… (classic), gho_… (OAuth), ghu_… (app user) or ghs_… (app installation)', example: 'github_pat_11AB…' },
  options: [],
  validation: 'must be a GitHub token: github_pat_, ghp_, gho_, ghu_ or ghs_ followed by letters, digits (and _ for github_pat_); refresh tokens (ghr_) are refused',
  validate(secret, options) {
    if (/^ghr_/.test(secret)) bad('secret', 'a refresh token (ghr_…) is not an access token: register the access token');
    if (!/^(github_pat_[A-Za-z0-9_]{20,255}|gh[pous]_[A-Za-z0-9]{20,255})$/.test(secret)) {
      bad('secret', 'expected a GitHub token: github_pat_… (fine-grained), ghp_… (classic), gho_…, ghu_… or ghs_…');
    }
    return noOptions('github', options);
  },
};

export const HUBSPOT_KIND: CredentialKindDef = {
  kind: 'hubspot',
  targets: ['hubspot'],
  description: 'A HubSpot private-app access token with the crm.objects.contacts.read, crm.objects.companies.read and crm.objects.deals.read scopes.',
  secret: { description: 'a private-app token: pat-<region>-<uuid>', example: 'pat-na1-0a1b2c3d-…' },
  options: [],
  validation: 'must be a private-app token pat-<region>-<uuid>; legacy API keys are refused (HubSpot retired them)',
  validate(secret, options) {
    if (!/^pat-[a-z0-9]{2,8}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(secret)) {
      bad('secret', 'expected a HubSpot private-app token of the form pat-<region>-<uuid> (e.g. pat-na1-…); legacy API keys are not accepted');
    }
    return noOptions('hubspot', options);
  },
};

/** Hosts a Salesforce instance_url may name. */
export const SALESFORCE_HOST_SUFFIXES = ['.salesforce.com', '.force.com', '.cloudforce.com', '.salesforce.mil'] as const;

export const SALESFORCE_KIND: CredentialKindDef = {
  kind: 'salesforce',
  targets: ['salesforce'],
  description: 'A Salesforce OAuth access token of a user (or integration user) that can read accounts, contacts and opportunities, and the org’s instance URL.',
  secret: { description: 'an OAuth access token (session id): 00D…!…', example: '00D5g000000AbCd!AQ4AQ…' },
  options: [{ name: 'instance_url', required: true, description: 'the org’s instance URL from the OAuth response, e.g. https://acme.my.salesforce.com' }],
  validation: `the token must look like 00D<org id>!<token>; instance_url must be an https URL on ${SALESFORCE_HOST_SUFFIXES.join(', ')} with no path, query or user info`,
  validate(secret, options) {
    if (!/^00D[A-Za-z0-9]{12,15}![A-Za-z0-9._\-]{20,1024}$/.test(secret)) bad('secret', 'expected a Salesforce access token of the form 00D<org id>!<token>');
    const extra = Object.keys(options).filter((k) => k !== 'instance_url');
    if (extra.length > 0) bad(`options.${extra[0]}`, 'salesforce credentials take only options.instance_url');
    const raw = options['instance_url'];
    if (typeof raw !== 'string' || raw.length > 300) return bad('options.instance_url', 'options.instance_url is required: the https instance URL of the org, e.g. https://acme.my.salesforce.com');
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      return bad('options.instance_url', 'options.instance_url is not a valid URL');
    }
    const host = u.hostname.toLowerCase();
    if (u.protocol !== 'https:' || u.username || u.password || u.search || u.hash || (u.pathname !== '/' && u.pathname !== '') || u.port !== '') {
      bad('options.instance_url', 'options.instance_url must be a plain https origin such as https://acme.my.salesforce.com (no path, query, port or user info)');
    }
    if (!SALESFORCE_HOST_SUFFIXES.some((s) => host.endsWith(s))) bad('options.instance_url', `options.instance_url must be a Salesforce host (${SALESFORCE_HOST_SUFFIXES.join(', ')})`);
    return { instance_url: u.origin };
  },
};

export const MAX_FILES = 50;
const TABLE = /^[a-z_][a-z0-9_]{0,62}$/;

/** most characters of an http-files `options.ca` (a few PEM certificates) */
export const MAX_FILES_CA_CHARS = 65_536;
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * The validated `options.ca` of an http-files credential (also re-checked at query time): PEM
 * certificates of CAs trusted for its file servers besides the system trust store; undefined
 * when not given.
 */
export function filesCa(options: Readonly<Record<string, unknown>>): string | undefined {
  const ca = options['ca'];
  if (ca === undefined) return undefined;
  const blocks = typeof ca === 'string' && ca.length <= MAX_FILES_CA_CHARS ? (ca.match(PEM_CERTIFICATE) ?? []) : [];
  if (blocks.length === 0) return bad('options.ca', `options.ca must be PEM certificate text (-----BEGIN CERTIFICATE----- …), at most ${MAX_FILES_CA_CHARS} characters`);
  for (const [i, pem] of blocks.entries()) {
    try {
      new X509Certificate(pem);
    } catch {
      bad('options.ca', `certificate ${i + 1} of options.ca does not parse as an X.509 certificate`);
    }
  }
  return blocks.join('\n');
}

/** The validated `options.files` of an http-files credential (also re-checked at query time). */
export function fileSpecs(options: Readonly<Record<string, unknown>>): FileSpec[] {
  const extra = Object.keys(options).filter((k) => k !== 'files' && k !== 'ca');
  if (extra.length > 0) bad(`options.${extra[0]}`, 'http-files credentials take only options.files and options.ca');
  const files = options['files'];
  if (!Array.isArray(files) || files.length === 0 || files.length > MAX_FILES) {
    return bad('options.files', `options.files must be an array of 1 to ${MAX_FILES} entries {table, url, format?}`);
  }
  const seen = new Set<string>();
  return files.map((f: unknown, i): FileSpec => {
    const field = `options.files[${i}]`;
    if (typeof f !== 'object' || f === null || Array.isArray(f)) return bad(field, `${field} must be an object {table, url, format?}`);
    const o = f as Record<string, unknown>;
    const unknown = Object.keys(o).filter((k) => !['table', 'url', 'format'].includes(k));
    if (unknown.length > 0) bad(`${field}.${unknown[0]}`, `${field} takes only table, url and format`);
    const table = o['table'];
    if (typeof table !== 'string' || !TABLE.test(table)) return bad(`${field}.table`, `${field}.table must be a lower-case SQL name (letters, digits, _; at most 63; not starting with a digit)`);
    if (table.startsWith('pg_')) bad(`${field}.table`, `${field}.table must not start with pg_`);
    if (seen.has(table)) bad(`${field}.table`, `table ${table} is named twice`);
    seen.add(table);
    const rawUrl = o['url'];
    if (typeof rawUrl !== 'string' || rawUrl.length > 2048) return bad(`${field}.url`, `${field}.url must be an https URL of at most 2048 characters`);
    let u: URL;
    try {
      u = new URL(rawUrl);
    } catch {
      return bad(`${field}.url`, `${field}.url is not a valid URL`);
    }
    if (u.protocol !== 'https:') bad(`${field}.url`, `${field}.url must use https`);
    if (u.username || u.password) bad(`${field}.url`, `${field}.url must not carry user info: put a bearer token in secret instead`);
    const format = o['format'] ?? (/\.csv$/i.test(u.pathname) ? 'csv' : /\.json$/i.test(u.pathname) ? 'json' : undefined);
    if (format !== 'csv' && format !== 'json') return bad(`${field}.format`, `${field}.format must be "csv" or "json" (it can be left out when the URL path ends in .csv or .json)`);
    return { table, url: u.href, format };
  });
}

export const HTTP_FILES_KIND: CredentialKindDef = {
  kind: 'http-files',
  targets: ['http-files'],
  description: 'CSV or JSON files at HTTPS URLs, each queried as a table; optionally fetched with a bearer token.',
  secret: { description: 'a bearer token sent as Authorization: Bearer … to the files’ origin, or an empty string for public files', example: '' },
  options: [
    { name: 'files', required: true, description: `1 to ${MAX_FILES} entries {table, url, format?}: table a lower-case SQL name, url an https URL, format "csv" or "json" (from the URL's extension when left out)` },
    { name: 'ca', required: false, description: 'PEM CA certificate(s) trusted for the file servers besides the system trust store, for servers with a private CA' },
  ],
  validation: 'files must name distinct tables and https URLs without user info; the token (if any) must be printable ASCII without spaces, at most 4096 characters; ca PEM certificate text',
  validate(secret, options) {
    if (secret !== '' && (!PRINTABLE.test(secret) || secret.length > 4096)) bad('secret', 'the bearer token must be printable ASCII without spaces (at most 4096 characters), or an empty string for none');
    const files = fileSpecs(options);
    const ca = filesCa(options);
    return { files, ...(ca !== undefined ? { ca } : {}) };
  },
};

export const REST_CREDENTIAL_KINDS: readonly CredentialKindDef[] = [STRIPE_KIND, GITHUB_KIND, HUBSPOT_KIND, SALESFORCE_KIND, HTTP_FILES_KIND];
