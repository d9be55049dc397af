/**
 * `svc` messages and output (issue #16, "Messages and surfaces"), the compiled CLI against a real
 * server: a refused statement (invalid_sql) ends with a `next:` line fitting its reason, and
 * `svc target` lists each table's columns without --json; with --json, a failure found before any
 * request is an error body on stdout too, as is an output file it cannot write (exit 2).
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t from 'tap';
import { SVC_CLI_VERSION } from '../../cli/svc/commands.js';
import { openConnection, signupAgent, type Agent } from '../helpers/server.js';
import type { RunResult } from './dist.js';
import { cliSession, type CliSession } from './session.js';

let session: CliSession;
let agent: Agent;
t.before(async () => {
  session = await cliSession('svc-cli-msg-');
  agent = await signupAgent(session.srv.url, 'CLI Words Co');
});
t.teardown(() => session.close());

const svc = (args: string[]): Promise<RunResult> => session.svc(args, { SVC_API_KEY: agent.key });

t.test('invalid_sql ends with a next: line that fits its reason', async (t) => {
  const conn = await openConnection(session.srv.url, agent.key, 'demo-healthcare', ['read:encounters']);
  const syntax = await svc(['query', conn, 'SELEC class_code FROM encounters']);
  t.equal(syntax.code, 4);
  t.match(syntax.stderr, /invalid_sql \(HTTP 400\)/);
  t.match(syntax.stderr, new RegExp(`\\nnext: fix the statement: one read \\(SELECT, WITH … SELECT, VALUES or TABLE\\)[^\\n]*svc schema ${conn} lists them`), 'names this connection');

  const complex = await svc(['query', conn, `SELECT 1 FROM encounters WHERE class_code IN (${Array.from({ length: 12_000 }, (_, i) => `'c${i}'`).join(',')})`]);
  t.equal(complex.code, 4);
  t.match(complex.stderr, /invalid_sql \(HTTP 400\)/);
  t.match(complex.stderr, /\nnext: split the statement or simplify it/);

  // a comment keeps the statement on the deparsed path, whose mis-printing of this expression is refused
  const unsupported = await svc(['query', conn, 'SELECT (ARRAY[ROW(1,2)])[1] -- deparsed']);
  t.equal(unsupported.code, 4);
  t.match(unsupported.stderr, /\nnext: write that expression another way \(a subquery or a CTE\)/);
});

t.test('a table outside the scopes: the next: line names svc schema for this connection', async (t) => {
  const conn = await openConnection(session.srv.url, agent.key, 'demo-healthcare', ['read:encounters']);
  for (const table of ['claims', 'nope']) {
    const r = await svc(['query', conn, `SELECT * FROM ${table}`]);
    t.equal(r.code, 4);
    t.match(r.stderr, /scope_violation \(HTTP 403\)/);
    t.match(r.stderr, new RegExp(`\\nnext: read only the tables this connection may read \\(svc schema ${conn} lists them with their columns\\)`), `${table}: names this connection`);
  }
});

t.test('svc target lists the columns of each table', async (t) => {
  const r = await svc(['target', 'demo-healthcare']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /\ntables:\n {2}patients\n {4}patient_id text, mrn text,/, 'a table without a time column');
  t.match(r.stdout, /\n {2}encounters \(time column period_start\)\n {4}encounter_id text, patient_id text,/);
  const json = JSON.parse((await svc(['target', 'demo-healthcare', '--json'])).stdout) as { tables: { name: string; columns: { name: string; type: string }[] }[] };
  for (const table of json.tables) {
    const block = r.stdout.split(`\n  ${table.name}`)[1]?.split(/\n {2}\S/)[0] ?? '';
    for (const c of table.columns) t.ok(block.includes(`${c.name} ${c.type}`), `${table.name}.${c.name} ${c.type} is listed`);
  }
  const tableLines = r.stdout.slice(r.stdout.indexOf('\ntables:\n')).split('\n');
  t.ok(tableLines.length > 12 && tableLines.every((line) => line.length <= 100), 'column lines are wrapped at 100 characters');
  const live = await svc(['target', 'postgres']);
  t.equal(live.code, 0, live.stderr);
  t.match(live.stdout, /tables: none listed here [^\n]*svc schema <connection_id>/);
});

t.test('every refused request ends with a next: line: invalid_request names the field, a 404 the list to look in', async (t) => {
  const topup = await svc(['topup', '50']);
  t.equal(topup.code, 4, topup.stderr);
  t.match(topup.stderr, /invalid_request \(HTTP 400\)/);
  t.match(topup.stderr, /\nnext: correct the [a-z_]+ value as the message says, then retry \(svc help <command> lists its arguments\)/);

  const cred = await svc(['credentials', 'delete', 'http-files']);
  t.equal(cred.code, 4, cred.stderr);
  t.match(cred.stderr, /not_found \(HTTP 404\)/);
  t.match(cred.stderr, /\nnext: check the id: svc credentials list/);

  const conn = await svc(['connection', 'conn_nope']);
  t.equal(conn.code, 4, conn.stderr);
  t.match(conn.stderr, /\nnext: check the id: svc connections\n?$/);

  const relay = await svc(['relay', 'delete', 'rly_nope']);
  t.equal(relay.code, 4, relay.stderr);
  t.match(relay.stderr, /\nnext: check the id: svc relay list/);
});

t.test('--json: a failure found before any request is a JSON error body on stdout too', async (t) => {
  const parse = (r: RunResult): { error: Record<string, unknown> } => JSON.parse(r.stdout) as { error: Record<string, unknown> };
  const noKey = await session.svc(['connections', '--json'], { SVC_API_KEY: '' });
  t.equal(noKey.code, 3, noKey.stderr);
  t.same(Object.keys(parse(noKey).error), ['code', 'message'], 'the API error shape, with no request id');
  t.equal(parse(noKey).error['code'], 'unauthorized');
  t.match(noKey.stderr, /no agent key/, 'the message is on stderr as well');

  const usage = await svc(['connections', '--json', '--no-such-option']);
  t.equal(usage.code, 2);
  t.equal(parse(usage).error['code'], 'usage_error');
  t.match(parse(usage).error['message'], /--no-such-option/);
  const afterDashes = await svc(['query', '--bogus', '--', '--json']);
  t.equal(afterDashes.code, 2);
  t.equal(afterDashes.stdout, '', 'a --json after -- is an argument, not the option');

  // no command (the help goes to stderr): a usage error, as `svc` alone is, not exit 0 with nothing on stdout
  for (const args of [['--json'], ['audit', '--json'], ['--json', 'help', 'no-such-command']]) {
    const none = await svc(args);
    t.equal(none.code, 2, `svc ${args.join(' ')}`);
    t.equal(parse(none).error['code'], 'usage_error', `svc ${args.join(' ')}`);
    t.match(none.stderr, /Usage: svc/, 'the help is on stderr');
  }
  t.equal((await svc(['audit'])).code, 2, 'without --json too');
  t.equal((await svc(['help'])).code, 0, 'help asked for is no failure');

  const badUrl = await svc(['connections', '--json', '--base-url', 'ftp://x']);
  t.equal(badUrl.code, 2);
  t.equal(parse(badUrl).error['code'], 'usage_error');

  const conf = path.join(session.dir, 'broken.json');
  fs.writeFileSync(conf, '{not json');
  const broken = await session.svc(['connections', '--json'], { SVC_CONFIG: conf });
  t.equal(broken.code, 2);
  t.equal(parse(broken).error['code'], 'config_unreadable');
  // review: `svc mcp --json` wrote that JSON onto stdout, which is the MCP channel
  const mcp = await session.svc(['mcp', '--json'], { SVC_CONFIG: conf }, '');
  t.equal(mcp.code, 2);
  t.equal(mcp.stdout, '', 'svc mcp: nothing on the MCP channel but JSON-RPC');
  t.match(mcp.stderr, /is not valid JSON/, 'the failure is on stderr');

  // review: the help and the version were text on stdout under --json
  const version = await svc(['--version', '--json']);
  t.same([version.code, JSON.parse(version.stdout)], [0, { version: SVC_CLI_VERSION }], '--version --json: JSON');
  for (const args of [['--help', '--json'], ['help', '--json'], ['query', '--help', '--json'], ['help', 'query', '--json']]) {
    const r = await svc(args);
    t.equal(r.code, 0, `svc ${args.join(' ')}`);
    t.match((JSON.parse(r.stdout) as { help: string }).help, /^Usage: svc/, `svc ${args.join(' ')}: the help as JSON on stdout`);
    t.match(r.stderr, /^Usage: svc/, 'and as text on stderr');
  }
  t.equal((await svc(['--version'])).stdout, `${SVC_CLI_VERSION}\n`, 'without --json: text');

  // a port nothing listens on, and a proxy answering a page of its own
  const closed = http.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const closedUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
  await new Promise<void>((r) => closed.close(() => r()));
  const unreachable = await svc(['connections', '--json', '--base-url', closedUrl]);
  t.equal(unreachable.code, 5);
  t.equal(parse(unreachable).error['code'], 'unreachable');

  const proxy = http.createServer((_req, res) => res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad Gateway</h1>'));
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => proxy.close(() => r())));
  const page = await svc(['connections', '--json', '--base-url', `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`]);
  t.equal(page.code, 5);
  t.same(parse(page).error, { code: 'http_502', message: '<h1>Bad Gateway</h1>' });
  // a JSON page whose `error` is not the API's error object (Fastify's own 503 body, say)
  const fastifyPage = '{"error":"Service Unavailable","message":"Service Unavailable","statusCode":503}';
  const other = http.createServer((_req, res) => res.writeHead(503, { 'content-type': 'application/json' }).end(fastifyPage));
  await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => other.close(() => r())));
  const foreign = await svc(['connections', '--json', '--base-url', `http://127.0.0.1:${(other.address() as AddressInfo).port}`]);
  t.equal(foreign.code, 5);
  t.same(parse(foreign).error, { code: 'http_503', message: fastifyPage }, 'the error shape, not the page as it came');

  const api = await svc(['connection', 'conn_nope', '--json']);
  t.equal(api.code, 4);
  t.equal(parse(api).error['code'], 'not_found');
  t.type(parse(api).error['request_id'], 'string', "an API error is the API's own body");
});

t.test('an output file svc cannot write is a usage error (exit 2) with a JSON body under --json, not an internal error', async (t) => {
  const conn = await openConnection(session.srv.url, agent.key, 'demo-healthcare', ['read:encounters']);
  const out = path.join(session.dir, 'no-such-folder', 'audit.jsonl');
  const r = await svc(['audit', 'export', conn, '-o', out, '--json']);
  t.equal(r.code, 2, r.stderr);
  t.notMatch(r.stderr, /internal error/);
  t.match(r.stderr, /cannot write/);
  const body = JSON.parse(r.stdout) as { error: Record<string, unknown> };
  t.equal(body.error['code'], 'usage_error');
});

const noProc = fs.existsSync('/proc/self') ? false : 'no /proc here to give an unwritable config path';
t.test('signup with a config file it cannot write is refused before the account is made', { skip: noProc }, async (t) => {
  // walk-through: the account was made, then storing its key failed, and the key was lost. Root
  // (as tests may run) writes through file modes, so the unwritable place is one no one can write:
  // a file in /proc, which reads as missing
  const orgs = async (): Promise<number> => Number((await session.srv.svc.store.query<{ n: number }>('SELECT count(*)::int AS n FROM orgs'))[0]?.n);
  const before = await orgs();
  const refused = await session.svc(['signup', '--org', 'Nowhere Co', '--agent', 'a', '--json'], { SVC_CONFIG: '/proc/svc-test-config.json', SVC_API_KEY: undefined });
  t.equal(refused.code, 2, refused.stderr);
  t.equal((JSON.parse(refused.stdout) as { error: { code: string } }).error.code, 'config_unwritable');
  t.match(refused.stderr, /no account was made: set SVC_CONFIG to a file you can write, or pass --no-save/);
  t.equal(await orgs(), before, 'no account was made');
  const text = await session.svc(['signup', '--org', 'Nowhere Co', '--agent', 'a'], { SVC_CONFIG: '/proc/svc-test-config.json', SVC_API_KEY: undefined });
  t.equal(text.code, 2);
  t.equal(await orgs(), before, 'nor without --json');
});

t.test('human output: scopes and nested objects as aligned lines, null as null (no JSON dumps, no SQL NULL outside query results)', async (t) => {
  const target = await svc(['target', 'demo-healthcare']);
  t.equal(target.code, 0, target.stderr);
  t.match(target.stdout, /\nscopes:\n {2}read \(required\): read:<table> \| read:\*\n {4}Tables the connection may read[^\n]*\n {4}e\.g\. read:patients, read:\*\n {2}period: period:<YYYY>/, target.stdout);
  t.notMatch(target.stdout, /"name"|\{/, 'no JSON in the aligned output');
  const usage = await svc(['usage']);
  t.match(usage.stdout, /\ntrial:\n {2}active: +true\n {2}queries_left: +\d+\n/, usage.stdout);
  const billing = await svc(['billing']);
  t.match(billing.stdout, /\nwallet:\n {2}topup_min_cents: +100\n/, billing.stdout);
  t.notMatch(usage.stdout + billing.stdout, /\{"/, 'no one-line JSON');
  t.equal((await svc(['webhook', 'set', 'https://example.com/h90'])).code, 0);
  t.equal((await svc(['webhook', 'test'])).code, 0);
  const deliveries = await svc(['webhook', 'deliveries']);
  t.match(deliveries.stdout, / null\n/, `an organization's delivery has connection_id null (${deliveries.stdout})`);
  t.notMatch(deliveries.stdout, /NULL/);
  t.equal((await session.svc(['credentials', 'add', 'stripe', '--secret-stdin'], { SVC_API_KEY: agent.key }, 'rk_test_abcdefgh12345678wxyz\n')).code, 0);
  const creds = await svc(['credentials', 'list']);
  t.match(creds.stdout, /stripe .* null\n/, `never used: last_used_at null (${creds.stdout})`);
  t.notMatch(creds.stdout, /NULL/);
  const conn = await openConnection(session.srv.url, agent.key, 'demo-healthcare', ['read:encounters']);
  t.match((await svc(['query', conn, 'SELECT NULL AS x'])).stdout, /NULL/, 'a query result keeps SQL NULL');
});
