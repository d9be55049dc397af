/** Test doubles for the relay agent: a recording clock and a dialer of in-memory tunnels. */
import { Session, memoryTransportPair, type MemoryTransport, type IncomingQuery, type Transport } from '../../protocol/index.js';
import type { AgentClock } from '../../relay-agent/index.js';

/** a clock whose sleeps resolve at once and are recorded */
export function fakeClock(start = 1_700_000_000_000): AgentClock & { sleeps: number[]; t: number } {
  const c = {
    t: start,
    sleeps: [] as number[],
    now: () => c.t,
    sleep: async (ms: number) => {
      c.sleeps.push(ms);
      c.t += ms;
      await new Promise((r) => setImmediate(r));
    },
  };
  return c;
}

/** a dialer handing out memory transports; the test gets the server sessions */
export function fakeDialer(script: (n: number) => 'ok' | Error = () => 'ok') {
  const servers: Session[] = [];
  const ends: MemoryTransport[] = [];
  let dials = 0;
  const waiters: ((s: Session) => void)[] = [];
  const dial = async () => {
    const n = dials++;
    const r = script(n);
    if (r instanceof Error) throw r;
    const [a, b] = memoryTransportPair();
    ends.push(a);
    // the server's HELLO must not reach the relay end before its session listens
    const early: Uint8Array[] = [];
    let deliver: ((b: Uint8Array) => void) | null = null;
    a.onMessage((b) => (deliver ? deliver(b) : early.push(b)));
    const buffered: Transport = {
      send: (b) => a.send(b),
      close: (c, r) => a.close(c, r),
      onClose: (cb) => a.onClose(cb),
      onMessage: (cb) => {
        deliver = cb;
        for (const b of early.splice(0)) cb(b);
      },
    };
    setImmediate(() => {
      const s = new Session(buffered, { role: 'server', pingIntervalMs: 0 });
      servers.push(s);
      for (const w of waiters.splice(0)) w(s);
    });
    return b;
  };
  return {
    dial,
    servers,
    ends,
    get dials() {
      return dials;
    },
    next: () => new Promise<Session>((r) => waiters.push(r)),
  };
}

export const echo = async (q: IncomingQuery) => {
  await q.sendColumns([{ name: 'statement' }]);
  await q.sendRows([[q.open.statement]]);
  await q.end();
};

export async function srv(d: { servers: Session[] }, i: number): Promise<Session> {
  await until(() => d.servers[i] !== undefined);
  const s = d.servers[i]!;
  await s.ready;
  return s;
}

export async function until(cond: () => boolean, ms = 2000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 2));
  }
}

