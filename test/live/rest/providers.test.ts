/**
 * github, hubspot and salesforce connectors against local servers following each provider's
 * documented shapes: GitHub `Link` pagination, `since`, newest-first lists and its 403 rate limit
 * with x-ratelimit-reset; HubSpot `paging.next.after` cursors on GET lists and POST search with
 * createdate filters; Salesforce SOQL with `nextRecordsUrl` batches and INVALID_SESSION_ID.
 */
import t from 'tap';
import { ApiError } from '../../../control-plane/errors.js';
import { nextLink, restCredentialKinds } from '../../../control-plane/live/rest/index.js';
import { connector, engines, json, provider, query, type Seen } from './helpers.js';

t.before(() => engines.warm());
t.teardown(() => engines.close());

const day = 86_400_000;
const iso = (ms: number): string => new Date(ms).toISOString().replace('.000Z', 'Z');
const START = Date.parse('2024-01-01T00:00:00Z');

// ------------------------------------------------------------------------------------ GitHub

const GH_TOKEN = 'github_pat_11ABCDEFG0123456789_abcdefghijklmnop';
// 120 issues/PRs, one every 2 days from 2024-01-01; every third is a pull request
const ghItems = Array.from({ length: 120 }, (_, i) => ({
  id: 1000 + i,
  number: i + 1,
  title: `item ${i + 1}`,
  state: i % 4 === 0 ? 'closed' : 'open',
  user: { login: i % 2 ? 'alice' : 'bob' },
  labels: [{ name: 'bug' }],
  comments: i % 5,
  body: 'text',
  created_at: iso(START + i * 2 * day),
  updated_at: iso(START + i * 2 * day + day),
  closed_at: null,
  html_url: `https://github.com/acme/app/issues/${i + 1}`,
  repository: { full_name: 'acme/app' },
  ...(i % 3 === 0 ? { pull_request: { merged_at: i % 6 === 0 ? iso(START + i * 2 * day + 3600_000) : null }, draft: false } : {}),
}));

function github(mode: { limitOnce?: boolean } = {}) {
  let limited = false;
  return provider((req: Seen, res) => {
    if (req.headers['authorization'] !== `Bearer ${GH_TOKEN}`) return json(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
    if (req.headers['user-agent'] === undefined) return json(res, 403, { message: 'User-Agent required' });
    if (mode.limitOnce && !limited) {
      limited = true;
      return json(res, 403, { message: 'API rate limit exceeded' }, { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.ceil(Date.now() / 1000) + 1) });
    }
    if (req.path !== '/issues') return json(res, 404, { message: 'Not Found' });
    const q = req.url.searchParams;
    const per = Number(q.get('per_page') ?? 30);
    const page = Number(q.get('page') ?? 1);
    let list = [...ghItems].sort((a, b) => b.created_at.localeCompare(a.created_at));
    const since = q.get('since');
    if (since) list = list.filter((x) => x.updated_at >= since);
    const slice = list.slice((page - 1) * per, page * per);
    const headers: Record<string, string> = {};
    if (page * per < list.length) {
      const next = new URL(req.url.href);
      next.searchParams.set('page', String(page + 1));
      const origin = `http://${req.headers.host}`;
      headers['link'] = `<${origin}${next.pathname}${next.search}>; rel="next", <${origin}/issues?page=99>; rel="last"`;
    }
    json(res, 200, slice, headers);
  });
}

t.test('github: Link pagination, issues and pull requests split, since + newest-first early stop for a period', async (t) => {
  const srv = await github();
  t.teardown(() => srv.close());
  const c = connector('github', { githubApiBase: srv.base });
  const all = await query(c, ['read:*'], 'SELECT (SELECT count(*) FROM issues)::int AS issues, (SELECT count(*) FROM pull_requests)::int AS pulls, (SELECT count(*) FROM pull_requests WHERE merged_at IS NOT NULL)::int AS merged', { secret: GH_TOKEN });
  t.same(all.rows, [{ issues: 80, pulls: 40, merged: 20 }]);
  t.ok(srv.seen.every((s) => s.path === '/issues'), 'repositories were not fetched');

  srv.seen.length = 0;
  const feb = await query(c, ['read:issues', 'period:2024-02'], 'SELECT count(*)::int AS n, min(created) AS first, max(created) AS last FROM issues', { secret: GH_TOKEN });
  const want = ghItems.filter((x) => x.created_at >= '2024-02-01' && x.created_at < '2024-03-01' && !('pull_request' in x));
  t.same(feb.rows, [{ n: want.length, first: `${want[0]?.created_at.slice(0, 19)}.000Z`, last: `${want[want.length - 1]?.created_at.slice(0, 19)}.000Z` }]);
  t.equal(srv.seen[0]?.url.searchParams.get('since'), '2024-02-01T00:00:00.000Z', 'the window start goes to the provider as since');
  t.equal(srv.seen[0]?.url.searchParams.get('sort'), 'created');
  t.equal(srv.seen[0]?.url.searchParams.get('direction'), 'desc');
  t.equal(srv.seen.length, 2, 'newest first: pages stop at the first object older than the window (since narrowed the list at the source)');
});

t.test('github: row cap stops paging; 403 with exhausted quota waits for the reset', async (t) => {
  const srv = await github({ limitOnce: true });
  t.teardown(() => srv.close());
  const c = connector('github', { githubApiBase: srv.base });
  const r = await query(c, ['read:pull_requests'], 'SELECT number FROM pull_requests ORDER BY number', { secret: GH_TOKEN, maxRows: 10 });
  t.equal(r.rows.length, 10);
  t.equal(r.truncated, true);
  t.equal(srv.seen[0]?.url.searchParams.get('page'), null);
  t.equal(srv.seen[1]?.url.href, srv.seen[0]?.url.href, 'the rate-limited request was retried after the reset');
  t.equal(srv.seen[1]?.url.searchParams.get('per_page'), '11', 'a page asks for no more than the cap needs');
  const pages = srv.seen.length - 1;
  t.ok(pages >= 3 && pages <= 5, `stopped paging at the cap (${pages} pages of 11, not all 11)`);
});

t.test('github: a bad token is credential_rejected', async (t) => {
  const srv = await github();
  t.teardown(() => srv.close());
  const c = connector('github', { githubApiBase: srv.base });
  const bad = 'ghp_expiredexpiredexpiredexpired0123';
  const err = (await query(c, ['read:issues'], 'SELECT 1 FROM issues', { secret: bad }).catch((e: unknown) => e)) as ApiError;
  t.equal(err.code, 'invalid_request');
  t.equal(err.details?.['reason'], 'credential_rejected');
  t.notOk(JSON.stringify([err.message, err.details]).includes(bad));
});

t.test('github Link header parsing', async (t) => {
  t.equal(nextLink('<https://api.github.com/x?a=1,2&page=2>; rel="next", <https://api.github.com/x?page=5>; rel="last"')?.href, 'https://api.github.com/x?a=1,2&page=2');
  t.equal(nextLink('<https://api.github.com/x?page=5>; rel="last"'), null);
  t.equal(nextLink(undefined), null);
  t.equal(nextLink('<https://a/x?page=1>; rel="prev first", <https://a/x?page=3>; rel=next')?.href, 'https://a/x?page=3');
});

// ------------------------------------------------------------------------------------ HubSpot

const HS_TOKEN = 'pat-na1-0a1b2c3d-1111-2222-3333-444455556666';
const deals = Array.from({ length: 230 }, (_, i) => ({
  id: String(5000 + i),
  properties: { dealname: `Deal ${i}`, amount: `${(i * 13) % 900}.50`, dealstage: i % 2 ? 'closedwon' : 'appointmentscheduled', pipeline: 'default', closedate: iso(START + i * day), createdate: iso(START + i * day) },
  createdAt: iso(START + i * day),
  updatedAt: iso(START + i * day + 1000),
  archived: false,
}));

function hubspot() {
  return provider((req, res) => {
    if (req.headers['authorization'] !== `Bearer ${HS_TOKEN}`) {
      return json(res, 401, { status: 'error', message: 'Authentication credentials not found.', correlationId: 'x', category: 'INVALID_AUTHENTICATION' });
    }
    let list = deals;
    let limit: number;
    let after: number;
    if (req.method === 'GET' && req.path === '/crm/v3/objects/deals') {
      limit = Number(req.url.searchParams.get('limit') ?? 10);
      after = Number(req.url.searchParams.get('after') ?? 0);
    } else if (req.method === 'POST' && req.path === '/crm/v3/objects/deals/search') {
      const body = JSON.parse(req.body) as { filterGroups: { filters: { propertyName: string; operator: string; value: string }[] }[]; limit: number; after?: string };
      limit = body.limit;
      after = Number(body.after ?? 0);
      list = list.filter((d) =>
        body.filterGroups.some((g) =>
          g.filters.every((f) => {
            const v = Date.parse(d.properties.createdate);
            return f.operator === 'GTE' ? v >= Number(f.value) : f.operator === 'LT' ? v < Number(f.value) : false;
          }),
        ),
      );
    } else return json(res, 404, { status: 'error', category: 'OBJECT_NOT_FOUND', message: 'nope' });
    if (limit > 100) return json(res, 400, { status: 'error', category: 'VALIDATION_ERROR', message: 'limit' });
    const page = list.slice(after, after + limit);
    json(res, 200, { results: page, ...(after + limit < list.length ? { paging: { next: { after: String(after + limit), link: 'x' } } } : {}) });
  });
}

t.test('hubspot: GET paging by after; a period becomes a POST search on createdate', async (t) => {
  const srv = await hubspot();
  t.teardown(() => srv.close());
  const c = connector('hubspot', { hubspotApiBase: srv.base });
  const all = await query(c, ['read:deals'], "SELECT count(*)::int AS n, sum(amount) AS total, count(*) FILTER (WHERE dealstage = 'closedwon')::int AS won FROM deals", { secret: HS_TOKEN });
  t.same(all.rows, [{ n: 230, total: deals.reduce((s, d) => s + Number(d.properties.amount), 0), won: 115 }]);
  t.same(srv.seen.map((s) => `${s.method} ${s.url.searchParams.get('after') ?? ''}`), ['GET ', 'GET 100', 'GET 200']);

  srv.seen.length = 0;
  const q1 = await query(c, ['read:deals', 'period:2024-Q1'], 'SELECT count(*)::int AS n FROM deals', { secret: HS_TOKEN });
  t.same(q1.rows, [{ n: 91 }], 'Jan–Mar 2024 (leap year): 91 days');
  t.equal(srv.seen.length, 1);
  const body = JSON.parse(srv.seen[0]?.body ?? '{}') as { filterGroups: { filters: unknown[] }[] };
  t.same(body.filterGroups[0]?.filters, [
    { propertyName: 'createdate', operator: 'GTE', value: String(Date.parse('2024-01-01T00:00:00Z')) },
    { propertyName: 'createdate', operator: 'LT', value: String(Date.parse('2024-04-01T00:00:00Z')) },
  ]);

  const bad = await query(c, ['read:deals'], 'SELECT * FROM deals', { secret: 'pat-na1-00000000-0000-0000-0000-000000000000' }).catch((e: unknown) => e);
  t.equal((bad as ApiError).details?.['reason'], 'credential_rejected');
  t.equal((bad as ApiError).details?.['provider_code'], 'INVALID_AUTHENTICATION');
});

// ------------------------------------------------------------------------------------ Salesforce

const SF_TOKEN = '00D5g000000AbCdEAF!AQ4AQFakeTokenForTests.abcdefghijklmnop';
const opps = Array.from({ length: 4500 }, (_, i) => ({
  attributes: { type: 'Opportunity', url: `/services/data/v60.0/sobjects/Opportunity/006${i}` },
  Id: `006${String(i).padStart(15, '0')}`,
  AccountId: `001${i % 50}`,
  Name: `Opp ${i}`,
  StageName: i % 3 ? 'Prospecting' : 'Closed Won',
  Amount: i * 10,
  Probability: 10,
  CloseDate: '2024-06-30',
  IsClosed: i % 3 === 0,
  IsWon: i % 3 === 0,
  CreatedDate: new Date(START + i * 3600_000).toISOString().replace('Z', '+0000'),
  LastModifiedDate: new Date(START + i * 3600_000).toISOString().replace('Z', '+0000'),
}));

function salesforce() {
  const cursors = new Map<string, typeof opps>();
  return provider((req, res) => {
    if (req.headers['authorization'] !== `Bearer ${SF_TOKEN}`) return json(res, 401, [{ message: 'Session expired or invalid', errorCode: 'INVALID_SESSION_ID' }]);
    const batch = 2000;
    let rest: typeof opps;
    const m = /^\/services\/data\/v60\.0\/query\/(.+)$/.exec(req.path);
    if (m) rest = cursors.get(m[1] as string) ?? [];
    else if (req.path === '/services/data/v60.0/query') {
      const soql = req.url.searchParams.get('q') ?? '';
      const w = /WHERE CreatedDate >= (\S+) AND CreatedDate < (\S+)/.exec(soql);
      const lim = /LIMIT (\d+)$/.exec(soql);
      if (!/FROM Opportunity/.test(soql)) return json(res, 400, [{ message: 'sObject type not supported', errorCode: 'INVALID_TYPE' }]);
      rest = opps.filter((o) => !w || (Date.parse(o.CreatedDate) >= Date.parse(w[1] as string) && Date.parse(o.CreatedDate) < Date.parse(w[2] as string)));
      if (lim) rest = rest.slice(0, Number(lim[1]));
    } else return json(res, 404, [{ message: 'not found', errorCode: 'NOT_FOUND' }]);
    const records = rest.slice(0, batch);
    const left = rest.slice(batch);
    const body: Record<string, unknown> = { totalSize: rest.length, done: left.length === 0, records };
    if (left.length) {
      const id = `01gXX-${cursors.size + 1}`;
      cursors.set(id, left);
      body['nextRecordsUrl'] = `/services/data/v60.0/query/${id}`;
    }
    json(res, 200, body);
  });
}

t.test('salesforce: SOQL with CreatedDate window and LIMIT, nextRecordsUrl batches, expired session', async (t) => {
  const srv = await salesforce();
  t.teardown(() => srv.close());
  const c = connector('salesforce', { salesforceApiBase: srv.base });
  const opts = { secret: SF_TOKEN, options: { instance_url: 'https://acme.my.salesforce.com' } };
  const all = await query(c, ['read:opportunities'], "SELECT count(*)::int AS n, sum(amount)::bigint AS total, count(*) FILTER (WHERE stage_name = 'Closed Won')::int AS won FROM opportunities", opts);
  t.same(all.rows, [{ n: 4500, total: opps.reduce((s, o) => s + o.Amount, 0), won: 1500 }]);
  t.equal(srv.seen.length, 3, 'three batches of up to 2000');
  t.match(srv.seen[0]?.url.searchParams.get('q') ?? '', /^SELECT Id, .* FROM Opportunity ORDER BY CreatedDate LIMIT 10001$/);
  t.match(srv.seen[1]?.path ?? '', /^\/services\/data\/v60\.0\/query\/01gXX-/);

  srv.seen.length = 0;
  const jan2 = await query(c, ['read:opportunities', 'period:2024-01'], 'SELECT count(*)::int AS n FROM opportunities', { ...opts, maxRows: 500 });
  t.same(jan2.rows, [{ n: 500 }]);
  t.equal(jan2.truncated, true, '744 in January, cap 500');
  t.match(srv.seen[0]?.url.searchParams.get('q') ?? '', / WHERE CreatedDate >= 2024-01-01T00:00:00Z AND CreatedDate < 2024-02-01T00:00:00Z ORDER BY CreatedDate LIMIT 501$/);
  t.equal(srv.seen.length, 1);

  const err = (await query(c, ['read:accounts'], 'SELECT * FROM accounts', { ...opts, secret: '00D5g000000AbCdEAF!expiredexpiredexpiredexpired' }).catch((e: unknown) => e)) as ApiError;
  t.equal(err.code, 'invalid_request');
  t.equal(err.details?.['reason'], 'credential_rejected');
  t.equal(err.details?.['provider_code'], 'INVALID_SESSION_ID');
  t.notOk(err.message.includes('expiredexpired'));
});

t.test('credential kinds: github, hubspot, salesforce', async (t) => {
  const kind = (k: string) => {
    const d = restCredentialKinds.find((x) => x.kind === k);
    if (!d) throw new Error(k);
    return d;
  };
  const refused = (k: string, secret: string, options: Record<string, unknown> = {}, field = 'secret') => {
    try {
      kind(k).validate(secret, options);
      t.fail(`${k} accepted ${secret}`);
    } catch (e) {
      t.equal((e as ApiError).code, 'invalid_request', `${k}: ${secret}`);
      t.equal((e as ApiError).details?.['field'], field);
      if (secret.length > 8) t.notOk((e as ApiError).message.includes(secret.slice(4)), 'secret not echoed');
    }
  };
  t.same(kind('github').validate(GH_TOKEN, {}), {});
  t.same(kind('github').validate('ghp_abcdefghijklmnopqrstuvwxyz0123456789', {}), {});
  refused('github', 'ghr_refreshrefreshrefreshrefresh01');
  refused('github', 'not a token at all, surely');
  t.same(kind('hubspot').validate(HS_TOKEN, {}), {});
  refused('hubspot', '0a1b2c3d-1111-2222-3333-444455556666'); // a legacy API key
  t.same(kind('salesforce').validate(SF_TOKEN, { instance_url: 'https://acme.my.salesforce.com/' }), { instance_url: 'https://acme.my.salesforce.com' });
  refused('salesforce', SF_TOKEN, { instance_url: 'https://169.254.169.254' }, 'options.instance_url');
  refused('salesforce', SF_TOKEN, { instance_url: 'http://acme.my.salesforce.com' }, 'options.instance_url');
  refused('salesforce', SF_TOKEN, { instance_url: 'https://acme.my.salesforce.com.evil.example' }, 'options.instance_url');
  refused('salesforce', SF_TOKEN, {}, 'options.instance_url');
  refused('salesforce', 'Bearer-something-long-enough', { instance_url: 'https://acme.my.salesforce.com' });
});
