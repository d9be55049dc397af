/**
 * Shared by the relay end-to-end tests (test/e2e/relay-*.test.ts): the compiled svc-relay as a
 * child process, enrollment through the real API, waiting for a relay's status, and a customer
 * database with an `orders` table.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { enroll, type EnrollResult } from '../../relay-agent/index.js';
import { ensureDist } from '../cli/dist.js';
import { customerDatabase, type CustomerDatabase } from '../helpers/customer-db.js';
import { api, signupAgent, tempDir, type Agent } from '../helpers/server.js';
import { ROOT } from '../helpers/root.js';

export const root = ROOT;
export const relayBin = path.join(root, 'dist/cli/svc-relay.js');
export const controlPlaneBin = path.join(root, 'dist/control-plane/main.js');

/** the compiled tree brought up to date (shared with the svc CLI tests); only missing outputs are fatal */
export function buildDist(): void {
  ensureDist();
  if (!existsSync(relayBin) || !existsSync(controlPlaneBin)) throw new Error('the build did not produce dist/cli/svc-relay.js and dist/control-plane/main.js');
}

export interface Proc {
  readonly child: ChildProcess;
  output(): string;
  /** resolves with the first match of `re` in the output (waits for it) */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * `script` in a child Node.js process, with `--liftoff-only` as the test processes themselves
 * (docs/testing.md: V8's optimizing tier would compile the engines' WebAssembly again in each
 * short-lived process; svc-relay runs none, the control plane does).
 */
export function spawnNode(script: string, args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, ['--liftoff-only', script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (d: Buffer): void => {
    out += d.toString();
    for (const l of [...listeners]) l();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    output: () => out,
    exited,
    waitFor: (re, timeoutMs = 30_000) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const m = re.exec(out);
          if (m) {
            cleanup();
            resolve(m);
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${re} in:\n${out}`));
        }, timeoutMs);
        const onExit = (): void => {
          setImmediate(() => {
            const m = re.exec(out);
            cleanup();
            if (m) resolve(m);
            else reject(new Error(`exited (${String(child.exitCode)}) before ${re} appeared:\n${out}`));
          });
        };
        const cleanup = (): void => {
          clearTimeout(timer);
          listeners.delete(check);
          child.off('exit', onExit);
        };
        listeners.add(check);
        child.once('exit', onExit);
        check();
      }),
    kill: async (signal = 'SIGTERM') => {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      return exited;
    },
  };
}

/** `svc-relay run` as a child process, with its health port; resolves once it is dialing */
export async function runRelay(configDir: string, databaseUrl: string, extra: string[] = []): Promise<Proc & { healthPort: number }> {
  const p = spawnNode(relayBin, ['run', '--config-dir', configDir, '--database-url', databaseUrl, '--health-port', '0', ...extra]);
  const m = await p.waitFor(/health on 127\.0\.0\.1:(\d+)/);
  return Object.assign(p, { healthPort: Number(m[1]) });
}

export async function metrics(port: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) (-?[\d.e+]+)$/.exec(line);
    if (m?.[1] && m[2]) out[m[1]] = Number(m[2]);
  }
  return out;
}

/** a new account with money in its wallet: these tests run more queries than the trial's 100 */
export async function fundedAgent(url: string): Promise<Agent> {
  const a = await signupAgent(url);
  const r = await api(url, 'POST', '/v1/agent/topup', { key: a.key, body: { amount_cents: 10_000 } });
  if (r.status !== 200 && r.status !== 201) throw new Error(`topup: ${r.status} ${r.text}`);
  return a;
}

/** enroll a relay through the real API into a fresh config dir */
export async function enrollRelay(url: string, key: string, name = 'db'): Promise<EnrollResult> {
  const token = await api<{ token: string }>(url, 'POST', '/v1/relays/enroll-token', { key, body: {} });
  if (token.status !== 201) throw new Error(`enroll-token: ${token.status} ${token.text}`);
  return enroll({ controlPlane: url, token: token.body.token, configDir: path.join(await tempDir('svc-relay-'), 'cfg'), name });
}

export interface RelayView {
  relay_id: string;
  status: string;
  certificates: { serial: string; state: string; not_after: string }[];
}

export async function relayView(url: string, key: string, relayId: string): Promise<RelayView> {
  const r = await api<RelayView>(url, 'GET', `/v1/relays/${relayId}`, { key });
  if (r.status !== 200) throw new Error(`GET relay: ${r.status} ${r.text}`);
  return r.body;
}

export async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 50): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * `p`, or its error with the named processes' output appended: a wait that times out on a loaded
 * machine says what the relay and the control planes were doing (a CI log is all there is).
 */
export async function withOutputs<T>(p: Promise<T>, procs: Record<string, Proc | undefined>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    const outputs = Object.entries(procs).map(([name, proc]) => `--- ${name}:\n${proc?.output() ?? '(not started)'}`);
    throw new Error([(err as Error).message, ...outputs].join('\n'));
  }
}

export async function waitStatus(url: string, key: string, relayId: string, status: 'online' | 'offline', timeoutMs = 30_000): Promise<void> {
  await until(`relay ${relayId} ${status}`, async () => (await relayView(url, key, relayId)).status === status, timeoutMs);
}

/** the customer database with public.orders (5000 rows, tenant_id = id % 5) */
export async function ordersDatabase(prefix: string): Promise<CustomerDatabase> {
  const db = await customerDatabase(prefix);
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    await c.query('CREATE TABLE public.orders (id int PRIMARY KEY, tenant_id int NOT NULL, amount numeric(10,2) NOT NULL)');
    await c.query('INSERT INTO public.orders SELECT g, g % 5, g * 1.5 FROM generate_series(1, 5000) g');
  } finally {
    await c.end();
  }
  return db;
}

/** a TCP port free right now on 127.0.0.1 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export async function rmDir(dir: string): Promise<void> {
  await fs.rm(dir, { recursive: true, force: true });
}

export type QueryAnswer = { status: number; body: { rows?: Record<string, unknown>[]; row_count?: number; error?: { code: string; message: string } } };

export function queryFn(url: string, key: string, connectionId: string): (sql: string) => Promise<QueryAnswer> {
  return (sql) => api(url, 'POST', `/v1/connections/${connectionId}/query`, { key, body: { sql } }) as Promise<QueryAnswer>;
}
