/**
 * `svc` as a real child process (the compiled dist/cli/svc.js) against a real server: every
 * command, its --json output, the query formats, the stored key (0600), offline verification,
 * and the documented exit statuses (0 ok, 1 verification failed, 2 usage, 3 auth, 4 client, 5 server).
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { api, type TestServer } from '../helpers/server.js';
import type { RunResult } from './dist.js';
import { cliSession, type CliSession } from './session.js';

type Json = Record<string, unknown>;

let session: CliSession;
let srv: TestServer;
let dir: string;
let env: Record<string, string>;
t.before(async () => {
  session = await cliSession();
  ({ srv, dir, env } = session);
});
t.teardown(() => session.close());

const svc = (args: string[], extra: Record<string, string | undefined> = {}, stdin?: string): Promise<RunResult> => session.svc(args, extra, stdin);
const json = (r: RunResult): Json => JSON.parse(r.stdout) as Json;

t.test('usage errors exit 2 and say what to do', async (t) => {
  t.equal((await svc([])).code, 2);
  t.equal((await svc(['no-such-command'])).code, 2);
  const noScope = await svc(['connect', 'demo-healthcare']);
  t.equal(noScope.code, 2);
  t.match(noScope.stderr, /--scope/);
  t.equal((await svc(['topup', 'lots'])).code, 2);
  t.equal((await svc(['targets', '--base-url', 'ftp://x'])).code, 2);
  t.equal((await svc(['--help'])).code, 0);
  t.match((await svc(['--help'])).stdout, /Exit status: 0 ok/);
});

t.test('no key, a wrong key, an unreachable server: exit 3, 3, 5 with the next step', async (t) => {
  const none = await svc(['usage']);
  t.equal(none.code, 3);
  t.match(none.stderr, /svc signup --org/);
  const wrong = await svc(['usage'], { SVC_API_KEY: 'svc_conn_wrong' });
  t.equal(wrong.code, 3);
  t.match(wrong.stderr, /unauthorized \(HTTP 401\)/);
  const down = await svc(['usage', '--base-url', 'http://127.0.0.1:1'], { SVC_API_KEY: 'svc_conn_x' });
  t.equal(down.code, 5);
  t.match(down.stderr, /cannot reach the svc API at http:\/\/127\.0\.0\.1:1/);
});

t.test('a full session', async (t) => {
  // signup stores the key, owner-only
  const up = await svc(['signup', '--org', 'CLI Co', '--agent', 'cli-bot']);
  t.equal(up.code, 0, up.stderr);
  t.match(up.stdout, /Agent key stored in/);
  t.notMatch(up.stdout, /svc_conn_/, 'the key is not printed when it is stored');
  const stored = JSON.parse(fs.readFileSync(env['SVC_CONFIG'] as string, 'utf8')) as Json;
  t.match(String(stored['api_key']), /^svc_conn_/);
  t.equal(fs.statSync(env['SVC_CONFIG'] as string).mode & 0o777, 0o600, 'config file is 0600');
  const again = await svc(['signup', '--org', 'CLI Co', '--agent', 'cli-bot']);
  t.equal(again.code, 2, 'a stored key is not overwritten without --force');
  t.match(again.stderr, /--force/);
  const unsaved = await svc(['signup', '--org', 'Other', '--agent', 'x', '--no-save', '--json']);
  t.equal(unsaved.code, 0);
  t.match(String(json(unsaved)['apiKey']), /^svc_conn_/);

  // catalogue
  const targets = await svc(['targets']);
  t.equal(targets.code, 0);
  t.match(targets.stdout, /^id\s+kind\s+pack/m);
  t.match(targets.stdout, /demo-healthcare\s+demo\s+healthcare/);
  t.equal((json(await svc(['targets', '--json']))['targets'] as unknown[]).length, 20);
  t.equal((json(await svc(['--json', 'targets', '--kind', 'live']))['targets'] as unknown[]).length, 8, '--json before the command too');
  const target = await svc(['target', 'demo-healthcare']);
  t.match(target.stdout, /encounters \(time column period_start\)/);
  t.equal((await svc(['target', 'nope'])).code, 4);
  t.equal((json(await svc(['packs', '--json']))['packs'] as unknown[]).length, 6);

  // connections
  const conn = await svc(['connect', 'demo-healthcare', '--scope', 'read:encounters', '--scope', 'period:2024-Q1', '--ttl', '600', '--json']);
  t.equal(conn.code, 0, conn.stderr);
  const id = String(json(conn)['connectionId']);
  const genesis = String(json(conn)['audit_genesis_hash']);
  const badScope = await svc(['connect', 'demo-healthcare', '--scope', 'write:everything']);
  t.equal(badScope.code, 4);
  t.match(badScope.stderr, /invalid_scope[\s\S]*next: see the scope grammar/);
  const list = json(await svc(['connections', '--json']));
  t.ok((list['connections'] as Json[]).some((c) => c['connectionId'] === id));
  t.match((await svc(['connections'])).stdout, new RegExp(id));
  t.equal(json(await svc(['connection', id, '--json']))['status'], 'active');

  // query, in every format
  const sql = 'SELECT class_code, count(*) AS n FROM encounters GROUP BY 1 ORDER BY 1';
  const tableOut = await svc(['query', id, sql]);
  t.equal(tableOut.code, 0, tableOut.stderr);
  t.match(tableOut.stdout, /^class_code\s+n\n-+\s+-+\n/);
  t.match(tableOut.stdout, /\(\d+ rows?\) cost [\d.]+¢ \(trial\)/);
  const asJson = json(await svc(['query', id, sql, '--json']));
  const rows = asJson['rows'] as Json[];
  t.ok(rows.length > 0);
  const jl = (await svc(['query', id, sql, '--jsonl'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Json);
  t.same(jl, rows, '--jsonl: one row per line, same rows');
  const csvOut = (await svc(['query', id, sql, '--csv'])).stdout;
  t.equal(csvOut.split('\r\n')[0], 'class_code,n');
  t.equal(csvOut.split('\r\n').filter(Boolean).length, rows.length + 1);
  const quoted = await svc(['query', id, `SELECT 'a,"b"' AS x, NULL AS y`, '--csv']);
  t.equal(quoted.stdout, 'x,y\r\n"a,""b""",\r\n', 'RFC 4180 quoting');
  t.equal((await svc(['query', id, sql, '--csv', '--jsonl'])).code, 2, 'conflicting formats');

  // refused statements: exit 4 with the code; --json puts the error body on stdout
  const refused = await svc(['query', id, 'DELETE FROM encounters']);
  t.equal(refused.code, 4);
  t.match(refused.stderr, /scope_violation \(HTTP 403\)/);
  t.match(refused.stderr, /next: /);
  const refusedJson = await svc(['query', id, 'SELECT * FROM claims', '--json']);
  t.equal(refusedJson.code, 4);
  t.equal((json(refusedJson)['error'] as Json)['code'], 'scope_violation');

  // audit: online, export, offline, tampering
  const verify = await svc(['audit', 'verify', id, '--json']);
  t.equal(verify.code, 0);
  t.equal(json(verify)['verified'], true);
  const file = path.join(dir, 'audit.jsonl');
  const exp = await svc(['audit', 'export', id, '-o', file]);
  t.equal(exp.code, 0, exp.stderr);
  // the suggestion pins the chain to the connection's own genesis, as docs/audit.md recommends
  t.match(exp.stdout, `\nverify offline: svc audit verify --offline ${file} --genesis ${genesis}\n`, exp.stdout);
  const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
  t.ok(lines.length >= 6, `${lines.length} events exported`);
  const stdoutExport = await svc(['audit', 'export', id]);
  t.equal(stdoutExport.stdout, fs.readFileSync(file, 'utf8'), 'export to stdout is the same JSONL');
  const offline = await svc(['audit', 'verify', '--offline', file, '--genesis', genesis, '--json']);
  t.equal(offline.code, 0, offline.stderr);
  t.same({ v: json(offline)['verified'], n: json(offline)['events_checked'], b: json(offline)['broken_at'] }, { v: true, n: lines.length, b: null });
  t.equal(json(offline)['head'], json(await svc(['connection', id, '--json']))['audit_head_hash'], 'offline head = the server’s head');
  const tampered = [...lines];
  tampered[2] = (tampered[2] as string).replace(/"row_count":\d+/, '"row_count":999');
  t.not(tampered[2], lines[2], 'an event was edited');
  fs.writeFileSync(file, `${tampered.join('\n')}\n`);
  const broken = await svc(['audit', 'verify', '--offline', file]);
  t.equal(broken.code, 1, 'a broken chain exits 1');
  t.match(broken.stdout, /BROKEN at seq 3/);
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
  t.equal((await svc(['audit', 'verify', '--offline', file, '--genesis', '0'.repeat(64)])).code, 1, 'a wrong genesis is caught');
  fs.writeFileSync(file, `${lines.slice(0, 2).join('\n')}\nnot json\n`);
  t.equal((await svc(['audit', 'verify', '--offline', file])).code, 1, 'a garbled line is caught');
  // walk-through: a key given twice (a forged first value, the real one last, which JSON.parse keeps) verified as intact
  const forged = [...lines];
  forged[1] = (forged[1] as string).replace(/^\{/, '{"outcome":"forged",');
  fs.writeFileSync(file, `${forged.join('\n')}\n`);
  const dup = await svc(['audit', 'verify', '--offline', file, '--genesis', genesis]);
  t.equal(dup.code, 1, 'a line that is not its event’s canonical JSON is caught');
  t.match(dup.stdout, /BROKEN at seq 2.*canonical JSON/);
  t.equal((await svc(['audit', 'verify', '--offline', path.join(dir, 'missing.jsonl')])).code, 2);
  // review: an export after a seq (the API's after_seq) never verified offline
  fs.writeFileSync(file, `${lines.slice(2).join('\n')}\n`);
  const part = await svc(['audit', 'verify', '--offline', file, '--after-seq', '2', '--genesis', (JSON.parse(lines[1] as string) as Json)['hash'] as string, '--json']);
  t.equal(part.code, 0, part.stdout);
  t.same([json(part)['verified'], json(part)['events_checked']], [true, lines.length - 2], '--after-seq: the events after seq 2, tied to the hash of event 2');
  t.equal((await svc(['audit', 'verify', '--offline', file, '--after-seq', 'two'])).code, 2, 'an --after-seq that is not a whole number is a usage error');

  // billing
  const usage = json(await svc(['usage', '--json']));
  t.ok(Number(usage['queries']) >= 5);
  t.type(json(await svc(['billing', '--json']))['price_per_query_cents'], 'number');
  const top = await svc(['topup', '500', '--json']);
  t.equal(top.code, 0, top.stderr);
  t.equal(json(top)['wallet_balance_cents'], 500);
  t.equal((await svc(['topup', '5'])).code, 4, 'below the minimum: the API refuses');
  // --idempotency-key: sent twice, credited once
  for (let i = 0; i < 2; i++) {
    const sent = json(await svc(['topup', '300', '--idempotency-key', 'cli-order-7', '--json']));
    t.equal(sent['wallet_balance_cents'], 800, `--idempotency-key, sent ${i + 1} time(s): credited once`);
    t.equal(sent['idempotent_replayed'], i === 0 ? undefined : true, 'the replay says so (Idempotent-Replayed: true); the first answer has no such field');
  }
  const replayed = await svc(['topup', '300', '--idempotency-key', 'cli-order-7']);
  t.match(replayed.stdout, /\nreplayed: the first answer to this Idempotency-Key; nothing was credited again\n$/, replayed.stdout);
  t.notMatch((await svc(['topup', '300', '--idempotency-key', 'cli-order-8'])).stdout, /replayed/, 'a first top-up says nothing of replays');

  // revoke, then a query is refused with connection_revoked
  t.equal((await svc(['revoke', id])).code, 0);
  const gone = await svc(['query', id, 'SELECT 1']);
  t.equal(gone.code, 4);
  t.match(gone.stderr, /connection_revoked[\s\S]*next: open a new connection/);

  // relays
  const token = await svc(['relay', 'token', '--name', 'db1', '--json']);
  t.equal(token.code, 0, token.stderr);
  t.match(String(json(token)['token']), /^svc_enroll_/);
  t.same(json(await svc(['relay', 'list', '--json']))['relays'], []);
  t.equal((await svc(['relay', 'delete', 'relay_unknown'])).code, 4);
  t.equal((await svc(['relay', 'renew', 'relay_unknown', '--csr', path.join(dir, 'none.pem')])).code, 2);
});

t.test('svc schema: the tables and columns a connection may read', async (t) => {
  const id = String(json(await svc(['connect', 'demo-healthcare', '--scope', 'read:patients', '--json']))['connectionId']);
  const human = await svc(['schema', id]);
  t.equal(human.code, 0, human.stderr);
  t.match(human.stdout, /^patients\ncolumn\s+type\s+nullable\n-+/);
  t.match(human.stdout, /^patient_id\s+text\s+no$/m, 'each column with its type and whether it may be null');
  t.notMatch(human.stdout, /encounters/, 'only the scoped table');
  t.match(human.stdout, new RegExp(`Next: svc query ${id} "SELECT \\* FROM patients LIMIT 10"`));
  const asJson = await svc(['schema', id, '--json']);
  t.equal(asJson.code, 0);
  const body = json(asJson);
  t.same((body['tables'] as Json[]).map((x) => x['name']), ['patients']);
  t.match(String(body['audit_event_id']), /^evt_/);
  const unknown = await svc(['schema', 'conn_nope']);
  t.equal(unknown.code, 4);
  t.match(unknown.stderr, /not_found \(HTTP 404\)/);
});

t.test('webhooks from the CLI', async (t) => {
  const set = await svc(['webhook', 'set', 'https://hooks.example.com/svc', '--json']);
  t.equal(set.code, 0, set.stderr);
  t.match(JSON.stringify(json(set)), /svcsec_/, 'a generated secret is returned once');
  const trig = await svc(['webhook', 'test', '--json']);
  t.equal(trig.code, 0, trig.stderr);
  const deliveryId = String(json(trig)['delivery_id']);
  t.match(deliveryId, /\S+/);
  const list = await svc(['webhook', 'deliveries', '--json']);
  t.equal(list.code, 0, list.stderr);
  t.ok(JSON.stringify(json(list)).includes(deliveryId), 'the delivery is listed');
  const replay = await svc(['webhook', 'replay', deliveryId, '--json']);
  t.equal(replay.code, 0, replay.stderr);
  t.equal((await svc(['webhook', 'replay', 'dlv_unknown'])).code, 4);
  const chaos = await svc(['webhook', 'chaos', 'transient_503', '--json']);
  t.equal(chaos.code, 0, chaos.stderr);
  t.equal(json(chaos)['mode'], 'transient_503');
  t.equal((await svc(['webhook', 'chaos', 'explode'])).code, 2, 'unknown mode is a usage error');
  t.equal((await svc(['webhook', 'chaos', 'off'])).code, 0);
});

t.test('credentials from the CLI', async (t) => {
  const kinds = await svc(['credentials', 'kinds', '--json']);
  t.equal(kinds.code, 0, kinds.stderr);
  t.match(JSON.stringify(json(kinds)), /stripe/);
  const full = await svc(['credentials', 'add', 'stripe', '--secret-stdin'], {}, 'sk_test_1234567890abcdef\n');
  t.equal(full.code, 4, 'a full secret key is refused');
  t.match(full.stderr, /invalid_request/);
  const add = await svc(['credentials', 'add', 'stripe', '--secret-stdin', '--json'], {}, 'rk_test_abcdefgh12345678wxyz\n');
  t.equal(add.code, 0, add.stderr);
  t.notMatch(add.stdout, /abcdefgh12345678/, 'the secret is never echoed');
  const list = await svc(['credentials', 'list', '--json']);
  const creds = json(list)['credentials'] as Json[];
  t.equal(creds.length, 1);
  t.equal(creds[0]?.['connector_kind'], 'stripe');
  t.ok(String(creds[0]?.['hint'] ?? '').length <= 4);
  t.equal((await svc(['credentials', 'delete', 'stripe'])).code, 0);
  t.same(json(await svc(['credentials', 'list', '--json']))['credentials'], []);
  t.equal((await svc(['credentials', 'add', 'stripe'])).code, 2, 'no secret given');

  // http-files: options with JSON values, public files with an empty secret
  const files = [{ table: 't', url: 'https://files.example.com/t.csv' }];
  const stored = async (): Promise<unknown> => {
    const [row] = await srv.svc.store.query<{ org_id: string }>("SELECT org_id FROM credentials WHERE connector_kind = 'http-files'");
    return row ? (await srv.svc.services.credentials.resolve(row.org_id, 'http-files')).options['files'] : undefined;
  };
  const viaOption = await svc(['credentials', 'add', 'http-files', '--secret', '', '--option', `files=${JSON.stringify(files)}`, '--json']);
  t.equal(viaOption.code, 0, viaOption.stderr);
  t.same(await stored(), [{ ...files[0], format: 'csv' }], '--option key=<JSON> sends the array');
  const optionsFile = path.join(dir, 'files.json');
  fs.writeFileSync(optionsFile, JSON.stringify({ files: [{ table: 'u', url: 'https://files.example.com/u.json' }] }));
  const viaFile = await svc(['credentials', 'add', 'http-files', '--secret', '', '--options-file', optionsFile]);
  t.equal(viaFile.code, 0, viaFile.stderr);
  t.same(await stored(), [{ table: 'u', url: 'https://files.example.com/u.json', format: 'json' }], '--options-file replaces it');
  const badJson = await svc(['credentials', 'add', 'http-files', '--secret', '', '--options-json', '{files:']);
  t.equal(badJson.code, 2, 'malformed --options-json is a usage error');
  t.match(badJson.stderr, /--options-json is not valid JSON/);
});

t.test('SVC_API_KEY wins over the stored key', async (t) => {
  const r = await api<{ apiKey: string; orgId: string }>(srv.url, 'POST', '/v1/agent/account', { body: { orgName: 'Env Co', agentName: 'env', headless: true } });
  const conn = await svc(['connect', 'demo-healthcare', '--scope', 'read:patients', '--json'], { SVC_API_KEY: r.body.apiKey });
  t.equal(conn.code, 0, conn.stderr);
  const id = String(json(conn)['connectionId']);
  t.equal((await svc(['connection', id])).code, 4, "the stored key's organization does not see it");
  t.equal((await svc(['connection', id], { SVC_API_KEY: r.body.apiKey })).code, 0);
});
