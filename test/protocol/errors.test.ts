import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { CloseCode, PROTO_ERRORS, ProtocolError, closeCodeFor, isProtoErrorCode } from '../../protocol/index.js';
import { ROOT } from '../helpers/root.js';

const root = ROOT;
const readme = fs.readFileSync(path.join(root, 'protocol/README.md'), 'utf8');
const codes = Object.keys(PROTO_ERRORS);

function sources(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => fs.readFileSync(path.join(dir, f), 'utf8'));
}

t.test('every code is well formed and unique, with a distinct message', async (t) => {
  t.ok(codes.length >= 20, `${codes.length} codes`);
  for (const c of codes) t.match(c, /^PROTO_ERR_[A-Z][A-Z0-9_]*$/, `${c} follows PROTO_ERR_<WHAT>`);
  t.equal(new Set(codes).size, codes.length, 'codes are unique');
  const messages = Object.values(PROTO_ERRORS).map((e) => e.message);
  t.equal(new Set(messages).size, messages.length, 'messages are unique');
});

t.test('every code is documented in protocol/README.md, and the README names no other', async (t) => {
  const documented = new Set<string>();
  for (const m of readme.matchAll(/^\| `(PROTO_ERR_[A-Z0-9_]+)` \|/gm)) documented.add(m[1] as string);
  for (const c of codes) t.ok(documented.has(c), `${c} has a row in the README's error table`);
  for (const m of readme.matchAll(/PROTO_ERR_[A-Z0-9_]+/g)) t.ok(isProtoErrorCode(m[0]), `README mentions ${m[0]}, which exists`);
});

t.test('every PROTO_ERR_* string in the code and tests is a registered code (no typos)', async (t) => {
  const seen = new Set<string>();
  for (const text of [...sources(path.join(root, 'protocol')), ...sources(path.join(root, 'test/protocol'))]) {
    for (const m of text.matchAll(/PROTO_ERR_[A-Z0-9_]+/g)) seen.add(m[0]);
  }
  for (const c of seen) t.ok(isProtoErrorCode(c), `${c} is registered`);
});

t.test('ProtocolError carries code, default message, remote and retryable flags', async (t) => {
  const e = new ProtocolError('PROTO_ERR_FLOOD');
  t.equal(e.code, 'PROTO_ERR_FLOOD');
  t.equal(e.message, PROTO_ERRORS.PROTO_ERR_FLOOD.message);
  t.equal(e.remote, false);
  t.equal(e.fatal, true);
  t.ok(e instanceof Error);
  t.equal(new ProtocolError('PROTO_ERR_GOAWAY').retryable, true, 'GOAWAY refusals are retryable');
  t.equal(new ProtocolError('PROTO_ERR_CANCELLED').fatal, false);
  const remote = new ProtocolError('RELAY_ERR_QUERY', 'boom', { remote: true, detail: { sqlstate: '42P01' } });
  t.equal(remote.code, 'RELAY_ERR_QUERY', 'a peer code is kept as is');
  t.equal(remote.fatal, false);
  t.same(remote.detail, { sqlstate: '42P01' });
  t.equal(closeCodeFor('PROTO_ERR_PEER_DEAD'), CloseCode.UNRESPONSIVE);
  t.equal(closeCodeFor('PROTO_ERR_UNKNOWN_TYPE'), CloseCode.PROTOCOL_ERROR);
  t.equal(closeCodeFor('SOMETHING_ELSE'), CloseCode.PROTOCOL_ERROR);
});
