/**
 * An embedded PostgreSQL (PGlite) running in its own worker thread. Requests are sent one at a
 * time (PGlite is a single session); `exclusive()` holds the engine for a sequence of requests
 * (a transaction). `terminate()` kills the thread at once — the only way to stop a runaway
 * statement in PGlite, which has no working statement_timeout.
 */
import { readFile } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';
import type { ReadQueryResult } from '../results/index.js';
import { keptOnceLoaded } from '../once.js';
import type { DataImage } from './image-fs.js';
import type { BatchItemResult, EngineModule, QueryResult, ReadQuerySpec, Request, Response, WorkerErrorInfo } from './messages.js';

export type { ReadQuerySpec } from './messages.js';

type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void; progress?: (p: unknown) => void };
type QueuedStatement = { readonly sql: string; readonly params: readonly unknown[]; readonly prepared: boolean; resolve: (rows: Record<string, unknown>[]) => void; reject: (e: Error) => void };

/** The most statements sent to the engine in one message. */
const MAX_BATCH = 64;

/** An error raised by the embedded database (SQLSTATE in `sqlState`) or by its thread dying. */
export class EmbeddedError extends Error {
  readonly code: 'EMBEDDED_ERR_SQL' | 'EMBEDDED_ERR_TERMINATED';
  readonly sqlState: string | undefined;
  readonly position: number | undefined;
  constructor(code: EmbeddedError['code'], info: WorkerErrorInfo) {
    super(info.message);
    this.name = 'EmbeddedError';
    this.code = code;
    this.sqlState = info.code;
    this.position = info.position;
  }
}

/**
 * "Program limit exceeded" (54000) checks that allocate nothing and leave the engine as it was:
 * `chr(0)`, an array of more than 6 dimensions. Every other 54000
 * is a value too large to build, as 53200 (out of memory) is.
 */
const CHEAP_LIMIT_MESSAGES = /^(null character not permitted|number of array dimensions \(\d+\) exceeds the maximum allowed)/;

/**
 * Whether the engine failed to build a value or row too large for it (`out_of_memory`: its heap is
 * not trusted with the next statement), rather than rejected the statement.
 */
export function valueTooLargeToBuild(err: EmbeddedError): boolean {
  if (err.sqlState === '53200') return true;
  return err.sqlState === '54000' && !CHEAP_LIMIT_MESSAGES.test(err.message);
}

/**
 * The URL of a sibling module of `base` (an `import.meta.url`): `name.ts` when running from
 * TypeScript sources (tests), `name.js` when compiled.
 */
export function siblingModule(name: string, base: string): URL {
  return new URL(`./${name}.${base.endsWith('.ts') ? 'ts' : 'js'}`, base);
}

/**
 * PGlite's engine, compiled once per process and handed to every engine thread. Left to itself,
 * each thread reads the 9 MB `pglite.wasm` and compiles it again: V8 shares the compiled code
 * between threads, but each thread's copy of the file stayed in its allocator (about 10 MB per
 * engine thread, and a demo pool has up to four).
 */
/** WebAssembly's API (this project's TypeScript libraries do not declare it) */
const wasm = (globalThis as unknown as { readonly WebAssembly: { compile(bytes: Uint8Array): Promise<EngineModule> } }).WebAssembly;
/** (a failed read or compile is tried again by the next engine) */
const pgliteModule: () => Promise<EngineModule> = keptOnceLoaded(() => readFile(new URL('./pglite.wasm', import.meta.resolve('@electric-sql/pglite'))).then((bytes) => wasm.compile(bytes)));

function workerUrl(): URL {
  return siblingModule('worker', import.meta.url);
}

/**
 * Node.js options a thread keeps from the process (its command line or `NODE_OPTIONS`): how
 * warnings and stack traces read. Every other one is left out: a worker refuses V8's options in
 * its `execArgv`, and those hold for the whole process anyway.
 */
const THREAD_FLAGS: ReadonlySet<string> = new Set(['--enable-source-maps', '--no-warnings', '--no-deprecation', '--trace-warnings', '--trace-deprecation', '--throw-deprecation', '--trace-uncaught']);

/**
 * An engine thread gets none of the process's preloads: not its command-line options (`execArgv`
 * keeps only {@link THREAD_FLAGS}) nor those of `NODE_OPTIONS` (a thread reads that variable again:
 * its environment is left without it). A preload given with `--import` or `--require` (an APM
 * agent, a test runner's process tracker, which reaches child processes through `NODE_OPTIONS`)
 * would otherwise load again in every engine thread, and an engine is started again after each
 * statement stopped at its deadline. V8's own options (`--max-old-space-size`, `--liftoff-only`)
 * are the process's and still hold. Run from TypeScript sources, the thread keeps them all: it
 * needs their TypeScript loader.
 */
export function threadOptions(url: URL, execArgv: readonly string[] = process.execArgv, env: NodeJS.ProcessEnv = process.env): { readonly execArgv?: string[]; readonly env?: NodeJS.ProcessEnv } {
  if (url.pathname.endsWith('.ts')) return {};
  const fromEnv = (env['NODE_OPTIONS'] ?? '').split(/\s+/);
  const kept = [...new Set([...execArgv, ...fromEnv].filter((a) => THREAD_FLAGS.has(a)))];
  const threadEnv = { ...env };
  delete threadEnv['NODE_OPTIONS'];
  return { execArgv: kept, env: threadEnv };
}

type RequestBody = Request extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

export interface EmbeddedOptions {
  /** persistent data directory; omitted means in memory */
  readonly dataDir?: string;
  /** a gzip tarball from `dump()` to start from */
  readonly loadDataDir?: Uint8Array;
  /**
   * an unpacked image (`unpackImage`) to run on, shared with every other engine started from it:
   * files are read in place and copied only when this engine writes them (in memory)
   */
  readonly image?: DataImage;
  /** server settings given at start, e.g. `{ shared_buffers: '16MB' }` (names and values are ours, never a user's) */
  readonly settings?: Readonly<Record<string, string>>;
  /** initdb options when a new database is created (neither `dataDir` holding one nor an image), e.g. IMAGE_INITDB */
  readonly initdb?: readonly string[];
}

/**
 * initdb options for a database that becomes an image shared by many engines: 1 MB WAL files
 * instead of 16 MB, since each engine starting on the image writes (so copies) the current one.
 */
export const IMAGE_INITDB: readonly string[] = ['--wal-segsize=1'];

/**
 * Run on a database about to become an image, each statement alone (DROP DATABASE refuses a
 * transaction block), before its last VACUUM or CHECKPOINT: only `postgres`, the database every
 * engine opens, is kept. template0 and template1 serve only CREATE DATABASE, which no engine on an
 * image runs, and were about 15 MB of every image, all of it in memory (half of an API engine's).
 */
export const IMAGE_ONLY_POSTGRES: readonly string[] = [
  'ALTER DATABASE template0 IS_TEMPLATE false',
  'DROP DATABASE template0',
  'ALTER DATABASE template1 IS_TEMPLATE false',
  'DROP DATABASE template1',
];

export class EmbeddedPostgres {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private lock: Promise<void> = Promise.resolve();
  private dead: Error | undefined;

  private constructor() {
    this.worker = new Worker(workerUrl(), threadOptions(workerUrl()));
    this.worker.on('message', (msg: Response) => {
      const p = this.pending.get(msg.id);
      if (!p) return;
      if ('progress' in msg) {
        try {
          p.progress?.(msg.progress);
        } catch {
          // a listener's failure is not the request's
        }
        return;
      }
      this.pending.delete(msg.id);
      if (msg.ok) p.resolve(msg.result);
      else p.reject(new EmbeddedError('EMBEDDED_ERR_SQL', msg.error));
    });
    const die = (err: Error): void => {
      this.dead ??= err;
      for (const p of this.pending.values()) p.reject(new EmbeddedError('EMBEDDED_ERR_TERMINATED', { message: this.dead.message }));
      this.pending.clear();
    };
    this.worker.on('error', die);
    this.worker.on('exit', (code) => die(new Error(`embedded engine thread exited (${code})`)));
  }

  static async start(options: EmbeddedOptions = {}): Promise<EmbeddedPostgres> {
    if (options.image && (options.dataDir || options.loadDataDir)) throw new TypeError('EmbeddedPostgres.start: an image excludes dataDir and loadDataDir');
    for (const [k, v] of Object.entries(options.settings ?? {})) {
      if (!/^[a-z_]+$/.test(k) || !/^[A-Za-z0-9_.]+$/.test(v)) throw new TypeError(`EmbeddedPostgres.start: bad setting ${k}=${v}`);
    }
    for (const o of options.initdb ?? []) {
      if (!/^--[a-z-]+=[A-Za-z0-9_.]+$/.test(o)) throw new TypeError(`EmbeddedPostgres.start: bad initdb option ${o}`);
    }
    const module = await pgliteModule();
    const engine = new EmbeddedPostgres();
    const init: RequestBody = { op: 'init' } as RequestBody;
    const msg = {
      ...init,
      module,
      ...(options.dataDir ? { dataDir: options.dataDir } : {}),
      ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
      ...(options.image ? { image: options.image } : {}),
      ...(options.settings ? { settings: options.settings } : {}),
      ...(options.initdb ? { initdb: options.initdb } : {}),
    };
    try {
      await engine.send(msg as RequestBody);
    } catch (err) {
      await engine.terminate();
      throw err;
    }
    return engine;
  }

  get alive(): boolean {
    return this.dead === undefined;
  }

  private send(body: RequestBody, progress?: (p: unknown) => void): Promise<unknown> {
    if (this.dead) return Promise.reject(new EmbeddedError('EMBEDDED_ERR_TERMINATED', { message: this.dead.message }));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, ...(progress ? { progress } : {}) });
      try {
        this.worker.postMessage({ ...body, id });
      } catch (err) {
        // a value that cannot be sent to the thread (a function, a symbol): this request fails alone
        this.pending.delete(id);
        reject(err as Error);
      }
    });
  }

  /** Run `fn` with the engine to itself; requests made inside go straight through. */
  exclusive<T>(fn: (engine: EngineSession) => Promise<T>): Promise<T> {
    // statements asked for after this run after it: the batch they would have joined is closed
    this.open = undefined;
    return this.acquire(fn);
  }

  /** Wait for the engine (first come, first served), then hold it while `fn` runs. */
  private async acquire<T>(fn: (engine: EngineSession) => Promise<T>): Promise<T> {
    const previous = this.lock;
    let release!: () => void;
    this.lock = new Promise<void>((r) => (release = r));
    await previous;
    try {
      return await fn(this.session);
    } finally {
      release();
    }
  }

  private readonly session: EngineSession = {
    query: async (sql, params = []) => ((await this.send({ op: 'query', sql, params })) as QueryResult).rows,
    exec: async (sql) => {
      await this.send({ op: 'exec', sql });
    },
    read: async (spec) => (await this.send({ op: 'read', spec })) as ReadQueryResult,
  };

  /**
   * One statement on its own (autocommit). Statements asked for one after another, with no
   * `exclusive()` between them, go to the thread together in one message (at most MAX_BATCH),
   * taking their place in the engine's first-come order when the first of them is asked for; the
   * thread runs them one after another, each on its own, and each answers or fails alone. Under
   * load the thread hop is paid once per batch instead of once per statement. A `prepared`
   * statement is kept prepared by the thread after its first run (worker.ts), by its text.
   */
  query(sql: string, params: readonly unknown[] = [], prepared = false): Promise<Record<string, unknown>[]> {
    return new Promise((resolve, reject) => {
      let batch = this.open;
      if (!batch || batch.length >= MAX_BATCH) {
        const fresh: QueuedStatement[] = [];
        batch = this.open = fresh;
        void this.acquire(() => this.runBatch(fresh));
      }
      batch.push({ sql, params, prepared, resolve, reject });
    });
  }

  /** the batch statements join until it starts (or fills, or an `exclusive()` is asked for) */
  private open: QueuedStatement[] | undefined;

  private async runBatch(items: QueuedStatement[]): Promise<void> {
    if (this.open === items) this.open = undefined;
    let results: BatchItemResult[];
    try {
      results = (await this.send({ op: 'batch', items: items.map((i) => ({ sql: i.sql, params: i.params, ...(i.prepared ? { prepared: true } : {}) })) })) as BatchItemResult[];
    } catch (err) {
      if (this.dead || items.length === 1) {
        for (const item of items) item.reject(err as Error);
        return;
      }
      // one statement's parameters could not be sent to the thread: each goes alone, and fails alone
      for (const item of items) await this.session.query(item.sql, item.params).then(item.resolve, item.reject);
      return;
    }
    items.forEach((item, k) => {
      const r = results[k];
      if (r?.ok) item.resolve(r.rows);
      else item.reject(new EmbeddedError('EMBEDDED_ERR_SQL', r?.error ?? { message: 'no result' }));
    });
  }

  exec(sql: string): Promise<void> {
    return this.exclusive((s) => s.exec(sql));
  }

  read(spec: ReadQuerySpec): Promise<ReadQueryResult> {
    return this.exclusive((s) => s.read(spec));
  }

  /**
   * Checkpoint when more than `walBytes` of WAL has been written since the last checkpoint: an
   * embedded PostgreSQL has no checkpointer, so without this its WAL only grows (in memory on an
   * image, on disk in a data dir) and is all replayed after a crash. True when it checkpointed.
   */
  checkpointPast(walBytes: number): Promise<boolean> {
    return this.exclusive(async (s) => {
      const rows = await s.query('SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), redo_lsn)::float8 AS written FROM pg_control_checkpoint()');
      if (Number(rows[0]?.['written'] ?? 0) <= walBytes) return false;
      await s.exec('CHECKPOINT');
      return true;
    });
  }

  /** Bytes of an image's files this engine holds copies of (the files it wrote); 0 when it runs on no image. */
  ownedBytes(): Promise<number> {
    return this.exclusive(() => this.send({ op: 'owned' }) as Promise<number>);
  }

  /** A gzip tarball of the whole data directory (see `loadDataDir`). */
  dump(): Promise<Uint8Array> {
    return this.exclusive(() => this.send({ op: 'dump' }) as Promise<Uint8Array>);
  }

  /**
   * Run `fn(db, progress)` of our own module `module` inside the worker, with the engine to
   * itself: for bulk work (seeding) that must not run on the event loop. What `fn` passes to
   * `progress` (structured-clonable) reaches `onProgress` here while it runs.
   */
  runModule(module: URL, fn: string, onProgress?: (p: unknown) => void): Promise<void> {
    return this.exclusive(async () => {
      await this.send({ op: 'run', module: module.href, fn }, onProgress);
    });
  }

  /** Close the database cleanly, then end the thread. */
  async close(): Promise<void> {
    if (this.dead) return;
    try {
      await this.exclusive(() => this.send({ op: 'close' }));
    } finally {
      await this.terminate();
    }
  }

  /** End the thread at once, abandoning whatever runs there. */
  async terminate(): Promise<void> {
    this.dead ??= new Error('embedded engine terminated');
    await this.worker.terminate();
  }
}

export interface EngineSession {
  query(sql: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>;
  exec(sql: string): Promise<void>;
  read(spec: ReadQuerySpec): Promise<ReadQueryResult>;
}
