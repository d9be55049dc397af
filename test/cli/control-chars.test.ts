/**
 * `svc`'s human output (tables, key: value lines, error lines) shows what others wrote: a relay's
 * version from its tunnel HELLO (a relay is customer-controlled; its host may be compromised), rows
 * of a database or an API, error messages a relay or a database made. Written raw, a control
 * character in them reached the operator's terminal: `svc relay list` of a relay announcing
 * "svc-relay/0.2.0 ESC[2J ESC]0;owned BEL" cleared the screen and set the window title (escape
 * sequences can also rewrite what was printed, or, in some terminals, the clipboard). Control
 * characters are now shown escaped (`\x1b`); --json, --jsonl and --csv are unchanged (for programs).
 * The compiled CLI against a real server and tunnel listener, the relay a real protocol session
 * over mutual TLS.
 */
import t from 'tap';
import WebSocket from 'ws';
import { generateKeyAndCsr } from '../../pki/index.js';
import { Session } from '../../protocol/index.js';
import { wsTransport } from '../../protocol/relay-contract.js';
import { keyValues, table } from '../../cli/svc/output.js';
import { api, signupAgent } from '../helpers/server.js';
import { cliSession, type CliSession } from './session.js';

const HOSTILE = 'svc-relay/0.2.0\x1b[2J\x1b]0;owned\x07\x9b31m';
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;

let session: CliSession;
t.before(async () => {
  session = await cliSession('svc-cli-ctl-');
});
t.teardown(() => session.close());

t.test('tables and key: value lines show control characters escaped', async (t) => {
  const rendered = table(['name', 'note'], [{ name: 'a', note: `x${HOSTILE}` }]) + keyValues({ version: HOSTILE, nested: { v: HOSTILE }, list: [HOSTILE] });
  t.notMatch(rendered, CONTROL, 'no control character is written');
  t.match(rendered, /svc-relay\/0\.2\.0\\x1b\[2J\\x1b\]0;owned\\x07\\x9b31m/, 'each shown as \\xNN');
  t.match(keyValues({ a: 'one\ntwo' }), /^a: one\\x0atwo\n$/, 'a value cannot start a line of its own');
});

t.test("svc relay list and show do not pass a relay's version to the terminal", async (t) => {
  const tunnel = await session.srv.svc.startTunnel();
  const a = await signupAgent(session.srv.url, 'Escapes Co');
  const k = generateKeyAndCsr();
  const tok = (await api<{ token: string }>(session.srv.url, 'POST', '/v1/relays/enroll-token', { key: a.key, body: {} })).body.token;
  const reg = await api<{ relay_id: string; certificate_pem: string; ca_certificate_pem: string }>(session.srv.url, 'POST', '/v1/relays/register', {
    body: { enroll_token: tok, csr_pem: k.csrPem, name: 'db' },
  });
  const ws = new WebSocket(`wss://127.0.0.1:${tunnel.port}/`, { key: k.keyPem, cert: reg.body.certificate_pem, ca: reg.body.ca_certificate_pem });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const relay = new Session(wsTransport(ws), { role: 'client', agent: HOSTILE });
  t.teardown(() => relay.close());
  await relay.ready;
  while (!tunnel.registry.online(reg.body.relay_id)) await new Promise((r) => setTimeout(r, 10));

  const env = { SVC_API_KEY: a.key };
  const listed = await session.svc(['relay', 'list'], env);
  t.equal(listed.code, 0, listed.stderr);
  t.match(listed.stdout, /svc-relay\/0\.2\.0\\x1b\[2J/, 'the version is listed, escaped');
  t.notMatch(listed.stdout, CONTROL);
  const shown = await session.svc(['relay', 'show', reg.body.relay_id], env);
  t.equal(shown.code, 0, shown.stderr);
  t.notMatch(shown.stdout, CONTROL);
  const json = await session.svc(['relay', 'list', '--json'], env);
  t.equal((JSON.parse(json.stdout) as { relays: { version: string }[] }).relays[0]?.version, HOSTILE, '--json keeps the value as it is');
});
