/**
 * The credential endpoints (docs/credentials-and-live-targets.md): kinds, register (validated per kind,
 * replaced on a second POST), list (metadata only), delete; and the checks at connection open.
 */
import fs from 'node:fs/promises';
import t from 'tap';
import { api, signupAgent, startServer, tempDir, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

interface Meta {
  connector_kind: string;
  created_at: string;
  last_used_at: string | null;
  hint: string;
  replaced?: boolean;
}

const PG_SECRET = 'postgres://reader:Pg-Very-Secret-Pw-41@db.example.com:5432/app';

t.test('kinds: every credential kind with its targets, fields and validation', async (t) => {
  const a = await signupAgent(srv.url);
  const r = await api<{ kinds: { connector_kind: string; targets: string[]; secret: { description: string }; options: unknown[]; validation: string }[] }>(srv.url, 'GET', '/v1/connections/credentials/kinds', { key: a.key });
  t.equal(r.status, 200);
  const kinds = r.body.kinds.map((k) => k.connector_kind).sort();
  t.same(kinds, ['github', 'http-files', 'hubspot', 'mysql', 'postgres', 'salesforce', 'stripe']);
  for (const k of r.body.kinds) {
    t.ok(k.targets.length > 0 && k.secret.description && k.validation, `${k.connector_kind} is described`);
  }
  t.same(r.body.kinds.find((k) => k.connector_kind === 'postgres')?.targets, ['postgres']);
  // every live target that needs a credential names a kind that exists
  const targets = await api<{ targets: { id: string; kind: string; credential_kind: string | null; queryable: boolean }[] }>(srv.url, 'GET', '/v1/connections/targets?kind=live', { key: a.key });
  t.equal(targets.body.targets.length, 8);
  for (const target of targets.body.targets) {
    t.ok(target.queryable, `${target.id} is queryable`);
    if (target.id === 'postgres-relay') t.equal(target.credential_kind, null);
    else t.ok(kinds.includes(target.credential_kind as string), `${target.id} needs ${target.credential_kind}`);
  }
  t.equal((await api(srv.url, 'GET', '/v1/connections/credentials/kinds')).status, 401, 'the agent key is required');
});

t.test('register, list (metadata only), replace, delete', async (t) => {
  const a = await signupAgent(srv.url);
  const empty = await api<{ credentials: Meta[] }>(srv.url, 'GET', '/v1/connections/credentials', { key: a.key });
  t.same(empty.body, { credentials: [] });

  const created = await api<Meta>(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: PG_SECRET, options: { sslmode: 'require' } } });
  t.equal(created.status, 201, created.text);
  t.match(created.body, { connector_kind: 'postgres', last_used_at: null, hint: '/app'.slice(-4), replaced: false });
  t.notMatch(created.text, /Very-Secret|reader:|db\.example/, 'no part of the secret but the hint comes back');
  t.ok(created.body.hint.length <= 4);

  const listed = await api<{ credentials: Meta[] }>(srv.url, 'GET', '/v1/connections/credentials', { key: a.key });
  t.equal(listed.status, 200);
  t.same(Object.keys(listed.body.credentials[0] ?? {}).sort(), ['connector_kind', 'created_at', 'hint', 'last_used_at']);
  t.notMatch(listed.text, /Very-Secret/);

  await new Promise((r) => setTimeout(r, 5));
  const replaced = await api<Meta>(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: 'postgres://reader:another-pw@db.example.com/app2' } });
  t.equal(replaced.status, 201);
  t.equal(replaced.body.replaced, true, 'posting again replaces');
  t.equal(replaced.body.hint, 'app2');
  t.ok(replaced.body.created_at > created.body.created_at);
  const after = await api<{ credentials: Meta[] }>(srv.url, 'GET', '/v1/connections/credentials', { key: a.key });
  t.equal(after.body.credentials.length, 1, 'one credential per kind');

  const stripe = await api<Meta>(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'stripe', secret: 'rk_test_51AbCdEfGhIjKlMnOpQrStUv' } });
  t.equal(stripe.status, 201, stripe.text);
  t.equal(stripe.body.hint, 'StUv');

  // another organization sees none of them and cannot delete them
  const b = await signupAgent(srv.url, 'Other Org');
  t.same((await api(srv.url, 'GET', '/v1/connections/credentials', { key: b.key })).body, { credentials: [] });
  t.equal((await api(srv.url, 'DELETE', '/v1/connections/credentials/postgres', { key: b.key })).status, 404);

  const del = await api(srv.url, 'DELETE', '/v1/connections/credentials/postgres', { key: a.key });
  t.equal(del.status, 200);
  t.same(del.body, { connector_kind: 'postgres', deleted: true });
  const again = await api<{ error: { code: string } }>(srv.url, 'DELETE', '/v1/connections/credentials/postgres', { key: a.key });
  t.equal(again.status, 404);
  t.equal(again.body.error.code, 'not_found');
  const left = await api<{ credentials: Meta[] }>(srv.url, 'GET', '/v1/connections/credentials', { key: a.key });
  t.same(left.body.credentials.map((c) => c.connector_kind), ['stripe']);
});

t.test('validation per kind: refused with 400 invalid_request, and the message never holds the secret', async (t) => {
  const a = await signupAgent(srv.url);
  const cases: { name: string; body: Record<string, unknown>; field?: string }[] = [
    { name: 'unknown kind', body: { connector_kind: 'oracle', secret: 'whatever-secret-1234' }, field: 'connector_kind' },
    { name: 'full stripe secret key', body: { connector_kind: 'stripe', secret: 'sk_live_51SuperSecretStripeKey0001' } },
    { name: 'stripe test secret key', body: { connector_kind: 'stripe', secret: 'sk_test_51SuperSecretStripeKey0002' } },
    { name: 'stripe publishable key', body: { connector_kind: 'stripe', secret: 'pk_live_51SuperSecretStripeKey0003' } },
    { name: 'postgres with a mysql URL', body: { connector_kind: 'postgres', secret: 'mysql://u:SuperSecretPw0004@h/db' }, field: 'secret' },
    { name: 'postgres not a URL', body: { connector_kind: 'postgres', secret: 'host=db user=u password=SuperSecretPw0005' }, field: 'secret' },
    { name: 'postgres without a database', body: { connector_kind: 'postgres', secret: 'postgres://u:SuperSecretPw0006@db.example.com:5432' }, field: 'secret' },
    { name: 'postgres without a user', body: { connector_kind: 'postgres', secret: 'postgres://db.example.com/SuperSecretDb0007' }, field: 'secret' },
    { name: 'postgres with a file-reading parameter', body: { connector_kind: 'postgres', secret: 'postgres://u:SuperSecretPw0008@db/app?sslrootcert=/etc/passwd' }, field: 'secret' },
    { name: 'postgres with a socket host parameter', body: { connector_kind: 'postgres', secret: 'postgres://u:SuperSecretPw0009@db/app?host=/var/run/postgresql' }, field: 'secret' },
    { name: 'postgres bad port', body: { connector_kind: 'postgres', secret: 'postgres://u:SuperSecretPw0010@db:99999/app' }, field: 'secret' },
    { name: 'postgres bad sslmode', body: { connector_kind: 'postgres', secret: 'postgres://u:SuperSecretPw0011@db/app?sslmode=maybe' }, field: 'secret' },
    { name: 'postgres unknown option', body: { connector_kind: 'postgres', secret: 'postgres://u:SuperSecretPw0012@db/app', options: { sslcert: '/etc/passwd' } }, field: 'options.sslcert' },
    { name: 'postgres ca that is not PEM', body: { connector_kind: 'postgres', secret: 'postgres://u:SuperSecretPw0013@db/app', options: { sslmode: 'verify-full', ca: 'nope' } }, field: 'options.ca' },
    { name: 'mysql with a postgres URL', body: { connector_kind: 'mysql', secret: 'postgres://u:SuperSecretPw0014@h/db' }, field: 'secret' },
    { name: 'mysql malformed', body: { connector_kind: 'mysql', secret: 'mysql://u:SuperSecretPw0015@' }, field: 'secret' },
    { name: 'empty secret', body: { connector_kind: 'postgres', secret: '' }, field: 'secret' },
    { name: 'secret with a newline', body: { connector_kind: 'postgres', secret: 'postgres://u:SuperSecretPw0017@db/app\n' }, field: 'secret' },
    { name: 'extra field', body: { connector_kind: 'postgres', secret: 'postgres://u:SuperSecretPw0018@db/app', note: 'x' } },
  ];
  for (const c of cases) {
    const r = await api<{ error: { code: string; message: string; details?: { field?: string } } }>(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: c.body });
    t.equal(r.status, 400, `${c.name}: 400`);
    t.equal(r.body.error.code, 'invalid_request', c.name);
    if (c.field) t.equal(r.body.error.details?.field, c.field, `${c.name}: names ${c.field}`);
    t.notMatch(r.text, /SuperSecret/, `${c.name}: no part of the secret in the error`);
  }
  const sk = await api<{ error: { message: string } }>(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'stripe', secret: 'sk_live_51SuperSecretStripeKey0001' } });
  t.match(sk.body.error.message, /rk_/, 'the refusal says a restricted key is needed');
  t.same((await api(srv.url, 'GET', '/v1/connections/credentials', { key: a.key })).body, { credentials: [] }, 'nothing was stored');
  for (const ok of ['postgresql://u:p@db.example.com/app?sslmode=verify-full', 'mysql://u:p@[2606:4700::1111]:3307/shop', 'mariadb://u@db.example.com/shop']) {
    const kind = ok.startsWith('postgres') ? 'postgres' : 'mysql';
    const r = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: kind, secret: ok } });
    t.equal(r.status, 201, `${ok} is accepted`);
  }
});

t.test('a live connection needs its credential at open time; databases name their tables', async (t) => {
  const a = await signupAgent(srv.url);
  for (const [target, kind] of [
    ['postgres', 'postgres'],
    ['mysql', 'mysql'],
    ['stripe', 'stripe'],
  ] as const) {
    const r = await api<{ error: { code: string; message: string; details: { connector_kind: string } } }>(srv.url, 'POST', '/v1/connections', {
      key: a.key,
      body: { target_id: target, scopes: target === 'stripe' ? ['read:customers'] : ['read:public.orders'], ttl_seconds: 60 },
    });
    t.equal(r.status, 400, `${target} without a credential`);
    t.equal(r.body.error.code, 'invalid_request');
    t.equal(r.body.error.details.connector_kind, kind);
    t.match(r.body.error.message, new RegExp(`needs a ${kind} credential.*POST /v1/connections/credentials`));
  }
  await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: 'postgres://u:p@db.example.com/app' } });
  const star = await api<{ error: { code: string } }>(srv.url, 'POST', '/v1/connections', { key: a.key, body: { target_id: 'postgres', scopes: ['read:*'] } });
  t.equal(star.status, 400);
  t.equal(star.body.error.code, 'invalid_scope');
  const ok = await api(srv.url, 'POST', '/v1/connections', { key: a.key, body: { target_id: 'postgres', scopes: ['read:public.orders', 'filter:public.orders.tenant_id=7'] } });
  t.equal(ok.status, 201, ok.text);
  // the relay needs no credential: it fails on its own rule (no such relay), not on a credential
  const relay = await api<{ error: { code: string } }>(srv.url, 'POST', '/v1/connections', { key: a.key, body: { target_id: 'postgres-relay', scopes: ['relay:rly_nope', 'read:public.orders'] } });
  t.equal(relay.status, 404);
});

t.test('by default (SVC_LIVE_ALLOW_PRIVATE unset: 0) a database credential pointing at a loopback or private address is refused at registration, as a query would be', async (t) => {
  const dataDir = await tempDir();
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  // stored while loopback was allowed (or a name that resolved to a public address then)
  const open = await startServer({ dataDir, demoWorkers: 1, env: { SVC_LIVE_ALLOW_PRIVATE: '1' } });
  const a = await signupAgent(open.url);
  const stored = await api(open.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: 'mysql://root:Private-Pw-1@127.0.0.1:3306/shop' } });
  t.equal(stored.status, 201, 'allowed with SVC_LIVE_ALLOW_PRIVATE=1 (the tests’ databases are on loopback)');
  const metadata = await api<{ error: { code: string; message: string; details: { reason: string } } }>(open.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: 'postgres://u:Private-Pw-3@169.254.169.254/app' } });
  t.equal(metadata.status, 400, 'a cloud metadata address is refused even then');
  t.same(metadata.body.error.details, { connector_kind: 'postgres', reason: 'address_not_allowed', field: 'secret', in: 'body' }, 'the refused field is the secret');
  t.match(metadata.body.error.message, /^this postgres credential points at an unspecified, link-local, cloud metadata or reserved address/, 'worded for the credential being registered');
  const conn = await api<{ connectionId: string }>(open.url, 'POST', '/v1/connections', { key: a.key, body: { target_id: 'mysql', scopes: ['read:orders'] } });
  await open.close();

  const strict = await startServer({ dataDir, demoWorkers: 1 });
  t.teardown(() => strict.close());
  t.equal(strict.config.liveAllowPrivate, false);
  type Refusal = { error: { code: string; message: string; details: { reason: string; connector_kind: string } } };
  // the query path still checks every statement's address
  const q = await api<Refusal>(strict.url, 'POST', `/v1/connections/${conn.body.connectionId}/query`, { key: a.key, body: { sql: 'SELECT 1 AS x FROM orders' } });
  t.equal(q.status, 400);
  t.equal(q.body.error.details.reason, 'address_not_allowed');
  t.notMatch(q.text, /Private-Pw-1/);
  // and registration now refuses what every query would: the same code, reason and message
  for (const [kind, secret] of [
    ['mysql', 'mysql://root:Private-Pw-1@127.0.0.1:3306/shop'],
    ['mysql', 'mysql://root:Private-Pw-1@localhost/shop'],
    ['postgres', 'postgres://u:Private-Pw-2@127.0.0.1:5432/app'],
    ['postgres', 'postgres://u:Private-Pw-2@[::1]:5432/app'],
    ['postgres', 'postgres://u:Private-Pw-2@10.1.2.3/app'],
  ] as const) {
    const r = await api<Refusal>(strict.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: kind, secret } });
    t.equal(r.status, 400, `${secret.replace(/:[^:@]*@/, ':…@')}: ${r.text}`);
    t.equal(r.body.error.code, 'invalid_request');
    // the same code and reason as a query, the message worded for the credential being registered
    t.same(r.body.error.details, { connector_kind: kind, reason: 'address_not_allowed', field: 'secret', in: 'body' });
    t.match(q.body.error.message, /^the registered mysql credential points at /, 'a query names the registered credential');
    t.equal(r.body.error.message, q.body.error.message.replace(/mysql/g, kind).replace(/^the registered /, 'this '), 'the message a query gets, for this credential');
    t.notMatch(r.text, /Private-Pw/);
  }
  const creds = await api<{ credentials: Meta[] }>(strict.url, 'GET', '/v1/connections/credentials', { key: a.key });
  t.same(creds.body.credentials.map((c) => c.connector_kind), ['mysql'], 'nothing refused was stored or replaced');
  // a name that does not resolve (yet) is accepted: the query path resolves it for every statement
  const unresolved = await api(strict.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'postgres', secret: 'postgres://u:p@no-such-host.invalid/app' } });
  t.equal(unresolved.status, 201, unresolved.text);
});

t.test('http-files with public files: an empty secret is accepted for that kind only', async (t) => {
  const a = await signupAgent(srv.url);
  const files = [{ table: 'rates', url: 'https://files.example.com/rates.csv' }];
  const r = await api<Meta>(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'http-files', secret: '', options: { files } } });
  t.equal(r.status, 201, r.text);
  t.equal(r.body.connector_kind, 'http-files');
  t.equal(r.body.hint, '');
  const resolved = await srv.svc.services.credentials.resolve(a.orgId, 'http-files');
  t.equal(resolved.secret, '', 'stored and opened as no token');
  t.same(resolved.options['files'], [{ table: 'rates', url: 'https://files.example.com/rates.csv', format: 'csv' }]);
  for (const kind of ['postgres', 'mysql', 'stripe', 'github', 'hubspot', 'salesforce']) {
    const e = await api<{ error: { code: string; details?: { field?: string } } }>(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: kind, secret: '' } });
    t.equal(e.status, 400, `${kind}: an empty secret is refused`);
    t.equal(e.body.error.details?.field, 'secret', kind);
  }
  const noFiles = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'http-files', secret: '' } });
  t.equal(noFiles.status, 400, 'the files option is still required');
});
