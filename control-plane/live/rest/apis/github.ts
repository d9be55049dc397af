/**
 * GitHub REST (https://docs.github.com/rest): `GET /user/repos` and `GET /issues?filter=all`
 * (every issue and pull request the token can see), `per_page` up to 100, pagination by the
 * `Link: <…>; rel="next"` header, objects newest first (`sort=created&direction=desc`). GitHub has
 * no created-time filter on these lists: `since=<window start>` (last updated at or after, which
 * every object created in the window satisfies) narrows issues at the source, paging stops at the
 * first object created before the window, and objects newer than the window are dropped on arrival.
 */
import type { ApiSpec, ColumnSpec, PageRequest, PageResponse, TableSpec, Window } from '../spec.js';
import { arrayAt, col, endpoint, path, timeOf, withQuery } from '../spec.js';

/** the URL of `rel="next"` in a Link header, or null */
export function nextLink(header: string | string[] | undefined): URL | null {
  const text = Array.isArray(header) ? header.join(',') : header;
  if (!text) return null;
  // <url>; rel="next", <url>; rel="last" (URLs may contain commas: split on the brackets)
  for (const m of text.matchAll(/<([^>]*)>([^<]*)/g)) {
    const rel = /;\s*rel\s*=\s*"?([^";]+)"?/i.exec(m[2] ?? '')?.[1];
    if (!rel?.trim().split(/\s+/).includes('next')) continue;
    try {
      return new URL(m[1] ?? '');
    } catch {
      return null;
    }
  }
  return null;
}

const CREATED: ColumnSpec = { name: 'created', type: 'timestamptz', description: 'When it was created (UTC); period: scopes restrict this column', get: (o) => timeOf(o['created_at'], 'iso') };
const time = (name: string, description: string): ColumnSpec => ({ name, type: 'timestamptz', description, get: (o) => timeOf(o[name], 'iso') });

function listing(name: string, description: string, columns: ColumnSpec[], first: (base: URL, w: Window | null, n: number) => PageRequest, keep?: TableSpec['keep']): TableSpec {
  return {
    name,
    description,
    columns,
    first,
    items: (body) => arrayAt(body, null),
    next: (_b, _p, res: PageResponse) => {
      const url = nextLink(res.headers['link']);
      return url ? { method: 'GET', url } : null;
    },
    created: (o) => timeOf(o['created_at'], 'iso'),
    newestFirst: true,
    ...(keep ? { keep } : {}),
  };
}

const issuesRequest = (base: URL, w: Window | null, n: number): PageRequest => ({
  method: 'GET',
  url: withQuery(endpoint(base, '/issues'), {
    filter: 'all',
    state: 'all',
    sort: 'created',
    direction: 'desc',
    per_page: n,
    since: w ? new Date(w.start).toISOString() : undefined,
  }),
});

const ISSUE_COMMON: ColumnSpec[] = [
  col('id', 'bigint', 'Id'),
  col('number', 'bigint', 'Number within its repository'),
  col('repository', 'text', 'owner/name of its repository', 'repository.full_name'),
  col('title', 'text', 'Title'),
  col('state', 'text', 'open or closed'),
  col('user', 'text', 'Login of the author', 'user.login'),
  { name: 'labels', type: 'jsonb', description: 'Label names', get: (o) => (Array.isArray(o['labels']) ? o['labels'].map((l) => path(l, 'name') ?? l) : null) },
  col('comments', 'bigint', 'Number of comments'),
  col('body', 'text', 'Body (Markdown)'),
  CREATED,
  time('updated_at', 'Last update'),
  time('closed_at', 'When closed'),
  col('html_url', 'text', 'Web address'),
];

const isPull = (o: Readonly<Record<string, unknown>>): boolean => o['pull_request'] !== undefined && o['pull_request'] !== null;

export const GITHUB: ApiSpec = {
  id: 'github',
  provider: 'GitHub',
  defaultBase: 'https://api.github.com',
  maxPageSize: 100,
  base: (configured) => new URL(configured ?? 'https://api.github.com'),
  headers: (c) => ({
    authorization: `Bearer ${c.secret}`,
    accept: 'application/vnd.github+json',
    'x-github-api-version': '2022-11-28',
    'user-agent': 'svc-live-connector',
  }),
  errorCode: () => undefined, // GitHub errors are free text only
  tables: [
    listing(
      'repositories',
      'Repositories the token can read',
      [
        col('id', 'bigint', 'Id'),
        col('full_name', 'text', 'owner/name'),
        col('name', 'text', 'Name'),
        col('owner', 'text', 'Owner login', 'owner.login'),
        col('private', 'boolean', 'Whether private'),
        col('description', 'text', 'Description'),
        col('fork', 'boolean', 'Whether a fork'),
        col('archived', 'boolean', 'Whether archived'),
        col('language', 'text', 'Main language'),
        col('default_branch', 'text', 'Default branch'),
        col('stargazers_count', 'bigint', 'Stars'),
        col('forks_count', 'bigint', 'Forks'),
        col('open_issues_count', 'bigint', 'Open issues and pull requests'),
        col('html_url', 'text', 'Web address'),
        CREATED,
        time('updated_at', 'Last update'),
        time('pushed_at', 'Last push'),
      ],
      (base, _w, n) => ({ method: 'GET', url: withQuery(endpoint(base, '/user/repos'), { per_page: n, sort: 'created', direction: 'desc' }) }),
    ),
    listing('issues', 'Issues (not pull requests) the token can see, every state', ISSUE_COMMON, issuesRequest, (o) => !isPull(o)),
    listing(
      'pull_requests',
      'Pull requests the token can see, every state',
      [
        ...ISSUE_COMMON.filter((c) => c.name !== 'labels' && c.name !== 'comments'),
        col('draft', 'boolean', 'Whether a draft'),
        { name: 'merged_at', type: 'timestamptz', description: 'When merged (null when not merged)', get: (o) => timeOf(path(o, 'pull_request', 'merged_at'), 'iso') },
      ],
      issuesRequest,
      isPull,
    ),
  ],
};
