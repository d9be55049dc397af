/**
 * Where `svc-relay run` takes the database URL from (relay-agent/database-url.ts): the command
 * line (with a warning when it holds a password), an owner-only file, DATABASE_URL, or libpq's
 * PG* variables, in that order; a file others can read, a symbolic link, an empty file, or both
 * flags at once are refused. Also through the CLI: a refused source exits 2 before anything dials.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parse as parseConnectionString } from 'pg-connection-string';
import { main } from '../../cli/svc-relay.js';
import { resolveDatabaseUrl, urlFromPgEnv } from '../../relay-agent/database-url.js';

const dir = mkdtempSync(join(tmpdir(), 'svc-dburl-'));
const file = (name: string, content: string, mode: number): string => {
  const p = join(dir, name);
  writeFileSync(p, content);
  chmodSync(p, mode);
  return p;
};
const code = (f: () => unknown): string => {
  try {
    f();
    return 'accepted';
  } catch (err) {
    return (err as { code?: string }).code ?? 'thrown';
  }
};

t.test('the order: --database-url, --database-url-file, DATABASE_URL, PG*', async (t) => {
  const secret = file('url', 'postgres://reader:s3cret@db.internal:5432/app\n# a comment line is ignored\n', 0o600);
  const env = { DATABASE_URL: 'postgres://env@h/db', PGHOST: 'pg-host', PGDATABASE: 'pgdb' };
  const flag = resolveDatabaseUrl({ databaseUrl: 'postgres://reader:pw@h/db', env });
  t.equal(flag.source, '--database-url');
  t.match(flag.warning, /command line.*ps/, 'a password on the command line is warned about');
  t.equal(resolveDatabaseUrl({ databaseUrl: 'postgres://reader@h/db', env }).warning, undefined, 'no password, no warning');
  for (const u of ['postgres://u:S3cret@/x?host=/tmp', 'postgres://db/x?user=u&password=S3cret']) t.ok(resolveDatabaseUrl({ databaseUrl: u, env }).warning, `a password is warned about in ${u.replace('S3cret', '…')}`);
  const fromFile = resolveDatabaseUrl({ databaseUrlFile: secret, env });
  t.same([fromFile.source, fromFile.url], ['--database-url-file', 'postgres://reader:s3cret@db.internal:5432/app'], 'the file wins over the environment; its first line');
  t.equal(resolveDatabaseUrl({ env }).source, 'DATABASE_URL');
  t.same(resolveDatabaseUrl({ env: { PGHOST: 'pg-host', PGDATABASE: 'pgdb' } }), { url: 'postgres://localhost/pgdb?host=pg-host', source: 'PG* environment variables' });
  t.equal(code(() => resolveDatabaseUrl({ databaseUrl: 'postgres://a@h/db', databaseUrlFile: secret, env })), 'RELAY_ERR_INVALID_ARGUMENT', 'both flags: refused, never a silent choice');
  t.equal(code(() => resolveDatabaseUrl({ env: {} })), 'RELAY_ERR_INVALID_ARGUMENT', 'nothing given: refused with what to give');
});

t.test('a URL file must be the owner’s alone, a regular file, and not empty', async (t) => {
  t.equal(code(() => resolveDatabaseUrl({ databaseUrlFile: file('open', 'postgres://a:b@h/db', 0o644), env: {} })), 'RELAY_ERR_INVALID_ARGUMENT', 'readable by others (0644): refused');
  t.equal(code(() => resolveDatabaseUrl({ databaseUrlFile: file('group', 'postgres://a:b@h/db', 0o640), env: {} })), 'RELAY_ERR_INVALID_ARGUMENT', 'readable by the group (0640): refused');
  t.equal(code(() => resolveDatabaseUrl({ databaseUrlFile: file('empty', '\n', 0o600), env: {} })), 'RELAY_ERR_INVALID_ARGUMENT', 'empty: refused');
  t.equal(code(() => resolveDatabaseUrl({ databaseUrlFile: dir, env: {} })), 'RELAY_ERR_INVALID_ARGUMENT', 'a directory: refused');
  t.equal(code(() => resolveDatabaseUrl({ databaseUrlFile: join(dir, 'missing'), env: {} })), 'RELAY_ERR_INVALID_ARGUMENT', 'missing: refused');
  const target = file('target', 'postgres://a:b@h/db', 0o600);
  const link = join(dir, 'link');
  symlinkSync(target, link);
  t.equal(code(() => resolveDatabaseUrl({ databaseUrlFile: link, env: {} })), 'RELAY_ERR_INVALID_ARGUMENT', 'a symbolic link: refused');
  t.equal(resolveDatabaseUrl({ databaseUrlFile: file('readonly', 'postgres://a:b@h/db', 0o400), env: {} }).url, 'postgres://a:b@h/db', '0400 is fine');
  t.equal(resolveDatabaseUrl({ databaseUrlFile: file('crlf', 'postgres://a:b@h/db\r\n', 0o600), env: {} }).url, 'postgres://a:b@h/db', 'a CRLF line end is not part of the URL');
  t.match(code(() => resolveDatabaseUrl({ databaseUrlFile: file('blank-first', '\n\npostgres://a@h/db\n', 0o600), env: {} })), 'RELAY_ERR_INVALID_ARGUMENT', 'a blank first line: refused');
  t.throws(() => resolveDatabaseUrl({ databaseUrlFile: join(dir, 'blank-first'), env: {} }), /has an empty first line/, 'and not called empty (review: it said "is empty")');
  const fifo = join(dir, 'fifo');
  execFileSync('mkfifo', ['-m', '600', fifo]);
  t.equal(code(() => resolveDatabaseUrl({ databaseUrlFile: fifo, env: {} })), 'RELAY_ERR_INVALID_ARGUMENT', 'a named pipe: refused at once, not waited on (review: it hung)');
});

t.test('a URL node-postgres could not use is refused at start, from every source, without echoing it', async (t) => {
  // review: `not a url S3cret` in a 0600 file, or a port out of range, started a relay that
  // reported itself healthy while every query failed with relay_unavailable
  // review: an unencoded # in a password (`u:1234#S3cret@db`) was read as host `u`, port 1234
  const bad = ['not a url S3cret', 'mysql://u:S3cret@h/db', 'postgres://u:S3cret@127.0.0.1:99999/db', 'postgres://u:S3cret/x@h/db', 'S3cret', 'postgres://u:1234#S3cret@db.internal/app', 'postgres://u:S3cret#x@h/db'];
  for (const u of bad) {
    for (const sources of [{ databaseUrl: u, env: {} }, { databaseUrlFile: file('bad', u, 0o600), env: {} }, { env: { DATABASE_URL: u } }]) {
      let message = '';
      try {
        resolveDatabaseUrl(sources);
      } catch (err) {
        message = `${(err as { code?: string }).code} | ${(err as Error).message}`;
      }
      t.match(message, /^RELAY_ERR_INVALID_ARGUMENT \| .*the database URL from (--database-url|--database-url-file|DATABASE_URL) (is not a postgres:\/\/ URL|cannot be parsed|has a # before its @)/, `refused: ${u.replace('S3cret', '…')}`);
      t.notMatch(message, /S3cret/, 'never echoed');
    }
  }
  // what node-postgres accepts stays accepted (its own parser agrees)
  const good = ['postgres://reader:pw@db.internal:5432/app', 'postgresql://h/db?sslmode=require', 'postgres://u:S3cret@/x?host=/tmp', 'postgres:///db?host=/var/run/postgresql', 'postgres://u:p%zz ss@h/db', 'socket:/var/run/postgresql?db=app', '/var/run/postgresql app', 'postgres://h1,h2/db'];
  for (const u of good) {
    t.doesNotThrow(() => parseConnectionString(u), `node-postgres parses ${u}`);
    t.equal(resolveDatabaseUrl({ env: { DATABASE_URL: u } }).url, u, `accepted: ${u}`);
  }
  t.equal(resolveDatabaseUrl({ env: { PGHOST: 'fe80::1%eth0', PGDATABASE: 'app' } }).source, 'PG* environment variables', 'the URL built from PG* passes too');
});

t.test('libpq variables: escaped, IPv6, Unix sockets, sslmode', async (t) => {
  t.equal(urlFromPgEnv({}), undefined, 'none set: not a source');
  t.equal(urlFromPgEnv({ PGUSER: 'only-user' }), undefined, 'a user alone names no database');
  // what node-postgres reads back from the URL built (its own parser)
  const read = (env: NodeJS.ProcessEnv) => {
    const c = parseConnectionString(urlFromPgEnv(env) as string);
    return { host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };
  };
  t.same(read({ PGHOST: 'db', PGPORT: '6432', PGUSER: 'rea der', PGPASSWORD: 'p@ss:w/rd#?%', PGDATABASE: 'my app', PGSSLMODE: 'verify-full' }), { host: 'db', port: '6432', user: 'rea der', password: 'p@ss:w/rd#?%', database: 'my app' });
  t.same(read({ PGHOST: '::1', PGDATABASE: 'app' }).host, '::1');
  t.same(read({ PGHOST: '[::1]', PGDATABASE: 'app' }).host, '::1', 'an IPv6 address already in brackets');
  t.same(read({ PGHOST: 'fe80::1%eth0', PGDATABASE: 'app' }).host, 'fe80::1%eth0', 'with its zone');
  t.same(read({ PGHOST: '/var/run/postgresql', PGPORT: '5433', PGUSER: 'r', PGDATABASE: 'app' }), { host: '/var/run/postgresql', port: '5433', user: 'r', password: '', database: 'app' });
  t.equal(code(() => urlFromPgEnv({ PGHOST: 'db', PGPORT: '5432/evil?host=/tmp' })), 'RELAY_ERR_INVALID_ARGUMENT', 'a PGPORT that is not a port is refused (no URL syntax gets in)');
  t.equal(code(() => urlFromPgEnv({ PGHOST: 'h1,h2', PGDATABASE: 'app' })), 'RELAY_ERR_INVALID_ARGUMENT', 'several hosts: refused, not read as one name');
  t.equal(code(() => urlFromPgEnv({ PGDATABASE: 'a#b' })), 'RELAY_ERR_INVALID_ARGUMENT', 'a database name the URL cannot carry: refused, not changed');
});

t.test('the CLI: a refused source exits 2 and says why; the source (never the URL) is logged', async (t) => {
  const out = { err: '' };
  const io = { out: () => undefined, err: (s: string) => void (out.err += s), onStop: () => undefined };
  const open = file('cli-open', 'postgres://reader:topsecret@127.0.0.1:1/db', 0o644);
  t.equal(await main(['run', '--config-dir', join(dir, 'nope'), '--database-url-file', open], io), 2);
  t.match(out.err, /can be read by other users \(mode 644\); chmod 600 it/);
  t.notMatch(out.err, /topsecret/, 'the password is never printed');
  out.err = '';
  const good = file('cli-good', 'postgres://reader:topsecret@127.0.0.1:1/db', 0o600);
  t.equal(await main(['run', '--config-dir', join(dir, 'nope'), '--database-url-file', good], io), 1, 'accepted: it goes on to the (missing) configuration');
  t.match(out.err, /database URL from --database-url-file/);
  t.match(out.err, /RELAY_ERR_CONFIG_MISSING/);
  t.notMatch(out.err, /topsecret/);
  out.err = '';
  const garbled = file('cli-garbled', 'topsecret', 0o600);
  t.equal(await main(['run', '--config-dir', join(dir, 'nope'), '--database-url-file', garbled], io), 2, 'not a URL: exit 2 before anything dials');
  t.match(out.err, /the database URL from --database-url-file is not a postgres:\/\/ URL/);
  t.notMatch(out.err, /topsecret/);
});
