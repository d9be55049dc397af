/**
 * examples/verify-audit.mjs, the offline verifier of docs/audit.md, run as a user would: by its path from
 * a directory outside the repository, copied elsewhere, and reading standard input, on a real
 * export from a real server. docs/audit.md shows the whole script: the copy there is the file.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../cli/dist.js';
import { api, openConnection, signupAgent, startServer, tempDir } from '../helpers/server.js';

const SCRIPT = path.join(ROOT, 'examples', 'verify-audit.mjs');

interface Run {
  readonly code: number | null;
  readonly out: Record<string, unknown> | undefined;
  readonly stderr: string;
}

function run(args: readonly string[], cwd: string, stdin = ''): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out: stdout.trim() ? (JSON.parse(stdout) as Record<string, unknown>) : undefined, stderr }));
    child.stdin.end(stdin);
  });
}

t.test('the example verifies a real export from any directory', async (t) => {
  const srv = await startServer();
  const elsewhere = await tempDir('svc-verify-example-');
  t.teardown(async () => {
    await srv.close();
    await fs.rm(elsewhere, { recursive: true, force: true });
  });
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  for (const sql of ['SELECT count(*) AS n FROM patients', 'SELECT 1 AS one']) {
    t.equal((await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).status, 200);
  }
  const described = await api<{ audit_genesis_hash: string; audit_head_hash: string }>(srv.url, 'GET', `/v1/connections/${conn}`, { key: a.key });
  const jsonl = await (await fetch(`${srv.url}/v1/connections/${conn}/audit?format=jsonl`, { headers: { authorization: `Bearer ${a.key}` } })).text();
  await fs.writeFile(path.join(elsewhere, 'audit.jsonl'), jsonl);
  const verified = { verified: true, events_checked: 2, broken_at: null, head: described.body.audit_head_hash };

  t.ok(path.relative(ROOT, elsewhere).startsWith('..'), 'run outside the repository');
  const byPath = await run([SCRIPT, 'audit.jsonl', described.body.audit_genesis_hash], elsewhere);
  t.equal(byPath.code, 0, byPath.stderr);
  t.same(byPath.out, verified, 'by its path, the export relative to the current directory');

  const absolute = await run([SCRIPT, path.join(elsewhere, 'audit.jsonl')], path.join(ROOT, 'examples'));
  t.same(absolute.out, verified, 'from its own directory, with an absolute export path');

  await fs.copyFile(SCRIPT, path.join(elsewhere, 'verify-audit.mjs'));
  const copied = await run(['verify-audit.mjs', 'audit.jsonl', described.body.audit_genesis_hash], elsewhere);
  t.same(copied.out, verified, 'copied anywhere: it needs no file of the repository');

  const stdin = await run([SCRIPT, '-'], elsewhere, jsonl);
  t.same(stdin.out, verified, '- reads standard input');

  const lines = jsonl.trim().split('\n');
  const edited = JSON.parse(lines[1] as string) as Record<string, unknown>;
  edited['bytes_egressed'] = 1;
  await fs.writeFile(path.join(elsewhere, 'edited.jsonl'), `${lines[0]}\n${JSON.stringify(edited)}\n`);
  const broken = await run([SCRIPT, 'edited.jsonl'], elsewhere);
  t.equal(broken.code, 1);
  t.same(broken.out, { verified: false, events_checked: 2, broken_at: 2 }, 'an edited event is caught');
  // walk-through: a key given twice (the forged value first, the real one last, which JSON.parse keeps) verified as intact
  await fs.writeFile(path.join(elsewhere, 'dup.jsonl'), `${lines[0]}\n${(lines[1] as string).replace(/^\{/, '{"bytes_egressed":1,')}\n`);
  const dup = await run([SCRIPT, 'dup.jsonl', described.body.audit_genesis_hash], elsewhere);
  t.equal(dup.code, 1);
  t.same(dup.out, { verified: false, events_checked: 2, broken_at: 2 }, 'a line that is not its event’s canonical JSON is caught');
  await fs.writeFile(path.join(elsewhere, 'crlf.jsonl'), jsonl.replace(/\n/g, '\r\n'));
  t.same((await run([SCRIPT, 'crlf.jsonl'], elsewhere)).out, verified, 'CRLF line ends are only line ends');
  const wrongGenesis = await run([SCRIPT, 'audit.jsonl', '0'.repeat(64)], elsewhere);
  t.same(wrongGenesis.out, { verified: false, events_checked: 1, broken_at: 1 }, 'another connection’s genesis is caught');

  // review: a garbled line made the script throw (exit 1 with a stack, no answer) instead of reporting it
  await fs.writeFile(path.join(elsewhere, 'garbled.jsonl'), `${lines[0]}\n{"seq":\n`);
  const garbled = await run([SCRIPT, 'garbled.jsonl', described.body.audit_genesis_hash], elsewhere);
  t.equal(garbled.code, 1);
  t.same(garbled.out, { verified: false, events_checked: 2, broken_at: 2 }, 'a garbled line is reported broken, not thrown');
  t.equal(garbled.stderr, '', 'with nothing on stderr');

  // review: an export after a seq never verified (the script wanted seq 1 first)
  const part = await (await fetch(`${srv.url}/v1/connections/${conn}/audit?format=jsonl&after_seq=1`, { headers: { authorization: `Bearer ${a.key}` } })).text();
  await fs.writeFile(path.join(elsewhere, 'part.jsonl'), part);
  const firstHead = (await run([SCRIPT, '-', described.body.audit_genesis_hash], elsewhere, `${lines[0]}\n`)).out?.['head'];
  t.type(firstHead, 'string', 'the head of the export up to seq 1');
  const tied = await run([SCRIPT, 'part.jsonl', String(firstHead), '1'], elsewhere);
  t.equal(tied.code, 0, tied.stderr);
  t.same(tied.out, { verified: true, events_checked: 1, broken_at: null, head: described.body.audit_head_hash }, 'the export after seq 1, tied to the head of the part before it');
  t.same((await run([SCRIPT, 'part.jsonl', '-', '1'], elsewhere)).out, { verified: true, events_checked: 1, broken_at: null, head: described.body.audit_head_hash }, 'or checked alone (-)');
  t.same((await run([SCRIPT, 'part.jsonl'], elsewhere)).out, { verified: false, events_checked: 1, broken_at: 1 }, 'without after_seq it must start at seq 1');
  t.same((await run([SCRIPT, 'part.jsonl', '0'.repeat(64), '1'], elsewhere)).out, { verified: false, events_checked: 1, broken_at: 2 }, 'tied to another hash: broken');

  const usage = await run([SCRIPT], elsewhere);
  t.equal(usage.code, 2);
  t.match(usage.stderr, /^usage: node verify-audit\.mjs <export\.jsonl \| -> \[audit_genesis_hash \| hash of event after_seq \| -\] \[after_seq\]/);
  t.equal((await run([SCRIPT, 'audit.jsonl', '-', 'x'], elsewhere)).code, 2, 'an after_seq that is not a whole number is a usage error');
});

t.test('docs/audit.md shows the script as it is', async (t) => {
  const readme = await fs.readFile(path.join(ROOT, 'docs/audit.md'), 'utf8');
  const shown = /The whole offline\s+verifier, in `examples\/verify-audit\.mjs`[^`]*?(?:`[^`]*`[^`]*?)*:\n\n```js\n([\s\S]*?)```/.exec(readme)?.[1];
  t.ok(shown, 'docs/audit.md has the verifier');
  const file = await fs.readFile(SCRIPT, 'utf8');
  t.equal(file.replace(/^(#!.*|\/\/.*)\n/gm, ''), shown, 'the file without its header comments');
});
