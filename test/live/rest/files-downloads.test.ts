/**
 * http-files downloads in process (the connector, a real HTTPS file server on port 0): admitted
 * per organization and in all, shared while in flight (never across organizations or
 * credentials), stopped when nobody waits for them; a CSV read piece by piece as it arrives
 * reads as it does whole; the byte limit applies to every byte, before what the bytes hold.
 */
import { gzipSync } from 'node:zlib';
import t, { type Test } from 'tap';
import { createCa, issueServerCertificate } from '../../../pki/index.js';
import { ApiError } from '../../../control-plane/errors.js';
import { CsvError, parseCsv } from '../../../control-plane/live/rest/index.js';
import { CsvReader, type CsvLimits } from '../../../control-plane/live/rest/csv.js';
import { connector, engines, provider, query, type Provider, type Seen } from './helpers.js';

t.before(() => engines.warm());
t.teardown(() => engines.close());

const ca = createCa({ keyBits: 2048 });
const cert = issueServerCertificate(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
const CSV = `n,label\n${Array.from({ length: 50 }, (_, i) => `${i},row ${i}`).join('\n')}\n`;

/** A file server holding every answer until `letGo()`; `closed` counts answers the client gave up on. */
async function heldServer(t: Test): Promise<{ srv: Provider; letGo: () => void; closed: () => number; seen: (n: number) => Promise<void> }> {
  let letGo: () => void = () => undefined;
  const held = new Promise<void>((r) => (letGo = r));
  let closed = 0;
  const srv = await provider(async (_req: Seen, res) => {
    res.on('close', () => {
      if (!res.writableEnded) closed++;
    });
    await held;
    if (res.destroyed) return;
    res.writeHead(200, { 'content-type': 'text/csv' });
    res.end(CSV);
  }, { key: cert.keyPem, cert: cert.certPem });
  t.teardown(() => srv.close());
  const seen = async (n: number): Promise<void> => {
    for (let i = 0; i < 200 && srv.seen.length < n; i++) await new Promise((r) => setTimeout(r, 20));
  };
  return { srv, letGo, closed: () => closed, seen };
}

const settle = (): Promise<unknown> => new Promise((r) => setTimeout(r, 300));
const files = (base: string, ...names: string[]) => ({ files: names.map((n) => ({ table: n, url: `${base}/${n}.csv` })) });
const SQL = (table: string): string => `SELECT count(*)::int AS n FROM ${table}`;

t.test('the same file wanted by several statements at once is downloaded once; never across organizations or credentials', async (t) => {
  const { srv, letGo, seen } = await heldServer(t);
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, maxEngines: 2 });
  const options = files(srv.base, 'shared');
  const run = (orgId: string, secret: string) => query(c, ['read:shared'], SQL('shared'), { secret, options, orgId, timeoutMs: 30_000 });
  const sameOrg = Array.from({ length: 4 }, () => run('org_a', 'token-one-0123456789'));
  await seen(1);
  const otherOrg = run('org_b', 'token-one-0123456789');
  const otherCredential = run('org_a', 'token-two-0123456789');
  await seen(2);
  await settle();
  t.equal(srv.seen.length, 2, "one download for org_a's 4 statements, one for org_b's (org_a's other credential waits for org_a's place)");
  t.same(srv.seen.map((s) => s.headers['authorization']), ['Bearer token-one-0123456789', 'Bearer token-one-0123456789']);
  letGo();
  for (const r of await Promise.all([...sameOrg, otherOrg, otherCredential])) t.same(r.rows, [{ n: 50 }]);
  t.equal(srv.seen.length, 3, 'the other credential downloaded the file itself');
  t.equal(srv.seen[2]?.headers['authorization'], 'Bearer token-two-0123456789');
});

t.test('downloads are admitted: one per organization and two in all here; a statement still waiting at its deadline is 429 downloads_busy, having fetched nothing', async (t) => {
  const { srv, letGo, seen } = await heldServer(t);
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, maxEngines: 2 });
  const run = (orgId: string, table: string, o: { timeoutMs?: number; signal?: AbortSignal } = {}) =>
    query(c, [`read:${table}`], SQL(table), { secret: '', options: files(srv.base, table), orgId, timeoutMs: o.timeoutMs ?? 30_000, ...(o.signal ? { signal: o.signal } : {}) });
  const a = run('org_a', 'a1');
  await seen(1);
  const late = await run('org_a', 'a2', { timeoutMs: 300 }).catch((e: unknown) => e);
  t.ok(late instanceof ApiError);
  t.equal((late as ApiError).code, 'rate_limited');
  t.equal((late as ApiError).details?.['reason'], 'downloads_busy');
  t.equal((late as ApiError).headers?.['Retry-After'], '1');
  t.equal(srv.seen.length, 1, "org_a's second file was not fetched");

  const b = run('org_b', 'b1');
  await seen(2);
  const cWaits = run('org_c', 'c1');
  await settle();
  t.same(srv.seen.map((s) => s.path).sort(), ['/a1.csv', '/b1.csv'], 'at most two downloads at once in all');

  // stopped while waiting (a revocation): it answers at once, fetching nothing
  const stop = new AbortController();
  const waiting = run('org_a', 'a3', { signal: stop.signal }).catch((e: unknown) => e);
  await settle();
  stop.abort(new Error('revoked'));
  t.ok((await waiting) instanceof ApiError);
  t.equal(srv.seen.length, 2);

  letGo();
  for (const r of await Promise.all([a, b, cWaits])) t.same(r.rows, [{ n: 50 }]);
  t.same(srv.seen.map((s) => s.path).sort(), ['/a1.csv', '/b1.csv', '/c1.csv'], 'the waiting one ran once a place was free');
});

t.test('a download nobody waits for any more is stopped, and its place serves the next statement', async (t) => {
  const { srv, letGo, seen, closed } = await heldServer(t);
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, maxEngines: 2 });
  const stop = new AbortController();
  const first = query(c, ['read:slow'], SQL('slow'), { secret: '', options: files(srv.base, 'slow'), orgId: 'org_a', timeoutMs: 30_000, signal: stop.signal }).catch((e: unknown) => e);
  await seen(1);
  const next = query(c, ['read:next'], SQL('next'), { secret: '', options: files(srv.base, 'next'), orgId: 'org_a', timeoutMs: 30_000 });
  await settle();
  t.equal(srv.seen.length, 1, 'the next statement of the organization waits for its place');
  stop.abort(new Error('revoked'));
  t.equal(((await first) as ApiError).code, 'query_timeout');
  await seen(2);
  t.equal(srv.seen[1]?.path, '/next.csv', 'the place went to the next statement');
  for (let i = 0; i < 100 && closed() < 1; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(closed(), 1, 'the abandoned download was stopped at the file server');
  letGo();
  t.same((await next).rows, [{ n: 50 }]);
});

t.test('the byte limit applies to every byte received, before what they hold: a malformed file over the limit is file_too_large', async (t) => {
  const body = `a,b\n1,2,3\n${'4,5\n'.repeat(10_000)}`;
  const srv = await provider((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/csv' });
    res.end(body);
  }, { key: cert.keyPem, cert: cert.certPem });
  t.teardown(() => srv.close());
  const small = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, httpFilesMaxBytes: 20_000 });
  const over = await query(small, ['read:bad'], SQL('bad'), { secret: '', options: files(srv.base, 'bad') }).catch((e: unknown) => e);
  t.equal((over as ApiError).details?.['reason'], 'file_too_large');
  const big = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true });
  const malformed = await query(big, ['read:bad'], SQL('bad'), { secret: '', options: files(srv.base, 'bad') }).catch((e: unknown) => e);
  t.equal((malformed as ApiError).details?.['reason'], 'file_malformed');
  t.match((malformed as ApiError).message, /line 2: 3 fields where the header has 2/);
  // a row cap reached early: the rest is only counted, and the limit still applies to it
  const capped = await query(big, ['read:bad'], 'SELECT count(*)::int AS n FROM bad', { secret: '', options: { files: [{ table: 'bad', url: `${srv.base}/bad.csv` }] }, maxRows: 1 }).catch((e: unknown) => e);
  t.equal((capped as ApiError).details?.['reason'], 'file_malformed', 'the malformed record is within the cap');
});

t.test('a CSV read piece by piece reads as it does whole', async (t) => {
  const lim: CsvLimits = { maxRows: 100, maxFieldChars: 50, maxColumns: 3 };
  const inputs = [
    'a,b\n1,2',
    'a,b\r\n"x\r\ny",""""\r\n',
    'a,b\n1\n',
    'a\nab"c\n',
    'a\n1\n2\n3\n',
    '\uFEFFa,b\r\n\r\n"q ""w"" e",\r\n3,4',
    'a,b\n"x"y,1\n',
    'a,b,c,d\n',
    `a\n"${'x'.repeat(60)}"\n`,
    `a\n${'x'.repeat(60)}\n`,
    '',
    'a\n"x\n\n\n',
    'a,b\n1,2,3\n',
    'a,b\n1,"2"\r',
    'a,b\n,\n,,\n',
  ];
  const outcome = (f: () => unknown): unknown => {
    try {
      return f();
    } catch (err) {
      return err instanceof CsvError ? `CsvError ${err.message}` : err;
    }
  };
  for (const input of inputs) {
    for (const limits of [lim, { ...lim, maxRows: 2 }]) {
      const whole = outcome(() => parseCsv(input, limits));
      for (const size of [1, 2, 3, 5, 64]) {
        const pieces = outcome(() => {
          const r = new CsvReader(limits);
          for (let i = 0; i < input.length; i += size) r.push(input.slice(i, i + size));
          return r.end();
        });
        t.same(pieces, whole, `${JSON.stringify(input).slice(0, 40)} in pieces of ${size}, ${limits.maxRows} rows`);
      }
    }
  }
  const many = new CsvReader({ maxRows: 3, maxFieldChars: 1000, maxColumns: 5 });
  many.push('n\n1\n2\n3\n4\n');
  t.ok(many.full, 'the row cap full and one more record seen: the rest is not needed');
  many.push('"never closed');
  t.same(many.end(), { header: ['n'], rows: [['1'], ['2'], ['3']], truncated: true });
});

t.test('the statement that started a shared download going away does not stop it for the others', async (t) => {
  const { srv, letGo, seen, closed } = await heldServer(t);
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, maxEngines: 2 });
  const options = files(srv.base, 'shared');
  const stop = new AbortController();
  const run = (signal?: AbortSignal) => query(c, ['read:shared'], SQL('shared'), { secret: '', options, orgId: 'org_a', timeoutMs: 30_000, ...(signal ? { signal } : {}) });
  const first = run(stop.signal).catch((e: unknown) => e);
  await seen(1);
  const sharers = [run(), run()];
  await settle();
  stop.abort(new Error('the client went away'));
  t.equal(((await first) as ApiError).code, 'query_timeout', 'the first statement stopped');
  await settle();
  t.equal(closed(), 0, 'its download goes on for the statements sharing it');
  letGo();
  for (const r of await Promise.all(sharers)) t.same(r.rows, [{ n: 50 }]);
  t.equal(srv.seen.length, 1, 'downloaded once');
  // every sharer gone: a statement now downloads it again (nothing finished is handed on)
  t.same((await run()).rows, [{ n: 50 }]);
  t.equal(srv.seen.length, 2);
});

t.test('a shared download that fails fails every statement sharing it, and is not remembered', async (t) => {
  let letGo: () => void = () => undefined;
  const held = new Promise<void>((r) => (letGo = r));
  let fail = true;
  const srv = await provider(async (_req, res) => {
    if (fail) {
      await held;
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('gone');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/csv' });
    res.end(CSV);
  }, { key: cert.keyPem, cert: cert.certPem });
  t.teardown(() => srv.close());
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, maxEngines: 2 });
  const options = files(srv.base, 'flaky');
  const run = () => query(c, ['read:flaky'], SQL('flaky'), { secret: '', options, orgId: 'org_a', timeoutMs: 30_000 });
  const statements = Array.from({ length: 3 }, () => run().catch((e: unknown) => e));
  for (let i = 0; i < 200 && srv.seen.length < 1; i++) await new Promise((r) => setTimeout(r, 20));
  await settle();
  letGo();
  const errors = await Promise.all(statements);
  t.equal(srv.seen.length, 1, 'one download for the three');
  for (const e of errors) {
    t.ok(e instanceof ApiError, String(e));
    t.equal((e as ApiError).code, (errors[0] as ApiError).code, 'the same error for each');
  }
  fail = false;
  t.same((await run()).rows, [{ n: 50 }], 'the next statement downloads the file again');
  t.equal(srv.seen.length, 2);
});

t.test('a hostile file server: an endless body, a slow drip, a short body, a gzip bomb', async (t) => {
  const endless = (res: import('node:http').ServerResponse): void => {
    res.writeHead(200, { 'content-type': 'text/csv' });
    const piece = Buffer.from('1,2\n'.repeat(4096));
    const pump = (): void => {
      while (!res.destroyed) if (!res.write(piece)) return void res.once('drain', pump);
    };
    res.write('a,b\n');
    pump();
  };
  let dripClosed = false;
  const timers = new Set<NodeJS.Timeout>();
  t.teardown(() => timers.forEach(clearInterval));
  const handlers: Record<string, (res: import('node:http').ServerResponse) => void> = {
    '/endless.csv': endless,
    '/drip.csv': (res) => {
      res.writeHead(200, { 'content-type': 'text/csv' });
      res.write('a,b\n');
      res.on('close', () => (dripClosed = true));
      const timer = setInterval(() => {
        if (res.destroyed) return void clearInterval(timer);
        res.write('1,2\n');
      }, 50);
      timers.add(timer);
    },
    // declares more than it sends, then hangs up
    '/short.csv': (res) => {
      res.writeHead(200, { 'content-type': 'text/csv', 'content-length': '100000' });
      res.write('a,b\n1,2\n');
      setTimeout(() => res.destroy(), 50);
    },
    // 10 MB of zeros gzipped to about 10 KB: never inflated, so read as the bytes it is
    '/bomb.csv': (res) => {
      res.writeHead(200, { 'content-type': 'text/csv', 'content-encoding': 'gzip' });
      res.end(gzipSync(Buffer.alloc(10_000_000)));
    },
  };
  const srv = await provider((req, res) => (handlers[req.path] ?? ((r) => void r.writeHead(404).end()))(res), { key: cert.keyPem, cert: cert.certPem });
  t.teardown(() => srv.close());
  const c = connector('http-files', { ca: ca.certPem, httpFilesAllowPrivate: true, httpFilesMaxBytes: 50_000 });
  const run = (table: string, timeoutMs = 30_000) => query(c, [`read:${table}`], SQL(table), { secret: '', options: files(srv.base, table), timeoutMs }).catch((e: unknown) => e);
  const endlessErr = (await run('endless')) as ApiError;
  t.equal(endlessErr.details?.['reason'], 'file_too_large', 'an endless body stops at the byte limit');
  const drip = (await run('drip', 600)) as ApiError;
  t.equal(drip.code, 'query_timeout', 'a slow drip stops at the deadline');
  for (let i = 0; i < 250 && !dripClosed; i++) await new Promise((r) => setTimeout(r, 20));
  t.ok(dripClosed, 'and the file server is hung up on');
  const short = (await run('short')) as ApiError;
  t.ok(short instanceof ApiError, 'a body shorter than it declared is an error');
  t.notOk(short.code === 'query_timeout' || short.code === 'internal_error', `not a hang or a crash: ${short.code}`);
  const bomb = await run('bomb');
  // inflated, its 10 MB would be over the 50 KB limit (file_too_large): read as the 10 KB it is
  t.notOk(bomb instanceof ApiError, `read as its bytes: ${String(bomb)}`);
  t.equal(((bomb as { rows?: unknown[] }).rows ?? []).length, 1, 'one count row');
  // the server still answers a good file afterwards
  handlers['/good.csv'] = (res) => {
    res.writeHead(200, { 'content-type': 'text/csv' });
    res.end(CSV);
  };
  t.same(((await run('good')) as { rows: unknown }).rows, [{ n: 50 }]);
});
