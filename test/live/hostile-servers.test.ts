/**
 * A tenant's own database server is hostile: it may answer the connection's startup, or one of
 * our own statements (BEGIN, SET …), with a message of hundreds of MB. No such message is decoded
 * (the drivers would build it into a string and kill the process): every connection is guarded
 * from its first byte (protocol/wire-guard.ts). Fake PostgreSQL and MySQL servers on port 0
 * declare 600 MB messages; the control plane answers the query with an error, stays up, and
 * answers the next request; svc-relay's executor likewise.
 */
import net from 'node:net';
import t from 'tap';
import { memoryTransportPair, ProtocolError, Session } from '../../protocol/index.js';
import { createExecutor } from '../../relay-agent/index.js';
import { api, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

const HUGE = 600_000_000;

function pgMessage(type: string, body: Buffer, declared = body.length + 4): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeUInt32BE(declared, 1);
  return Buffer.concat([head, body]);
}

/** Writes a message header declaring `HUGE` bytes, then really streams them (until the peer hangs up). */
function streamHuge(sock: net.Socket, head: Buffer): void {
  sock.write(head);
  const piece = Buffer.alloc(1 << 20, 0x78);
  let sent = 0;
  const pump = (): void => {
    while (sent < HUGE && !sock.destroyed) {
      const n = Math.min(piece.length, HUGE - sent);
      sent += n;
      if (!sock.write(piece.subarray(0, n))) return void sock.once('drain', pump);
    }
  };
  pump();
}

/** A PostgreSQL server that follows the protocol up to `stage`, then sends a 600 MB message. */
async function fakePostgres(stage: 'startup' | 'first-query'): Promise<{ port: number; sockets: number; close(): Promise<void> }> {
  const stats = { sockets: 0 };
  const server = net.createServer((sock) => {
    stats.sockets++;
    sock.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    let started = false;
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (!started) {
        if (buf.length < 4) return;
        const len = buf.readUInt32BE(0);
        if (buf.length < len) return;
        buf = buf.subarray(len);
        started = true;
        if (stage === 'startup') {
          // an ErrorResponse of 600 MB
          streamHuge(sock, pgMessage('E', Buffer.alloc(0), HUGE + 4));
          return;
        }
        const auth = Buffer.alloc(4);
        sock.write(pgMessage('R', auth));
        const key = Buffer.alloc(8);
        key.writeUInt32BE(4242, 0);
        sock.write(pgMessage('K', key));
        sock.write(pgMessage('Z', Buffer.from('I')));
      }
      // any statement: a NoticeResponse of 600 MB
      if (started && stage === 'first-query' && buf.length > 0) {
        buf = Buffer.alloc(0);
        streamHuge(sock, pgMessage('N', Buffer.alloc(0), HUGE + 4));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    get sockets() {
      return stats.sockets;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** A MySQL server whose greeting is one logical packet of 600 MB (36 continuation pieces of 0xffffff bytes). */
async function fakeMysql(): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer((sock) => {
    sock.on('error', () => undefined);
    const piece = Buffer.alloc(1 << 20, 0x78);
    let seq = 0;
    let inPiece = 0; // bytes of the current 0xffffff piece still to send
    let total = 0;
    const pump = (): void => {
      while (total < HUGE && !sock.destroyed) {
        if (inPiece === 0) {
          sock.write(Buffer.from([0xff, 0xff, 0xff, seq++ & 0xff]));
          inPiece = 0xffffff;
        }
        const n = Math.min(piece.length, inPiece);
        inPiece -= n;
        total += n;
        if (!sock.write(piece.subarray(0, n))) return void sock.once('drain', pump);
      }
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as net.AddressInfo).port, close: () => new Promise<void>((r) => server.close(() => r())) };
}

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ env: { SVC_LIVE_ALLOW_PRIVATE: '1' }, limits: { queryTimeoutMs: 5000 } });
});
t.teardown(() => srv.close());

type Body = { rows?: unknown[]; error?: { code: string; message: string; details?: Record<string, unknown> } };

async function queryThrough(kind: 'postgres' | 'mysql', secret: string): Promise<{ status: number; body: Body; text: string }> {
  const a = await signupAgent(srv.url);
  const cred = await api(srv.url, 'POST', '/v1/connections/credentials', { key: a.key, body: { connector_kind: kind, secret } });
  if (cred.status !== 201) throw new Error(`credential: ${cred.status} ${cred.text}`);
  const conn = await openConnection(srv.url, a.key, kind, ['read:orders']);
  return api<Body>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT id FROM orders' } });
}

for (const stage of ['startup', 'first-query'] as const) {
  t.test(`postgres: a 600 MB message at the ${stage} is never decoded; the query fails, the control plane goes on`, async (t) => {
    const fake = await fakePostgres(stage);
    t.teardown(() => fake.close());
    const rssBefore = process.memoryUsage().rss;
    const r = await queryThrough('postgres', `postgres://u:p@127.0.0.1:${fake.port}/db?sslmode=disable`);
    t.ok(r.status >= 400 && r.status < 600 && r.status !== 500 && r.status !== 504, `an error answer at once (not a crash, a 500 or the deadline): ${r.status} ${r.text.slice(0, 300)}`);
    t.equal(r.body.rows, undefined);
    t.ok(process.memoryUsage().rss - rssBefore < 300_000_000, 'the declared 600 MB were never buffered');
    t.equal((await api(srv.url, 'GET', '/healthz')).status, 200, 'the control plane still answers');
  });
}

t.test('mysql: a 600 MB greeting is never decoded; the query fails, the control plane goes on', async (t) => {
  const fake = await fakeMysql();
  t.teardown(() => fake.close());
  const rssBefore = process.memoryUsage().rss;
  const r = await queryThrough('mysql', `mysql://u:p@127.0.0.1:${fake.port}/db?sslmode=disable`);
  t.ok(r.status >= 400 && r.status < 600 && r.status !== 500 && r.status !== 504, `an error answer at once: ${r.status} ${r.text.slice(0, 300)}`);
  t.ok(process.memoryUsage().rss - rssBefore < 300_000_000, 'at most the first 16 MB piece was buffered');
  t.equal((await api(srv.url, 'GET', '/healthz')).status, 200, 'the control plane still answers');
});

t.test('svc-relay executor: a hostile database at the startup or the first statement fails the query, not the relay', async (t) => {
  for (const stage of ['startup', 'first-query'] as const) {
    const fake = await fakePostgres(stage);
    const [a, b] = memoryTransportPair();
    const server = new Session(a, { role: 'server', pingIntervalMs: 0 });
    const relay = new Session(b, { role: 'client', pingIntervalMs: 0 });
    const exec = createExecutor({ databaseUrl: `postgres://u:p@127.0.0.1:${fake.port}/db?sslmode=disable` });
    relay.onStream(exec.handle);
    await server.ready;
    const rssBefore = process.memoryUsage().rss;
    const err = (await server.openStream({ statement: 'SELECT 1' }).collect().catch((e: unknown) => e)) as ProtocolError;
    t.ok(err instanceof ProtocolError, `${stage}: the stream failed with a relay error (${err?.code}: ${err?.message})`);
    t.ok(process.memoryUsage().rss - rssBefore < 300_000_000, `${stage}: the declared 600 MB were never buffered`);
    const again = (await server.openStream({ statement: 'SELECT 1' }).collect().catch((e: unknown) => e)) as ProtocolError;
    t.ok(again instanceof ProtocolError, `${stage}: the next query is answered too (the relay is still there)`);
    server.close();
    relay.close();
    await exec.close();
    await fake.close();
  }
});
