/**
 * The paginated lists of docs/api.md refuse what they cannot honour, rather than clamp or ignore
 * it: `?limit=` outside its range (GET /v1/connections and GET /v1/webhooks/deliveries 1…500,
 * the audit page 1…1000) or not an integer, and a `?cursor=` that is no `next_cursor` of the list,
 * are `400 invalid_request` naming the parameter. The edges of each range are accepted.
 */
import t, { type Test } from 'tap';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

interface ErrorBody {
  error?: { code?: string; message?: string; details?: Record<string, unknown> };
}

async function refused(t: Test, key: string, path: string, field: string): Promise<void> {
  const r = await api<ErrorBody>(srv.url, 'GET', path, { key });
  t.equal(r.status, 400, `${path}: ${r.status} ${r.text.slice(0, 200)}`);
  t.equal(r.body.error?.code, 'invalid_request', `${path}: code`);
  t.equal(r.body.error?.details?.['field'], field, `${path}: names ${field}`);
  t.equal(r.body.error?.details?.['in'], 'query', `${path}: in the query`);
  t.match(r.body.error?.message, new RegExp(`"${field}"`), `${path}: the message names it`);
}

t.test('?limit= out of range or not an integer is 400 naming it, on every list', async (t) => {
  const a = await signupAgent(srv.url, 'Paging Org');
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const lists: [string, number][] = [
    ['/v1/connections', 500],
    ['/v1/webhooks/deliveries', 500],
    [`/v1/connections/${conn}/audit`, 1000],
  ];
  for (const [path, max] of lists) {
    for (const bad of ['0', '00', String(max + 1), '9999', '99999', '1000000000', '-1', '1.5', '1e3', 'abc', '']) {
      await refused(t, a.key, `${path}?limit=${encodeURIComponent(bad)}`, 'limit');
    }
    const message = (await api<ErrorBody>(srv.url, 'GET', `${path}?limit=0`, { key: a.key })).body.error?.message;
    t.match(message, new RegExp(`from 1 to ${max}`), `${path}: the message gives the range`);
    for (const good of ['1', String(max), '010']) {
      const r = await api(srv.url, 'GET', `${path}?limit=${good}`, { key: a.key });
      t.equal(r.status, 200, `${path}?limit=${good}: ${r.text.slice(0, 200)}`);
    }
  }
  // the audit export streams every event; a bad limit there is refused all the same
  await refused(t, a.key, `/v1/connections/${conn}/audit?format=jsonl&limit=1001`, 'limit');
});

t.test('?limit= is honoured exactly at its edges', async (t) => {
  const a = await signupAgent(srv.url, 'Edges Org');
  for (let i = 0; i < 3; i++) await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const one = await api<{ connections: unknown[]; next_cursor: string | null }>(srv.url, 'GET', '/v1/connections?limit=1', { key: a.key });
  t.equal(one.body.connections.length, 1);
  t.type(one.body.next_cursor, 'string');
  const all = await api<{ connections: unknown[]; next_cursor: string | null }>(srv.url, 'GET', '/v1/connections?limit=500', { key: a.key });
  t.equal(all.body.connections.length, 3);
  t.equal(all.body.next_cursor, null);
});

t.test('a ?cursor= that is no next_cursor of the list is 400 naming it; a real one pages', async (t) => {
  const a = await signupAgent(srv.url, 'Cursor Org');
  const b = await signupAgent(srv.url, 'Other Cursor Org');
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push(await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']));
  const theirs = await openConnection(srv.url, b.key, 'demo-healthcare', ['read:patients']);
  for (const bad of ['garbage', 'conn_doesnotexist', theirs, '']) {
    await refused(t, a.key, `/v1/connections?cursor=${encodeURIComponent(bad)}`, 'cursor');
  }
  const first = await api<{ connections: { connection_id: string }[]; next_cursor: string }>(srv.url, 'GET', '/v1/connections?limit=2', { key: a.key });
  t.same(first.body.connections.map((c) => c.connection_id), [ids[2], ids[1]]);
  const second = await api<{ connections: { connection_id: string }[]; next_cursor: string | null }>(srv.url, 'GET', `/v1/connections?limit=2&cursor=${first.body.next_cursor}`, { key: a.key });
  t.equal(second.status, 200);
  t.same(second.body.connections.map((c) => c.connection_id), [ids[0]]);
  t.equal(second.body.next_cursor, null);
  // with a status filter the cursor is still a place in the list
  const revoked = await api(srv.url, 'GET', `/v1/connections?status=revoked&cursor=${ids[1]}`, { key: a.key });
  t.equal(revoked.status, 200);
});
