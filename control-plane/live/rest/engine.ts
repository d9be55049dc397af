/**
 * Where a live API query's rows are loaded and its statement runs: embedded PostgreSQL (PGlite)
 * engines, each in its own worker thread (the existing host, ../../embedded), held by one query at
 * a time. A query gets an engine (started while its first pages are fetched), creates its tables
 * in a schema of its own with a random name, loads the rows page by page (`jsonb_to_recordset`
 * parses them inside the worker, off the event loop), runs the checked statement in a READ ONLY
 * transaction as a non-owner role that can read only that schema, with the row and byte caps,
 * then drops the schema before the engine serves anyone else. An engine that fails to drop it,
 * whose query is stopped while rows load or the statement runs (its deadline, a revocation, the
 * shutdown: the engine is terminated at once, and the query answered as what stopped it), or
 * that has served many queries is ended and replaced by a fresh one. Engines run on one empty image shared in memory (each holds only the files it
 * writes: the rows it loads, dropped with its schema); starting one still takes about a second,
 * which is why engines are reused; the data never is.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EmbeddedError, EmbeddedPostgres, IMAGE_INITDB, IMAGE_ONLY_POSTGRES, valueTooLargeToBuild } from '../../embedded/index.js';
import { VALUE_TOO_DEEP_CODE, valueTooDeep, type ReadQueryResult } from '../../results/index.js';
import { unpackImage, type DataImage } from '../../embedded/image-fs.js';
import { imageFilePath, readImageFile, saveImageFile } from '../../embedded/image-file.js';
import { ApiError } from '../../errors.js';
import { abortAnswer, shutdownStop, statementRejected } from '../../query/errors.js';
import { quoteIdent } from '../../query/sql/quote.js';
import type { SqlType } from './spec.js';
import { timeoutError } from './http.js';

export const LIVE_READER_ROLE = 'svc_live_reader';
/** an engine is replaced after this many queries (bounds what a long-lived WASM heap accumulates) */
const MAX_USES = 200;
/**
 * An engine that loaded more than this for one query is ended, not reused: a WASM heap never gives
 * memory back, so one query loading hundreds of MB kept the process gigabytes larger.
 */
export const HEAVY_LOAD_BYTES = 16 * 1024 * 1024;
const IDLE_RETIRE_MS = 120_000;
/**
 * A small buffer cache: the loaded rows are in memory already (see DEMO_WORKER_SETTINGS). WAL files
 * are removed, not kept for reuse, at a checkpoint.
 */
const REST_ENGINE_SETTINGS: Readonly<Record<string, string>> = { shared_buffers: '16MB', wal_recycle: 'off' };
/**
 * After a query's tables are dropped, its WAL is checkpointed away once past this (an embedded
 * PostgreSQL never checkpoints on its own, so each query's WAL would stay in memory for the
 * engine's life); small queries skip the checkpoint.
 */
const CHECKPOINT_WAL_BYTES = 1024 * 1024;

export interface LoadColumn {
  readonly name: string;
  readonly type: SqlType;
}

interface Engine {
  readonly db: EmbeddedPostgres;
  uses: number;
  idleTimer?: NodeJS.Timeout;
}

/** how the empty engine is made: a change to it (or to PGlite) makes a new saved image */
const TEMPLATE_SETUP: readonly string[] = [
  `SET wal_recycle = off; CREATE ROLE ${LIVE_READER_ROLE} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE; REVOKE ALL ON SCHEMA public FROM PUBLIC;`,
  ...IMAGE_ONLY_POSTGRES,
  'CHECKPOINT',
];

/** the installed PGlite's version (its package.json, found above its entry point; it exports no `./package.json`) */
function pgliteVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.resolve('@electric-sql/pglite')));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === '@electric-sql/pglite' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not this folder
    }
    const up = path.dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
}

function templateFingerprint(): string {
  return createHash('sha256').update(JSON.stringify({ pglite: pgliteVersion(), initdb: IMAGE_INITDB, setup: TEMPLATE_SETUP })).digest('hex').slice(0, 16);
}

/** what TEMPLATE_SETUP made, checked on the first engine started on a saved image */
const TEMPLATE_CHECK = `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = '${LIVE_READER_ROLE}') AND NOT has_schema_privilege('public', 'public', 'USAGE') AND (SELECT count(*) FROM pg_database) = 1 AS ok`;

interface Template {
  readonly image: DataImage;
  /** the file it was read from (a saved image), when it was */
  readonly savedIn?: string;
  /** an engine started on it and found its setup (TEMPLATE_CHECK): a later failure to start is not the image's */
  proven?: boolean;
}

/**
 * The empty engine every query engine starts from (its reader role made, `public` closed), once
 * per process (a cache of immutable data, shared by every pool: it holds no state of any app) and
 * unpacked once: every engine runs on it in place. Engines stay in memory: the data they fetch
 * never goes to disk. With a data directory it is kept there (`engines/rest-<fingerprint>.tar.gz`)
 * and read back after a restart: creating it runs initdb in a thread of its own, which leaves
 * memory with the process (docs/benchmarks.md, "Memory of the default start").
 */
let template: Promise<Template> | undefined;
/** a warning for the operator (the app's logger) */
type Warn = (message: string) => void;

/** `fresh`: made by initdb, not read from the saved file (which no engine could use) */
function engineTemplate(dataDir: string | undefined, fresh = false, warn?: Warn): Promise<Template> {
  template ??= (async (): Promise<Template> => {
    const file = dataDir === undefined ? undefined : imageFilePath(path.join(dataDir, 'engines'), 'rest', templateFingerprint());
    const saved = file === undefined || fresh ? undefined : await readImageFile(file);
    if (file !== undefined && saved !== undefined) {
      let reason = '';
      const image = await unpackImage(saved).catch((err: unknown) => void (reason = (err as Error).message));
      if (image) return { image, savedIn: file };
      warn?.(`the saved empty engine of the API and file targets ${file} cannot be read (${reason}); making it again (a few seconds)`);
      await fs.rm(file, { force: true }).catch(() => undefined); // damaged: made again below
    }
    const db = await EmbeddedPostgres.start({ initdb: IMAGE_INITDB });
    let bytes: Uint8Array;
    try {
      for (const stmt of TEMPLATE_SETUP) await db.exec(stmt);
      bytes = await db.dump();
    } finally {
      await db.terminate();
    }
    if (file !== undefined) await saveImageFile(file, bytes).catch(() => undefined); // a read-only data dir only costs the next start the initdb
    return { image: await unpackImage(bytes) };
  })().catch((err: unknown) => {
    template = undefined;
    throw err;
  });
  return template;
}

/** `fresh`: the retry after a saved image no engine could use (there is never a second) */
async function startEngine(dataDir: string | undefined, fresh = false, warn?: Warn): Promise<Engine> {
  const made = engineTemplate(dataDir, fresh, warn);
  const t = await made;
  let db: EmbeddedPostgres | undefined;
  try {
    db = await EmbeddedPostgres.start({ image: t.image, settings: REST_ENGINE_SETTINGS });
    if (t.savedIn !== undefined && !t.proven && (await db.query(TEMPLATE_CHECK))[0]?.['ok'] !== true) throw new Error(`${t.savedIn} holds another database than the empty engine`);
    t.proven = true;
    return { db, uses: 0 };
  } catch (err) {
    void db?.terminate();
    // only a saved image no engine has started on is suspected: a failure once one has (memory
    // ran out, say) is not the image's, and keeps the file
    if (t.savedIn === undefined || t.proven === true || fresh) throw err;
    // a saved image no engine starts on, or not made by TEMPLATE_SETUP (damaged on disk, another
    // file), is made again by initdb and saved over it, and not read again in this process (a data
    // dir that cannot be written keeps the file). Nothing is awaited between the reset and the
    // next template: concurrent callers (and new ones) all get that one.
    warn?.(`no engine of the API and file targets starts on the saved image ${t.savedIn} (${(err as Error).message}); making it again (a few seconds)`);
    if (template === made) template = undefined;
    return startEngine(dataDir, true, warn);
  }
}

/**
 * A bounded pool of engines; a wait for one ends at the query's signal. One per app
 * (control-plane/app.ts makes it, the REST connectors share it, the app closes it at shutdown).
 */
export class EnginePool {
  private readonly idle: Engine[] = [];
  private readonly waiters: ((e: Engine | null) => void)[] = [];
  private total = 0;
  /** engines being started (each will serve the longest waiter) */
  private starting = 0;
  private closed = false;
  /**
   * @param max engines at a time (SVC_LIVE_REST_ENGINES)
   * @param dataDir where the empty engine's image is kept between starts (SVC_DATA_DIR; none: made in memory each start)
   * @param warn told when a saved image cannot be used and is made again
   */
  constructor(
    readonly max: number,
    private readonly dataDir?: string,
    private readonly warn?: Warn,
  ) {}

  /** engines idle, ready for the next query (tests, metrics) */
  get idleCount(): number {
    return this.idle.length;
  }

  /** start one engine ahead of the first query (nothing happens when one exists) */
  warm(): Promise<void> {
    return this.total > 0 ? Promise.resolve() : this.spawn();
  }

  private spawn(): Promise<void> {
    this.total++;
    this.starting++;
    return startEngine(this.dataDir, false, this.warn).then(
      (e) => {
        this.starting--;
        this.put(e);
      },
      () => {
        this.starting--;
        this.total--;
        this.waiters.shift()?.(null);
      },
    );
  }

  async take(signal: AbortSignal): Promise<Engine> {
    if (this.closed) throw shutdownStop();
    const idle = this.idle.pop();
    if (idle) {
      clearTimeout(idle.idleTimer);
      return idle;
    }
    // a new engine only when those already starting are spoken for (starting one costs an initdb)
    if (this.total < this.max && this.waiters.length >= this.starting) void this.spawn();
    const got = await new Promise<Engine | null>((resolve, reject) => {
      const onAbort = (): void => {
        const i = this.waiters.indexOf(give);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(abortAnswer(signal, timeoutError));
      };
      const give = (e: Engine | null): void => {
        signal.removeEventListener('abort', onAbort);
        resolve(e);
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(give);
    });
    if (!got) throw this.closed ? shutdownStop() : new ApiError('service_unavailable', 'the embedded engine for live queries could not start; retry shortly', { reason: 'engine_unavailable' });
    return got;
  }

  /** hand a clean engine to the next waiter, or keep it idle */
  private put(e: Engine): void {
    if (this.closed) {
      this.discard(e);
      return;
    }
    const next = this.waiters.shift();
    if (next) return next(e);
    e.idleTimer = setTimeout(() => {
      const i = this.idle.indexOf(e);
      if (i >= 0 && this.idle.length > 1) {
        this.idle.splice(i, 1);
        this.discard(e);
      }
    }, IDLE_RETIRE_MS);
    e.idleTimer.unref();
    this.idle.push(e);
  }

  give(e: Engine, clean: boolean): void {
    e.uses++;
    if (clean && e.uses < MAX_USES) return this.put(e);
    this.discard(e);
    // keep capacity for whoever waits
    if (this.waiters.length > this.starting && !this.closed) void this.spawn();
  }

  private discard(e: Engine): void {
    clearTimeout(e.idleTimer);
    this.total--;
    void e.db.terminate();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w(null);
    await Promise.all(this.idle.splice(0).map(async (e) => this.discard(e)));
  }
}

/** A query engine that ended under a statement with nothing stopping it (not its deadline: not charged). */
function engineStopped(): ApiError {
  return new ApiError('service_unavailable', 'the query engine stopped unexpectedly; retry', { reason: 'engine_unavailable' });
}

/** A physical schema name for one query's tables (random: no query can name another's). */
export function querySchema(): string {
  return `q_${randomBytes(12).toString('hex')}`;
}

/** One query's tables on a pooled engine: create, add rows, run the statement, drop. */
export class QueryDatabase {
  private dirty = false;
  private failed = false;
  /** JSON bytes of rows loaded */
  private loaded = 0;

  private constructor(
    private readonly pool: EnginePool,
    private readonly engine: Engine,
    /** physical schema of this query's tables ({@link querySchema}) */
    readonly schema: string,
    /** the statement's: its deadline, revocation, the shutdown; a load still running then is stopped */
    private readonly signal: AbortSignal,
  ) {}

  static async open(pool: EnginePool, signal: AbortSignal, schema: string): Promise<QueryDatabase> {
    const engine = await pool.take(signal);
    return new QueryDatabase(pool, engine, schema, signal);
  }

  async createTable(table: string, columns: readonly LoadColumn[]): Promise<void> {
    const s = quoteIdent(this.schema);
    const cols = columns.map((c) => `${quoteIdent(c.name)} ${c.type}`).join(', ');
    this.dirty = true;
    await this.load(() =>
      this.engine.db.exec(
        `CREATE SCHEMA IF NOT EXISTS ${s}; GRANT USAGE ON SCHEMA ${s} TO ${LIVE_READER_ROLE}; ` +
          `CREATE TABLE ${s}.${quoteIdent(table)} (${cols}); GRANT SELECT ON ${s}.${quoteIdent(table)} TO ${LIVE_READER_ROLE};`,
      ),
    );
  }

  /** rows are objects keyed by column name, values already normalized (./values.ts) */
  async insert(table: string, columns: readonly LoadColumn[], rows: readonly Record<string, unknown>[]): Promise<void> {
    if (rows.length === 0 || columns.length === 0) return;
    const defs = columns.map((c) => `${quoteIdent(c.name)} ${c.type}`).join(', ');
    const sql = `INSERT INTO ${quoteIdent(this.schema)}.${quoteIdent(table)} SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(${defs})`;
    const json = JSON.stringify(rows);
    this.loaded += json.length;
    await this.load(() => this.engine.db.query(sql, [json]));
  }

  /**
   * Tables made and rows loaded, stopped as the statement's read is: at the signal the engine is
   * terminated (never reused) and the load answers what stopped it (query/errors.ts abortAnswer:
   * the shutdown's 503, not charged; a revocation; else the deadline's query_timeout).
   */
  private async load(work: () => Promise<unknown>): Promise<void> {
    const signal = this.signal;
    if (signal.aborted) throw abortAnswer(signal, timeoutError);
    const onAbort = (): void => {
      this.failed = true;
      void this.engine.db.terminate();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await work();
    } catch (err) {
      this.failed = true;
      if (signal.aborted) throw abortAnswer(signal, timeoutError);
      if (err instanceof EmbeddedError && err.code === 'EMBEDDED_ERR_TERMINATED') throw engineStopped();
      throw new ApiError('internal_error', 'loading the fetched rows into the query engine failed', { reason: 'load_failed' });
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** The checked statement, read-only, as the reader role, capped; the engine is terminated at the signal. */
  async read(sql: string, direct: boolean, maxRows: number, maxBytes: number, signal: AbortSignal): Promise<ReadQueryResult> {
    if (signal.aborted) throw abortAnswer(signal, timeoutError);
    const onAbort = (): void => {
      this.failed = true;
      void this.engine.db.terminate();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await this.engine.db.read({
        preamble: [`SET LOCAL ROLE ${LIVE_READER_ROLE}`, 'SET LOCAL search_path = pg_catalog', "SET LOCAL TimeZone = 'UTC'"],
        sql,
        maxRows,
        maxBytes,
        direct,
      });
    } catch (err) {
      if (signal.aborted) throw abortAnswer(signal, timeoutError);
      if (err instanceof EmbeddedError && err.code === 'EMBEDDED_ERR_TERMINATED') {
        this.failed = true;
        throw engineStopped();
      }
      if (err instanceof EmbeddedError) {
        if (err.sqlState === VALUE_TOO_DEEP_CODE) throw valueTooDeep();
        if (valueTooLargeToBuild(err)) {
          this.failed = true; // a WASM heap that ran out is not trusted with the next query
          // the engine could not build a value or row (e.g. repeat('x', 600000000)): the engine is
          // fine, the statement asks for too much; nothing of it reached the control plane
          throw new ApiError(
            'invalid_sql',
            `the statement needs more memory than the query engine has (${err.message}): a value or row too large to build; select fewer or shorter values (e.g. left(column, 1000))`,
            { sqlstate: err.sqlState, reason: 'out_of_memory' },
          );
        }
        throw statementRejected('the database', err.message, { sqlstate: err.sqlState });
      }
      throw err;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Drop this query's tables and return the engine (or end it when that is not certain to be clean). */
  async close(): Promise<void> {
    let clean = !this.failed && this.engine.db.alive && this.loaded <= HEAVY_LOAD_BYTES;
    if (clean && this.dirty) {
      try {
        await this.engine.db.exec(`DROP SCHEMA IF EXISTS ${quoteIdent(this.schema)} CASCADE`);
        await this.engine.db.checkpointPast(CHECKPOINT_WAL_BYTES);
      } catch {
        clean = false;
      }
    }
    this.pool.give(this.engine, clean);
  }
}
