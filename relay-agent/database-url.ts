/**
 * Where `svc-relay run` reads the database URL from, so its password need not be on the command
 * line (visible to every user in `ps`). In this order, the first that is given wins:
 *
 * 1. `--database-url <url>` (a warning is printed when the URL holds a password);
 * 2. `--database-url-file <path>`: the first line of a regular file readable by its owner only
 *    (mode 0600 or stricter; a file others could read is refused);
 * 3. the `DATABASE_URL` environment variable;
 * 4. the libpq variables `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGSSLMODE`
 *    (used when at least `PGHOST` or `PGDATABASE` is set; a `PGHOST` starting with `/` is a Unix
 *    socket directory; no `PGHOST` means localhost over TCP, not libpq's default socket;
 *    `PGSSLMODE` is read as node-postgres reads `sslmode`; other libpq variables are not read).
 *
 * Giving both `--database-url` and `--database-url-file` is a usage error (never a silent choice),
 * and so is a URL node-postgres could not use (not `postgres://`, `postgresql://` or `socket:`, or
 * one it cannot parse): refused at start, naming its source but never echoing it, rather than a
 * relay that looks healthy and fails every query.
 */
import { closeSync, fstatSync, openSync, readSync, constants } from 'node:fs';
import { RelayError } from './errors.js';

export interface DatabaseUrlSources {
  readonly databaseUrl?: string;
  readonly databaseUrlFile?: string;
  readonly env: NodeJS.ProcessEnv;
}

export interface ResolvedDatabaseUrl {
  readonly url: string;
  /** where it came from, for the log line (never the URL itself) */
  readonly source: '--database-url' | '--database-url-file' | 'DATABASE_URL' | 'PG* environment variables';
  /** something the operator should know (e.g. a password on the command line) */
  readonly warning?: string;
}

const MAX_FILE_BYTES = 16 * 1024;

function invalid(message: string): RelayError {
  return new RelayError('RELAY_ERR_INVALID_ARGUMENT', message);
}

function hasPassword(url: string): boolean {
  // the authority's user:password@, or a password= parameter (what node-postgres reads)
  return /^[a-z]+:\/\/[^/?#@]*:[^/?#@]*@/i.test(url) || /[?&]password=/i.test(url);
}

/** The first line of an owner-only regular file (no symlink tricks: the opened file is the one checked). */
export function readSecretFile(path: string): string {
  let fd: number;
  try {
    // O_NONBLOCK: opening a named pipe must not wait for a writer (fstat refuses it next)
    fd = openSync(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    throw invalid(`--database-url-file ${path} cannot be opened (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); it must be a regular file, not a symbolic link`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw invalid(`--database-url-file ${path} is not a regular file`);
    if ((st.mode & 0o077) !== 0) throw invalid(`--database-url-file ${path} can be read by other users (mode ${(st.mode & 0o777).toString(8)}); chmod 600 it`);
    const uid = process.getuid?.();
    if (uid !== undefined && uid !== 0 && st.uid !== uid) throw invalid(`--database-url-file ${path} belongs to another user (uid ${st.uid}); it must be this user's own file`);
    if (st.size > MAX_FILE_BYTES) throw invalid(`--database-url-file ${path} is ${st.size} bytes; a database URL file holds one line`);
    const buf = Buffer.alloc(st.size);
    const n = st.size > 0 ? readSync(fd, buf, 0, st.size, 0) : 0;
    const text = buf.subarray(0, n).toString('utf8');
    const line = text.split(/\r?\n/)[0]?.trim() ?? '';
    if (line === '') throw invalid(`--database-url-file ${path} ${text.trim() === '' ? 'is empty' : 'has an empty first line'}; write the postgres:// URL on its first line`);
    return line;
  } finally {
    closeSync(fd);
  }
}

/** The database URL from libpq's variables, or undefined when they name no database. */
export function urlFromPgEnv(env: NodeJS.ProcessEnv): string | undefined {
  const host = env['PGHOST']?.replace(/^\[(.*)\]$/, '$1');
  const database = env['PGDATABASE'];
  if (!host && !database) return undefined;
  const user = env['PGUSER'];
  const password = env['PGPASSWORD'];
  const port = env['PGPORT'];
  if (port !== undefined && port !== '' && !/^\d{1,5}$/.test(port)) throw invalid(`PGPORT must be a port number, got ${JSON.stringify(port)}`);
  if (host?.includes(',')) throw invalid('PGHOST names several hosts; svc-relay connects to one: give one host, or a URL');
  // node-postgres reads the database from the URL's path with decodeURI, which cannot give back these characters
  if (database !== undefined && /[#?/;,@:&=+$%]/.test(database)) throw invalid('PGDATABASE holds a character svc-relay cannot pass on (one of # ? / ; , @ : & = + $ %); give the database in a URL file instead');
  const auth = user ? `${encodeURIComponent(user)}${password ? `:${encodeURIComponent(password)}` : ''}@` : '';
  // the host (a name, an IPv6 address with its zone, or a socket directory) goes in the query,
  // which node-postgres decodes whole; the authority's localhost is then only a placeholder
  const params = new URLSearchParams();
  if (host) params.set('host', host);
  if (port) params.set('port', port);
  if (env['PGSSLMODE']) params.set('sslmode', env['PGSSLMODE']);
  const query = params.toString();
  return `postgres://${auth}localhost/${encodeURI(database ?? '')}${query ? `?${query}` : ''}`;
}

/**
 * Throws unless node-postgres can parse `url` as it would (pg-connection-string: a leading `/` is
 * a socket path; spaces and stray `%` are encoded first; an empty host after `user@` is allowed).
 * The message names the source, never the URL (it may hold a password).
 */
export function checkDatabaseUrl(url: string, source: ResolvedDatabaseUrl['source']): void {
  if (url.startsWith('/')) return;
  if (!/^(?:postgres|postgresql|socket):/i.test(url)) throw invalid(`the database URL from ${source} is not a postgres:// URL (postgres://user:password@host:5432/database)`);
  // a `#` starts the URL's fragment: one left unencoded in a password (`user:1234#x@db`) is read
  // as host `user`, port 1234, which parses but is not the database meant
  if (/#.*@/.test(url)) {
    throw invalid(`the database URL from ${source} has a # before its @: percent-encode # in the user name or password as %23`);
  }
  const text = / |%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(url) ? encodeURI(url).replace(/%25(\d\d)/g, '%$1') : url;
  if (!URL.canParse(text) && !URL.canParse(text.replace('@/', '@___DUMMY___/'))) {
    throw invalid(`the database URL from ${source} cannot be parsed (check the port, and percent-encode any of / ? # @ : in the user name or password)`);
  }
}

export function resolveDatabaseUrl(s: DatabaseUrlSources): ResolvedDatabaseUrl {
  const resolved = pickDatabaseUrl(s);
  checkDatabaseUrl(resolved.url, resolved.source);
  return resolved;
}

function pickDatabaseUrl(s: DatabaseUrlSources): ResolvedDatabaseUrl {
  if (s.databaseUrl !== undefined && s.databaseUrlFile !== undefined) {
    throw invalid('give the database URL once: --database-url or --database-url-file, not both');
  }
  if (s.databaseUrl !== undefined) {
    return {
      url: s.databaseUrl,
      source: '--database-url',
      ...(hasPassword(s.databaseUrl) ? { warning: 'the database password is on the command line, where other users can read it (ps); use --database-url-file, DATABASE_URL or PGPASSWORD instead' } : {}),
    };
  }
  if (s.databaseUrlFile !== undefined) return { url: readSecretFile(s.databaseUrlFile), source: '--database-url-file' };
  const fromEnv = s.env['DATABASE_URL']?.trim();
  if (fromEnv) return { url: fromEnv, source: 'DATABASE_URL' };
  const fromPg = urlFromPgEnv(s.env);
  if (fromPg) return { url: fromPg, source: 'PG* environment variables' };
  throw invalid('no database URL: give --database-url-file <path> (a 0600 file), set DATABASE_URL or the PG* variables (PGHOST, PGUSER, PGPASSWORD, PGDATABASE), or --database-url <url>');
}
