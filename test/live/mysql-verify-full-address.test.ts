/**
 * `mysql`, in every sslmode, connects to the address svc checked, not to whatever the host
 * name resolves to at connect time: a name that answers the check with one address and the
 * driver's own lookup with another (DNS rebinding) must not reach the second. The "DNS" here is
 * Node's resolver answering a made-up name: the check's lookup (dns.promises) with 127.0.0.1, a
 * socket's lookup (dns.lookup) with 127.0.0.2. Both addresses have a silent TCP listener on the
 * same port; only the first may see a connection.
 */
import dns from 'node:dns';
import net from 'node:net';
import t from 'tap';
import { tcpServer } from '../helpers/tcp.js';
import { api, openConnection, signupAgent, startServer } from '../helpers/server.js';

const NAME = 'mysql-rebind.svc-test.invalid';

t.test('mysql never connects to an address other than the checked one, in any sslmode', async (t) => {
  const checked = await tcpServer(t);
  const rebound: net.Socket[] = [];
  const other = net.createServer((s) => {
    rebound.push(s);
    s.on('error', () => undefined);
  });
  await new Promise<void>((resolve, reject) => {
    other.once('error', reject);
    other.listen(checked.port, '127.0.0.2', resolve);
  });
  t.teardown(() => {
    for (const s of rebound) s.destroy();
    return new Promise<void>((resolve) => other.close(() => resolve()));
  });

  const promisesLookup = dns.promises.lookup;
  const callbackLookup = dns.lookup;
  dns.promises.lookup = ((host: string, o: unknown) =>
    host === NAME ? Promise.resolve([{ address: '127.0.0.1', family: 4 }]) : (promisesLookup as (h: string, o: unknown) => Promise<unknown>)(host, o)) as typeof dns.promises.lookup;
  dns.lookup = ((host: string, o: unknown, cb?: unknown) => {
    if (host !== NAME) return (callbackLookup as (...a: unknown[]) => void)(host, o, cb);
    const callback = (typeof o === 'function' ? o : cb) as (err: null, address: string | dns.LookupAddress[], family?: number) => void;
    const all = typeof o === 'object' && o !== null && (o as dns.LookupOptions).all === true;
    process.nextTick(() => (all ? callback(null, [{ address: '127.0.0.2', family: 4 }]) : callback(null, '127.0.0.2', 4)));
  }) as typeof dns.lookup;
  t.teardown(() => {
    dns.promises.lookup = promisesLookup;
    dns.lookup = callbackLookup;
  });

  const srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 1500 } });
  t.teardown(() => srv.close());
  // every mode that gives the driver the host name (for its SNI and identity check) opens the socket itself
  for (const sslmode of ['verify-full', 'verify-ca', 'require', 'prefer', 'disable']) {
    const before = checked.sockets.length;
    const a = await signupAgent(srv.url);
    const reg = await api(srv.url, 'POST', '/v1/connections/credentials', {
      key: a.key,
      body: { connector_kind: 'mysql', secret: `mysql://reader:Rebind-Pw-1234@${NAME}:${checked.port}/shop`, options: { sslmode } },
    });
    t.equal(reg.status, 201, reg.text);
    const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
    const r = await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT id FROM orders' } });
    t.not(r.status, 200, `${sslmode}: the silent listener answers nothing`);
    t.equal(rebound.length, 0, `${sslmode}: no connection to the address the name resolved to after the check`);
    t.ok(checked.sockets.length > before, `${sslmode}: the checked address was connected to`);
  }
});
