/**
 * `svc` messages and output (issue #16, "Messages and surfaces"), the compiled CLI against a real
 * server: a refused statement (invalid_sql) ends with a `next:` line fitting its reason, and
 * `svc target` lists each table's columns without --json.
 */
import t from 'tap';
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

  const unsupported = await svc(['query', conn, 'SELECT (ARRAY[ROW(1,2)])[1]']);
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
