/**
 * Test harness: a real control plane on a real socket (port 0), with a fresh data dir. The
 * migrated store template and the demo image are built once per machine and cached in the OS
 * temp dir (keyed by their fingerprints), so each test file starts a server in about a second.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { buildApp, type SvcApp } from '../../control-plane/app.js';
import { Catalogue } from '../../control-plane/catalogue/index.js';
import { loadConfig, type Config, type Limits } from '../../control-plane/config.js';
import { embeddedDemoImage } from '../../control-plane/demo/engine.js';
import { scopeSettings } from '../../control-plane/query/scope-settings.js';
import { embeddedStoreTemplate, MIGRATIONS, openStore, type Store } from '../../control-plane/store/index.js';
import type { TapTest } from './tap.js';

/** the test cache (TEST_CACHE_DIR, default the OS temp dir's svc-test-cache): kept between test files and runs */
export const CACHE = process.env['TEST_CACHE_DIR'] ?? path.join(os.tmpdir(), 'svc-test-cache');

/** `name` from the test cache, built (and kept for the next test files) when it is not there */
export async function cached(name: string, build: () => Promise<Uint8Array>): Promise<Uint8Array> {
  const file = path.join(CACHE, name);
  try {
    return new Uint8Array(await fs.readFile(file));
  } catch {
    const bytes = await build();
    await fs.mkdir(CACHE, { recursive: true });
    const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
    await fs.writeFile(tmp, bytes);
    await fs.rename(tmp, file);
    return bytes;
  }
}

const storeKey = (): string => createHash('sha256').update(JSON.stringify(MIGRATIONS)).digest('hex').slice(0, 16);

export async function storeTemplate(): Promise<Uint8Array> {
  return cached(`store-${storeKey()}.tar.gz`, embeddedStoreTemplate);
}

let storeDir: Promise<string> | undefined;
/**
 * The migrated store as a data directory, made once from {@link storeTemplate} and kept in the
 * cache: a test server's store is a copy of it, which starts on about 0.6 s less CPU than loading
 * the template archive (each test file starts one or more servers).
 */
export function storeTemplateDir(): Promise<string> {
  storeDir ??= (async () => {
    const dir = path.join(CACHE, `store-${storeKey()}`);
    if (await exists(path.join(dir, 'PG_VERSION'))) return dir;
    await fs.mkdir(CACHE, { recursive: true });
    const work = await fs.mkdtemp(path.join(CACHE, 'store-building-'));
    try {
      const store = await openStore({ databaseUrl: undefined, dataDir: work, template: await storeTemplate(), warn: () => undefined });
      await store.close();
      // another process may have made it meanwhile: its copy stands
      await fs.rename(path.join(work, 'state'), dir).catch(async (err: unknown) => {
        if (!(await exists(path.join(dir, 'PG_VERSION')))) throw err;
      });
    } finally {
      await fs.rm(work, { recursive: true, force: true });
    }
    return dir;
  })();
  return storeDir;
}

const exists = (p: string): Promise<boolean> => fs.access(p).then(() => true, () => false);

export async function demoImage(): Promise<Uint8Array> {
  const datasets = new Catalogue().datasets;
  const dir = path.join(CACHE, 'demo');
  return embeddedDemoImage(dir, datasets);
}

/** a new data directory's store: a copy of the migrated template (a directory that has one keeps it) */
async function copyStore(dataDir: string): Promise<void> {
  const state = path.join(dataDir, 'state');
  if (await exists(state)) return;
  await copyTree(await storeTemplateDir(), state);
}

/**
 * A copy of a directory of plain files and directories (the store template has nothing else).
 * fs.cp does the same on several times the CPU (about 0.5 s for the store's ~1,000 files), which
 * each test server paid.
 */
async function copyTree(from: string, to: string): Promise<void> {
  await fs.mkdir(to);
  const entries = await fs.readdir(from, { withFileTypes: true });
  await Promise.all(
    entries.map((e) => {
      if (e.isDirectory()) return copyTree(path.join(from, e.name), path.join(to, e.name));
      if (e.isFile()) return fs.copyFile(path.join(from, e.name), path.join(to, e.name));
      throw new Error(`copyTree: ${path.join(from, e.name)} is neither a file nor a directory`);
    }),
  );
}

export async function tempDir(prefix = 'svc-test-'): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), prefix));
}

/** a migrated embedded store of its own (no server), in a temporary data dir; closed and removed at the end of `t` */
export async function embeddedStore(t: TapTest): Promise<Store> {
  const dir = await tempDir();
  const store = await openStore({ databaseUrl: undefined, dataDir: dir, template: await storeTemplate() });
  t.teardown(async () => {
    await store.close();
    await fs.rm(dir, { recursive: true, force: true });
  });
  return store;
}

export interface TestServer {
  readonly url: string;
  readonly svc: SvcApp;
  readonly config: Config;
  close(): Promise<void>;
}

export interface ServerOptions {
  readonly env?: Record<string, string>;
  readonly limits?: Partial<Limits>;
  readonly dataDir?: string;
  readonly databaseUrl?: string;
  readonly demoWorkers?: number;
  /** start the demo engine with the server and wait for it (`eager`), or on the first demo query (`lazy`, default) */
  readonly demo?: 'eager' | 'lazy';
  /** receives the server's log lines (set LOG_LEVEL in env to see them) */
  readonly logStream?: NodeJS.WritableStream;
  /** how long a connection may take to send its first whole request (default the app's) */
  readonly firstRequestWithinMs?: number;
}

export async function startServer(o: ServerOptions = {}): Promise<TestServer> {
  const dataDir = o.dataDir ?? (await tempDir());
  const base = loadConfig({ SVC_DATA_DIR: dataDir, PORT: '0', SVC_TUNNEL_PORT: '0', LOG_LEVEL: 'silent', SVC_RATE_LIMIT: '100000', SVC_SIGNUP_RATE_LIMIT: '100000', SVC_REFUSED_STATEMENTS_PER_MINUTE: '100000', ...(o.env ?? {}) });
  const config: Config = {
    ...base,
    ...(o.databaseUrl ? { databaseUrl: o.databaseUrl } : {}),
    demoWorkers: o.demoWorkers ?? 2,
    limits: { ...base.limits, ...(o.limits ?? {}) },
  };
  const [, image] = await Promise.all([config.databaseUrl ? undefined : copyStore(dataDir), config.demoDatabaseUrl ? undefined : demoImage()]);
  const svc = await buildApp(config, { ...(image ? { demoImage: image } : {}), ...(o.demo === 'eager' ? { awaitDemo: true } : { demo: 'lazy' as const }), ...(o.logStream ? { logStream: o.logStream } : {}), ...(o.firstRequestWithinMs ? { firstRequestWithinMs: o.firstRequestWithinMs } : {}) });
  await svc.app.listen({ host: '127.0.0.1', port: 0 });
  const addr = svc.app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${addr.port}`,
    svc,
    config,
    close: async () => {
      await svc.app.close();
      if (!o.dataDir) await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

export interface ApiResponse<T = Record<string, unknown>> {
  readonly status: number;
  readonly body: T;
  readonly text: string;
  readonly headers: Headers;
}

export async function api<T = Record<string, unknown>>(
  base: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key) headers['authorization'] = `Bearer ${opts.key}`;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed as T, text, headers: res.headers };
}

export interface Agent {
  readonly key: string;
  readonly orgId: string;
}

export async function signupAgent(base: string, org = 'Acme Health', agent = 'test-agent'): Promise<Agent> {
  const r = await api<{ apiKey: string; orgId: string }>(base, 'POST', '/v1/agent/account', { body: { orgName: org, agentName: agent, headless: true } });
  if (r.status !== 201) throw new Error(`signup failed: ${r.status} ${r.text}`);
  return { key: r.body.apiKey, orgId: r.body.orgId };
}

export async function openConnection(base: string, key: string, target: string, scopes: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const r = await api<{ connectionId: string }>(base, 'POST', '/v1/connections', { key, body: { target_id: target, scopes, tier: 'container', ttl_seconds: 3600, ...extra } });
  if (r.status !== 201) throw new Error(`connect failed: ${r.status} ${r.text}`);
  return r.body.connectionId;
}

// ---------------------------------------------------------------------------------------------
// A real PostgreSQL, when one answers (TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test)

export const TEST_DATABASE_URL = process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

let pgAnswer: Promise<boolean> | undefined;
export function realPostgresAvailable(): Promise<boolean> {
  pgAnswer ??= (async () => {
    const c = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 1500 });
    try {
      await c.connect();
      await c.query('SELECT 1');
      return true;
    } catch {
      return false;
    } finally {
      await c.end().catch(() => undefined);
    }
  })();
  return pgAnswer;
}

/** A fresh database on the real server; dropped by the returned cleanup. */
export async function freshDatabase(prefix = 'svc_test'): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(TEST_DATABASE_URL);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/**
 * Ground truth from the demo engine itself, every table and period in scope: the harness's
 * privilege, never the agent's. Used to check that scoped answers equal the true in-scope answer.
 */
export async function groundTruth(srv: TestServer, sql: string): Promise<Record<string, unknown>[]> {
  const engine = await srv.svc.demoReady;
  const tables = srv.svc.services.catalogue.datasets.flatMap((d) => d.tables.map((t) => ({ schema: d.schema, table: t.name })));
  const r = await engine.run({ sql, direct: false, settings: scopeSettings(tables, []), tenant: 'ground-truth', timeoutMs: 10_000, maxRows: 1_000_000, maxBytes: 100_000_000 });
  return [...r.rows];
}
