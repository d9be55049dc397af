/**
 * http-files over real HTTPS (a CA made in the test, trusted through RestConfig.ca): CSV and JSON
 * files as tables, the bearer token, hostile CSV, a file over the size limit, the private-address
 * guard, redirects that must not carry the token elsewhere.
 */
import t from 'tap';
import { createCa, issueServerCertificate } from '../../../pki/index.js';
import { ApiError } from '../../../control-plane/errors.js';
import { CsvError, parseCsv, restCredentialKinds } from '../../../control-plane/live/rest/index.js';
import { SqlPolicyError } from '../../../control-plane/query/sql/index.js';
import { connector, describe, engines, provider, query, type Provider } from './helpers.js';

t.before(() => engines.warm());
t.teardown(() => engines.close());

const ca = createCa({ keyBits: 2048 });
const cert = issueServerCertificate(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
const TOKEN = 'files-token-0123456789abcdef';

const CSV =
  '\uFEFFId,Name,Amount,Active,Created At,Note\r\n' +
  '1,Alice,10.5,true,2024-01-02T03:04:05Z,"says ""hi"", twice"\r\n' +
  '2,Bob,20,false,2024-02-03T00:00:00Z,"two\nlines"\r\n' +
  '\r\n' +
  '3,"Carol, Jr.",,true,2024-03-04T00:00:00Z,\r\n' +
  '4,Dan,7\r\n';
const JSON_FILE = JSON.stringify({ data: [{ id: 1, tags: ['a'], score: 1.5, 'Weird Key!': 'x' }, { id: 2, tags: null, score: 2, extra: { k: 'v' } }, { id: 4, score: 3 }] });

const files: Record<string, { status?: number; body: string; type?: string; location?: string }> = {
  '/people.csv': { body: CSV, type: 'text/csv' },
  '/scores.json': { body: JSON_FILE },
  '/wide.csv': { body: 'a,b\n1,2\n3,4,5\n' },
  '/open.csv': { body: 'a,b\n1,"never closed\n' },
  '/huge-field.csv': { body: `a,b\n1,${'x'.repeat(1_000_001)}\n` },
  '/big.csv': { body: `a\n${'123456789\n'.repeat(3000)}` },
  '/many.csv': { body: `n\n${Array.from({ length: 500 }, (_, i) => i).join('\n')}\n` },
  '/redirect.csv': { status: 302, body: '', location: '' }, // location set once the other server runs
};

async function fileServer(): Promise<Provider> {
  return provider((req, res) => {
    const f = files[req.path];
    if (!f) {
      res.writeHead(404);
      return res.end('not found');
    }
    if (req.path !== '/redirect.csv' && req.headers['authorization'] !== `Bearer ${TOKEN}`) {
      res.writeHead(401, { 'content-type': 'text/plain' });
      return res.end(`bad token ${String(req.headers['authorization'])}`);
    }
    res.writeHead(f.status ?? 200, { 'content-type': f.type ?? 'application/json', ...(f.location ? { location: f.location } : {}) });
    res.end(f.body);
  }, { key: cert.keyPem, cert: cert.certPem });
}

const spec = (base: string, ...names: string[]) => ({ files: names.map((n) => ({ table: n.replace(/[.-].*$/, '').replace(/-/g, '_'), url: `${base}/${n}` })) });

t.test('the schema listing: each scoped file read as a query reads it, its columns and inferred types; unregistered names are missing', async (t) => {
  const srv = await fileServer();
  t.teardown(() => srv.close());
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true });
  const options = spec(srv.base, 'people.csv', 'scores.json');
  const one = await describe(c, ['read:people', 'read:nope'], { secret: TOKEN, options });
  t.same(one, {
    tables: [
      {
        name: 'people',
        columns: [
          { name: 'id', type: 'bigint', nullable: true },
          { name: 'name', type: 'text', nullable: true },
          { name: 'amount', type: 'numeric', nullable: true },
          { name: 'active', type: 'boolean', nullable: true },
          { name: 'created_at', type: 'timestamp with time zone', nullable: true },
          { name: 'note', type: 'text', nullable: true },
        ],
      },
    ],
    missing: ['nope'],
    truncated: false,
  });
  t.same(srv.seen.map((s) => s.path), ['/people.csv'], 'only the scoped file is fetched, with the token');
  t.ok(srv.seen.every((s) => s.headers['authorization'] === `Bearer ${TOKEN}`));

  const all = await describe(c, ['read:*'], { secret: TOKEN, options });
  t.same(all.tables.map((x) => x.name), ['people', 'scores'], 'read:* lists every registered file');
  t.same(all.tables[1]?.columns.map((x) => `${x.name} ${x.type}`), ['id bigint', 'tags jsonb', 'score numeric', 'weird_key text', 'extra jsonb']);
  t.same(all.missing, []);
});

t.test('CSV and JSON files as tables, with the bearer token; read:* finds the tables the statement names', async (t) => {
  const srv = await fileServer();
  t.teardown(() => srv.close());
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true });
  const options = spec(srv.base, 'people.csv', 'scores.json');
  const r = await query(c, ['read:*'], 'SELECT p.id, p.name, p.amount, p.active, p.created_at, p.note, s.score, s.tags, s.weird_key, s.extra FROM people p LEFT JOIN http_files.scores s ON s.id = p.id ORDER BY p.id', { secret: TOKEN, options });
  t.same(r.rows, [
    { id: 1, name: 'Alice', amount: 10.5, active: true, created_at: '2024-01-02T03:04:05.000Z', note: 'says "hi", twice', score: 1.5, tags: ['a'], weird_key: 'x', extra: null },
    { id: 2, name: 'Bob', amount: 20, active: false, created_at: '2024-02-03T00:00:00.000Z', note: 'two\nlines', score: 2, tags: null, weird_key: null, extra: { k: 'v' } },
    { id: 3, name: 'Carol, Jr.', amount: null, active: true, created_at: '2024-03-04T00:00:00.000Z', note: null, score: null, tags: null, weird_key: null, extra: null },
    { id: 4, name: 'Dan', amount: 7, active: null, created_at: null, note: null, score: 3, tags: null, weird_key: null, extra: null },
  ]);
  t.same(srv.seen.map((s) => s.path).sort(), ['/people.csv', '/scores.json'], 'only the files named are fetched');
  t.ok(srv.seen.every((s) => s.headers['authorization'] === `Bearer ${TOKEN}`));

  const notRegistered = await query(c, ['read:*'], 'SELECT * FROM secrets', { secret: TOKEN, options }).catch((e: unknown) => e);
  t.equal((notRegistered as ApiError).code, 'scope_violation');
  t.equal((notRegistered as ApiError).details?.['reason'], 'unknown_table');

  // a registered file outside the scopes is out of scope, like one the credential does not name:
  // the refusal never says which files the credential holds
  const outOfScope = await query(c, ['read:people'], 'SELECT * FROM scores', { secret: TOKEN, options }).catch((e: unknown) => e);
  t.ok(outOfScope instanceof SqlPolicyError);
  t.equal((outOfScope as SqlPolicyError).detail.reason, 'table_not_in_scope');
  const notAFile = await query(c, ['read:people'], 'SELECT * FROM nope', { secret: TOKEN, options }).catch((e: unknown) => e);
  t.equal((notAFile as SqlPolicyError).detail.reason, 'table_not_in_scope');
  t.equal((notAFile as SqlPolicyError).message.replace('nope', 'scores'), (outOfScope as SqlPolicyError).message, 'the same answer');

  const catalog = await query(c, ['read:*'], 'SELECT * FROM pg_catalog.pg_class', { secret: TOKEN, options }).catch((e: unknown) => e);
  t.equal((catalog as SqlPolicyError).detail.reason, 'system_catalog');
});

t.test('hostile files are refused with a clear reason; a file over the limit is file_too_large; caps apply', async (t) => {
  const srv = await fileServer();
  t.teardown(() => srv.close());
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, httpFilesMaxBytes: 20_000 });
  const run = (name: string, sql = `SELECT count(*)::int AS n FROM ${name.replace(/[.-].*$/, '')}`, maxRows = 10_000) =>
    query(c, ['read:*'], sql, { secret: TOKEN, options: spec(srv.base, name), maxRows }).catch((e: unknown) => e as ApiError);
  for (const name of ['wide.csv', 'open.csv']) {
    const e = (await run(name)) as ApiError;
    t.equal(e.code, 'invalid_request', name);
    t.equal(e.details?.['reason'], 'file_malformed', name);
  }
  const wide = (await run('wide.csv')) as ApiError;
  t.match(wide.message, /line 3: 3 fields where the header has 2/);
  const huge = (await run('huge-field.csv')) as ApiError;
  t.equal(huge.details?.['reason'], 'file_too_large', 'a 1 MB field is over the 20 kB file limit first');
  const big = (await run('big.csv')) as ApiError;
  t.equal(big.code, 'invalid_request');
  t.equal(big.details?.['reason'], 'file_too_large');
  t.notOk(big.message.includes(TOKEN));

  const capped = await run('many.csv', 'SELECT n FROM many', 100);
  if (!('rows' in capped)) throw new Error(`many.csv: ${JSON.stringify(capped)}`);
  t.equal(capped.rows.length, 100);
  t.equal(capped.truncated, true);

  const c2 = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true });
  const bigField = await query(c2, ['read:*'], 'SELECT count(*) FROM huge', { secret: TOKEN, options: spec(srv.base, 'huge-field.csv') }).catch((e: unknown) => e as ApiError);
  t.equal((bigField as ApiError).details?.['reason'], 'file_malformed');
  t.match((bigField as ApiError).message, /longer than 1000000 characters/);
});

t.test('a wrong token is credential_rejected and never echoed; private addresses are refused unless allowed', async (t) => {
  const srv = await fileServer();
  t.teardown(() => srv.close());
  const open = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true });
  const wrong = 'wrong-token-zzzzzzzzzzzzzzzz';
  const e = (await query(open, ['read:people'], 'SELECT * FROM people', { secret: wrong, options: spec(srv.base, 'people.csv') }).catch((x: unknown) => x)) as ApiError;
  t.equal(e.code, 'invalid_request');
  t.equal(e.details?.['reason'], 'credential_rejected');
  t.equal(e.details?.['connector_kind'], 'http-files');
  t.notOk(JSON.stringify([e.message, e.details]).includes(wrong), 'the server echoed it; we do not');

  srv.seen.length = 0;
  const guarded = connector('http-files', { ca: ca.certPem });
  const g = (await query(guarded, ['read:people'], 'SELECT * FROM people', { secret: TOKEN, options: spec(srv.base, 'people.csv') }).catch((x: unknown) => x)) as ApiError;
  t.equal(g.code, 'invalid_request');
  t.equal(g.details?.['reason'], 'address_not_allowed');
  t.equal(srv.seen.length, 0, 'no request reached the loopback server');
});

t.test('a redirect to another origin does not carry the token', async (t) => {
  const srv = await fileServer();
  const other = await fileServer();
  t.teardown(async () => {
    await srv.close();
    await other.close();
  });
  (files['/redirect.csv'] as { location: string }).location = `${other.base.replace('127.0.0.1', 'localhost')}/people.csv`;
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true });
  const e = (await query(c, ['read:redirect'], 'SELECT * FROM redirect', { secret: TOKEN, options: spec(srv.base, 'redirect.csv') }).catch((x: unknown) => x)) as ApiError;
  t.equal(other.seen.length, 1, 'the redirect was followed');
  t.equal(other.seen[0]?.headers['authorization'], undefined, 'without the token');
  t.equal(e.details?.['reason'], 'credential_rejected', 'so the other origin refused it');
});

t.test('http-files credential kind', async (t) => {
  const kind = restCredentialKinds.find((k) => k.kind === 'http-files');
  if (!kind) throw new Error('no kind');
  t.same(kind.validate('', { files: [{ table: 'orders', url: 'https://files.example.com/orders.csv' }] }), { files: [{ table: 'orders', url: 'https://files.example.com/orders.csv', format: 'csv' }] });
  const bad: [Record<string, unknown>, string][] = [
    [{ files: [{ table: 'orders', url: 'http://files.example.com/orders.csv' }] }, 'options.files[0].url'],
    [{ files: [{ table: 'orders', url: 'https://user:pw@files.example.com/o.csv' }] }, 'options.files[0].url'],
    [{ files: [{ table: 'Orders', url: 'https://files.example.com/o.csv' }] }, 'options.files[0].table'],
    [{ files: [{ table: 'pg_x', url: 'https://files.example.com/o.csv' }] }, 'options.files[0].table'],
    [{ files: [{ table: 'o', url: 'https://files.example.com/o' }] }, 'options.files[0].format'],
    [{ files: [{ table: 'o', url: 'https://a.example/o.csv' }, { table: 'o', url: 'https://a.example/p.csv' }] }, 'options.files[1].table'],
    [{ files: [] }, 'options.files'],
    [{}, 'options.files'],
  ];
  for (const [options, field] of bad) {
    t.throws(() => kind.validate('', options), { code: 'invalid_request', details: { field } }, field);
  }
  t.throws(() => kind.validate('has space', { files: [{ table: 'o', url: 'https://a.example/o.csv' }] }), { code: 'invalid_request', details: { field: 'secret' } });
});

t.test('CSV reader', async (t) => {
  const lim = { maxRows: 100, maxFieldChars: 50, maxColumns: 3 };
  t.same(parseCsv('a,b\n1,2', lim), { header: ['a', 'b'], rows: [['1', '2']], truncated: false }, 'no final newline');
  t.same(parseCsv('a,b\r\n"x\r\ny",""""\r\n', lim).rows, [['x\r\ny', '"']]);
  t.same(parseCsv('a,b\n1\n', lim).rows, [['1', null]], 'short record padded');
  t.same(parseCsv('a\nab"c\n', lim).rows, [['ab"c']], 'a quote inside an unquoted field is literal');
  t.same(parseCsv('a\n1\n2\n3\n', { ...lim, maxRows: 2 }), { header: ['a'], rows: [['1'], ['2']], truncated: true });
  t.throws(() => parseCsv('a,b\n"x"y,1\n', lim), CsvError);
  t.throws(() => parseCsv('a,b,c,d\n', lim), /at most 3/);
  t.throws(() => parseCsv(`a\n"${'x'.repeat(60)}"\n`, lim), /longer than 50/);
  t.throws(() => parseCsv('', lim), /empty/);
  t.throws(() => parseCsv('a\n"x\n\n\n', lim), /line 2: a quoted field is never closed/);
});

t.test('read:* finds 64 tables in one check, refuses the 65th, and stays off a long loop of re-checks', async (t) => {
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true });
  const { initSqlParser } = await import('../../../control-plane/query/sql/index.js');
  const { parseScopes } = await import('../../../control-plane/catalogue/index.js');
  const { Catalogue } = await import('../../../control-plane/catalogue/index.js');
  await initSqlParser();
  const target = new Catalogue().target('http-files');
  if (!target) throw new Error('no http-files target');
  const scopes = parseScopes(target, ['read:*']);
  const names = Array.from({ length: 64 }, (_, i) => `t${i}`);
  const literals = Array.from({ length: 2000 }, (_, i) => `'literal number ${String(i).padStart(12, '0')}'`).join(',');
  const sql = `SELECT 1 FROM ${names.join(', ')} WHERE 'x' IN (${literals})`;
  const started = performance.now();
  const prepared = await c.prepare(sql, scopes, target);
  const took = performance.now() - started;
  t.same([...prepared.tables].sort(), [...names].sort(), 'all 64 tables found');
  t.ok(took < 1000, `one check (${took.toFixed(0)} ms; it re-checked once per name, 64 times)`);
  const over = await Promise.resolve()
    .then(() => c.prepare(`SELECT 1 FROM ${[...names, 't64'].join(', ')}`, scopes, target))
    .catch((e: unknown) => e);
  t.ok(over instanceof SqlPolicyError && over.detail.reason === 'unknown_table', 'the 65th name is not taken');
  for (const bad of ['SELECT * FROM pg_class', 'SELECT * FROM "Odd"', 'SELECT * FROM other_schema.t']) {
    const e = await Promise.resolve()
      .then(() => c.prepare(bad, scopes, target))
      .catch((err: unknown) => err);
    t.ok(e instanceof SqlPolicyError, `${bad}: refused (${String(e)})`);
  }
});

t.test('the files one statement reads share a byte budget of twice the per-file limit', async (t) => {
  const srv = await fileServer();
  t.teardown(() => srv.close());
  // 30,000 bytes each: two fit under a 20 kB per-file limit's 40 kB budget only if each is under 20 kB
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, httpFilesMaxBytes: 40_000 });
  const names = ['big.csv', 'many.csv', 'people.csv'];
  const options = { files: names.map((n) => ({ table: n.replace(/\..*$/, ''), url: `${srv.base}/${n}` })) };
  const one = await query(c, ['read:*'], 'SELECT count(*)::int AS n FROM big', { secret: TOKEN, options });
  t.same(one.rows, [{ n: 3000 }], 'alone, the 30 kB file fits its 40 kB limit');
  const three = await query(c, ['read:*'], 'SELECT (SELECT count(*) FROM big) + (SELECT count(*) FROM many) + (SELECT count(*) FROM people) AS n', { secret: TOKEN, options }).catch(
    (e: unknown) => e as ApiError,
  );
  t.equal((three as ApiError).code, 'invalid_request');
  t.equal((three as ApiError).details?.['reason'], 'file_too_large');
  t.match((three as ApiError).message, /its share of the 80000 bytes the 3 files of one statement may hold together/);
});

t.test('listings are free, so each organization lists its files one listing at a time (and a few run at once in all)', async (t) => {
  // the file server holds every answer until the test lets it go
  let letGo: () => void = () => undefined;
  let held = new Promise<void>((r) => (letGo = r));
  const srv = await provider(async (_req, res) => {
    await held;
    res.writeHead(200, { 'content-type': 'text/csv' });
    res.end('a,b\n1,x\n');
  }, { key: cert.keyPem, cert: cert.certPem });
  t.teardown(() => srv.close());
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, maxEngines: 2 });
  const options = { files: [{ table: 'slow', url: `${srv.base}/slow.csv` }] };
  const seen = async (n: number): Promise<void> => {
    for (let i = 0; i < 100 && srv.seen.length < n; i++) await new Promise((r) => setTimeout(r, 20));
  };
  const settle = () => new Promise((r) => setTimeout(r, 300));

  const first = describe(c, ['read:slow'], { secret: '', options, orgId: 'org_a' });
  await seen(1);
  const second = describe(c, ['read:slow'], { secret: '', options, orgId: 'org_a' });
  await settle();
  t.equal(srv.seen.length, 1, 'a second listing of the same organization waits: nothing fetched for it yet');

  const other = describe(c, ['read:slow'], { secret: '', options, orgId: 'org_b' });
  await seen(2);
  t.equal(srv.seen.length, 2, 'another organization is not held up');
  const third = describe(c, ['read:slow'], { secret: '', options, orgId: 'org_c' });
  await settle();
  t.equal(srv.seen.length, 2, 'at most maxEngines listings run at once in all');

  // past its deadline a waiting listing is refused with when to retry, having fetched nothing
  const late = await describe(c, ['read:slow'], { secret: '', options, orgId: 'org_a', timeoutMs: 200 }).catch((e: unknown) => e);
  t.ok(late instanceof ApiError);
  t.equal((late as ApiError).code, 'rate_limited');
  t.equal((late as ApiError).details?.['reason'], 'listing_busy');
  t.equal((late as ApiError).headers?.['Retry-After'], '1');
  t.equal(srv.seen.length, 2);
  // stopped while waiting (a revocation): it answers at once, not at its deadline
  const stop = new AbortController();
  const waiting = describe(c, ['read:slow'], { secret: '', options, orgId: 'org_a', signal: stop.signal }).catch((e: unknown) => e);
  await settle();
  const stoppedAt = Date.now();
  stop.abort(new Error('revoked'));
  const stopped = await waiting;
  t.ok(Date.now() - stoppedAt < 1000, 'the stopped listing answered at once');
  t.equal((stopped as ApiError).details?.['reason'], 'listing_busy');
  t.equal(srv.seen.length, 2, 'and fetched nothing');

  letGo();
  held = Promise.resolve();
  for (const listing of await Promise.all([first, second, other, third])) t.same(listing.tables.map((x) => [x.name, x.columns.map((col) => col.name)]), [['slow', ['a', 'b']]]);
  t.equal(srv.seen.length, 4, 'the waiting listings ran once the first ones finished');
});
