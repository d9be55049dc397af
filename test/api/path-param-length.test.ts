/**
 * Path parameters of every length the served OpenAPI document admits (its `maxLength`) are
 * answered like any other id: 401 without a key, 404 not_found with one. Longer ones are
 * 400 invalid_request naming the parameter (`details.in: "path"`), in the error shape, without
 * quoting the request's path back. Walked over the document, so a new route is covered.
 */
import t from 'tap';
import { generateKeyAndCsr } from '../../pki/csr.js';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
t.before(async () => {
  srv = await startServer();
});
t.teardown(() => srv.close());

interface Op {
  parameters?: { name: string; in: string; schema?: { maxLength?: number } }[];
}
type Doc = { paths: Record<string, Record<string, Op>> };
type ErrorBody = { error?: { code?: string; message?: string; details?: Record<string, unknown> } };

/** a body each operation takes, so that only the path parameter decides the answer */
const { csrPem } = generateKeyAndCsr();
const BODIES: Record<string, unknown> = {
  'post /v1/connections/{connection_id}/query': { sql: 'SELECT 1' },
  'post /v1/relays/{relay_id}/renew': { csr_pem: csrPem },
  'post /v1/relays/{relay_id}/rotate-cert': { csr_pem: csrPem },
};

t.test('a path parameter as long as the document allows is an unknown id, one longer is 400 naming it', async (t) => {
  const a = await signupAgent(srv.url, 'Long Ids Org');
  const doc = (await api<Doc>(srv.url, 'GET', '/openapi.json')).body;
  let checked = 0;
  for (const [route, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const params = (op.parameters ?? []).filter((p) => p.in === 'path');
      for (const p of params) {
        const max = p.schema?.maxLength;
        t.type(max, 'number', `${method} ${route}: ${p.name} declares its maxLength`);
        if (typeof max !== 'number') continue;
        const fill = (len: number): string => route.replace(/\{([^}]+)\}/g, (_m, name: string) => (name === p.name ? 'x'.repeat(len) : `x_${name}`));
        const label = `${method.toUpperCase()} ${route} (${p.name})`;
        const body = BODIES[`${method} ${route}`];
        const opts = body === undefined ? {} : { body };

        const atMost = await api<ErrorBody>(srv.url, method.toUpperCase(), fill(max), { key: a.key, ...opts });
        t.equal(atMost.status, 404, `${label}, ${max} characters: an unknown id (${atMost.text.slice(0, 200)})`);
        t.equal(atMost.body.error?.code, 'not_found', `${label}: not_found`);
        const noKey = await api<ErrorBody>(srv.url, method.toUpperCase(), fill(max), opts);
        t.equal(noKey.status, 401, `${label}, ${max} characters, no key: 401 like any other id (${noKey.text.slice(0, 200)})`);

        for (const len of [max + 1, 5000]) {
          const over = await api<ErrorBody>(srv.url, method.toUpperCase(), fill(len), { key: a.key, ...opts });
          t.equal(over.status, 400, `${label}, ${len} characters: 400 (${over.text.slice(0, 200)})`);
          t.equal(over.body.error?.code, 'invalid_request', `${label}, ${len}: invalid_request`);
          t.equal(over.body.error?.details?.['in'], 'path', `${label}, ${len}: details.in`);
          t.equal(over.body.error?.details?.['field'], p.name, `${label}, ${len}: details.field`);
          t.notOk(over.text.includes('x'.repeat(300)), `${label}, ${len}: the path is not quoted back`);
        }
        checked++;
      }
    }
  }
  t.ok(checked >= 10, `path parameters checked: ${checked}`);
});
