/**
 * `mysql` with `sslmode=prefer` (the default) keeps the statement's deadline when it connects
 * again without TLS: the second attempt gets what is left of the first one's connect timeout, not
 * a whole new one (control-plane/live/mysql/index.ts connect). Before, a server whose greeting
 * came late and offered no TLS could hold the agent for up to twice the statement's time limit.
 *
 * A MySQL server of our own on 127.0.0.1 (port 0), over real sockets and the real control plane
 * over HTTP: its first connection is greeted late with a Handshake V10 that offers no TLS
 * (CLIENT_SSL clear), so the driver refuses it before sending anything; every later connection
 * is never greeted. No MariaDB is needed.
 */
import net from 'node:net';
import t from 'tap';
import { api, openConnection, signupAgent, startServer } from '../helpers/server.js';

const TIMEOUT_MS = 4000;
/** the first greeting comes this late: half the connect timeout is spent (the other half leaves room for a busy machine's start) */
const GREETING_DELAY_MS = 2000;

/** a Handshake V10 packet (sequence id 0) whose capability flags do not offer TLS */
function greetingWithoutTls(): Buffer {
  const CLIENT_LONG_PASSWORD = 0x1;
  const CLIENT_CONNECT_WITH_DB = 0x8;
  const CLIENT_PROTOCOL_41 = 0x200;
  const CLIENT_SECURE_CONNECTION = 0x8000;
  const CLIENT_PLUGIN_AUTH = 0x80000;
  const caps = CLIENT_LONG_PASSWORD | CLIENT_CONNECT_WITH_DB | CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH;
  const u16 = (n: number): Buffer => {
    const b = Buffer.alloc(2);
    b.writeUInt16LE(n);
    return b;
  };
  const payload = Buffer.concat([
    Buffer.from([10]), // protocol version
    Buffer.from('5.7.44-fake\0', 'latin1'),
    Buffer.from([1, 0, 0, 0]), // thread id
    Buffer.from('abcdefgh', 'latin1'), // auth plugin data, part 1
    Buffer.from([0]), // filler
    u16(caps & 0xffff),
    Buffer.from([0x21]), // utf8_general_ci
    u16(0x0002), // SERVER_STATUS_AUTOCOMMIT
    u16(caps >>> 16),
    Buffer.from([21]), // length of the auth plugin data
    Buffer.alloc(10), // reserved
    Buffer.from('ijklmnopqrst\0', 'latin1'), // auth plugin data, part 2
    Buffer.from('mysql_native_password\0', 'latin1'),
  ]);
  const header = Buffer.alloc(4);
  header.writeUIntLE(payload.length, 0, 3);
  header[3] = 0;
  return Buffer.concat([header, payload]);
}

t.test('prefer: a late greeting without TLS, then no greeting at all, is answered by the deadline', async (t) => {
  const sockets: net.Socket[] = [];
  let connections = 0;
  /** how long each connection stayed open, in the order they closed */
  const lifetimes: number[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    const at = Date.now();
    s.on('close', () => lifetimes.push(Date.now() - at));
    s.on('error', () => undefined);
    if (++connections === 1) {
      const timer = setTimeout(() => s.writable && s.write(greetingWithoutTls()), GREETING_DELAY_MS);
      s.on('close', () => clearTimeout(timer));
    }
    // later connections (the one without TLS) are never greeted: only the connect timeout ends them
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  // the server is on loopback: allowed only by SVC_LIVE_ALLOW_PRIVATE=1
  const srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: TIMEOUT_MS } });
  t.teardown(async () => {
    await srv.close();
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const a = await signupAgent(srv.url);
  const reg = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: 'mysql', secret: `mysql://reader:pw@127.0.0.1:${port}/shop` } });
  t.equal(reg.status, 201, reg.text);
  const conn = await openConnection(srv.url, a.key, 'mysql', ['read:orders']);
  const r = await api<{ error?: { code: string; details?: Record<string, unknown> } }>(srv.url, 'POST', `/v1/connections/${conn}/query`, {
    key: a.key,
    body: { sql: 'SELECT id FROM orders' },
  });
  t.equal(r.status, 503, r.text);
  t.equal(r.body.error?.details?.['reason'], 'unreachable');
  t.equal(connections, 2, 'asked with TLS first, then connected again without it');
  // the first connection lived until its late greeting; the one without TLS had what was left of
  // the time limit (TIMEOUT_MS - GREETING_DELAY_MS, or the driver's 100 ms floor). With a whole new
  // connect timeout it stayed open about TIMEOUT_MS: the answer came near twice the time limit
  await new Promise<void>((resolve) => setImmediate(resolve));
  t.equal(lifetimes.length, 2, `both connections were closed (${lifetimes.join(', ')} ms)`);
  const [first, second] = lifetimes as [number, number];
  t.ok(first >= GREETING_DELAY_MS - 50, `the first waited for its greeting (${first} ms)`);
  // both together within the one connect timeout (about TIMEOUT_MS), not one each (about TIMEOUT_MS + GREETING_DELAY_MS)
  t.ok(first + second < TIMEOUT_MS + GREETING_DELAY_MS / 2, `the second had only what was left of the time limit (${first} + ${second} ms; a new timeout would make it about ${TIMEOUT_MS + GREETING_DELAY_MS} ms)`);
});
