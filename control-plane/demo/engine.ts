/**
 * Where demo queries run. Embedded: a pool of worker threads, all running on one image of the
 * demo database unpacked once into shared memory (each copies only the files it writes; see
 * embedded/image-fs.ts), so a slow query holds one worker and nobody else; a
 * statement past its deadline is stopped by terminating its worker (PGlite has no working
 * statement_timeout), which is then replaced. External (SVC_DEMO_DATABASE_URL, external.ts): a
 * `pg` pool, with statement_timeout enforced by the server.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { EmbeddedError, EmbeddedPostgres, IMAGE_INITDB, IMAGE_ONLY_POSTGRES, siblingModule, valueTooLargeToBuild } from '../embedded/index.js';
import { VALUE_TOO_DEEP_CODE, valueTooDeep, type ReadQueryResult } from '../results/index.js';
import { unpackImage, type DataImage } from '../embedded/image-fs.js';
import { imageFilePath, readImageFile, saveImageFile } from '../embedded/image-file.js';
import { ApiError } from '../errors.js';
import type { DatasetDef } from './types.js';
import type { SeedProgress } from './seed.js';
import { DEMO_READER_ROLE, demoFingerprint } from './load.js';
import { FairGate, type GateAdmissions } from './gate.js';
import { PostgresDemoEngine } from './external.js';
import type { DemoShares } from './shares.js';
import { admitted, DemoQueryError, perTenant, preamble, tenantKey, type DemoEngine, type DemoEngineOptions, type DemoQuery } from './query.js';

// ---------------------------------------------------------------------------------------------
// Embedded

/**
 * where the embedded demo image is kept under `dir`: named by the demo data and by what is dropped
 * from it (a saved image of another PGlite that no worker starts on is built again, see
 * startDemoEngine)
 */
export function demoImageFile(dir: string, datasets: readonly DatasetDef[]): string {
  const made = createHash('sha256').update(JSON.stringify({ data: demoFingerprint(datasets), image: IMAGE_ONLY_POSTGRES })).digest('hex').slice(0, 16);
  return imageFilePath(dir, 'demo', made);
}

/** A fresh embedded engine holding the demo datasets, seeded inside its own worker thread. */
async function seededEngine(progress?: (p: SeedProgress) => void): Promise<EmbeddedPostgres> {
  const engine = await EmbeddedPostgres.start({ initdb: IMAGE_INITDB });
  try {
    await engine.runModule(siblingModule('seed', import.meta.url), 'seed', progress ? (p) => progress(p as SeedProgress) : undefined);
  } catch (err) {
    await engine.terminate();
    throw err;
  }
  return engine;
}

/** Seed a fresh engine, dump it and save the image to `file` (best effort); returns the image. */
async function seededImage(file: string, progress?: (p: SeedProgress) => void): Promise<Uint8Array> {
  const engine = await seededEngine(progress);
  let image: Uint8Array;
  try {
    image = await engine.dump();
  } finally {
    await engine.close();
  }
  await saveImageFile(file, image).catch(() => undefined); // a read-only data dir only costs the next start its seeding
  return image;
}

/** Build (or reuse) the image of the demo database under `dir`; returns the gzip tarball. */
export async function embeddedDemoImage(dir: string, datasets: readonly DatasetDef[]): Promise<Uint8Array> {
  const file = demoImageFile(dir, datasets);
  return (await readImageFile(file)) ?? seededImage(file);
}

/**
 * A demo worker's server settings. Its data is in memory already (the shared image), so a large
 * buffer cache would only hold a second copy of it: 16 MB instead of PGlite's 128 MB saves about
 * 100 MB per worker.
 */
export const DEMO_WORKER_SETTINGS: Readonly<Record<string, string>> = { shared_buffers: '16MB' };

interface Slot {
  readonly engine: EmbeddedPostgres;
  busy: boolean;
  idleTimer?: NodeJS.Timeout;
}

interface SlotWaiter {
  resolve: (slot: Slot) => void;
  reject: (err: DemoQueryError) => void;
  timer: NodeJS.Timeout;
}

export interface EmbeddedPoolOptions {
  /** workers kept warm */
  readonly min: number;
  /** workers at most (extra ones start when all are busy, and retire when idle) */
  readonly max: number;
  readonly idleRetireMs?: number;
  /**
   * how long a sender whose statement cost a worker (deadline, out of memory) is held back when no
   * replacement worker is starting (while one is, until it is warm, up to six times as long)
   */
  readonly cooldownMs?: number;
  /** starts one worker on the image (tests slow it down to play a loaded machine) */
  readonly startWorker?: (image: DataImage) => Promise<EmbeddedPostgres>;
  /** replicas on one PostgreSQL store: each sender's share and hold kept across all of them (shares.ts) */
  readonly shares?: DemoShares | undefined;
}

export class EmbeddedDemoEngine implements DemoEngine {
  readonly kind = 'embedded' as const;
  private readonly slots: Slot[] = [];
  private readonly waiters: SlotWaiter[] = [];
  private starting = 0;
  /** statements that reached an engine since start (started()) */
  private startedCount = 0;
  private closed = false;
  /** every worker runs on this image, unpacked once and shared (each copies only what it writes) */
  private readonly image: Promise<DataImage>;
  private readonly options: Required<Omit<EmbeddedPoolOptions, 'shares'>>;
  private readonly shares: DemoShares | undefined;
  readonly gate: FairGate;

  private constructor(image: Promise<DataImage>, options: EmbeddedPoolOptions) {
    this.image = image;
    this.options = { idleRetireMs: 60_000, cooldownMs: 10_000, startWorker: (image) => EmbeddedPostgres.start({ image, settings: DEMO_WORKER_SETTINGS }), ...options };
    this.shares = options.shares;
    // an organization's share is half of the *warm* workers: the rest are free for others at once
    // trial work together holds at most half of the warm workers, so paying organizations always
    // find a warm one
    this.gate = new FairGate(options.max, perTenant(options.min), perTenant(options.min));
  }

  /** A pool whose workers all run on `image` (a gzip tarball from `dump()`), unpacked once here. */
  static async start(image: Uint8Array, options: EmbeddedPoolOptions): Promise<EmbeddedDemoEngine> {
    const pool = new EmbeddedDemoEngine(unpackImage(image), options);
    try {
      await Promise.all(Array.from({ length: Math.max(1, options.min) }, () => pool.spawn()));
    } catch (err) {
      await pool.close(); // workers that did start are not left behind
      throw err;
    }
    return pool;
  }

  /** number of live workers (for tests and metrics) */
  get size(): number {
    return this.slots.length;
  }

  private adopt(engine: EmbeddedPostgres): void {
    const slot: Slot = { engine, busy: false };
    this.slots.push(slot);
    if (this.slots.length >= this.options.min && this.cooldown.size > 0) {
      // replacements are warm again, here and for the other replicas
      this.cooldown.clear();
      void this.shares?.clear();
    }
    this.release(slot);
  }

  private async spawn(): Promise<void> {
    this.starting++;
    try {
      const engine = await this.options.startWorker(await this.image);
      if (this.closed) {
        await engine.terminate();
        return;
      }
      this.adopt(engine);
    } finally {
      this.starting--;
    }
  }

  private spawnInBackground(): void {
    this.spawn().catch(() => {
      // try again shortly while someone waits; otherwise the next demand starts one
      if (!this.closed && this.waiters.length > 0) setTimeout(() => this.topUp(), 1000).unref();
    });
  }

  /** Start workers while there are fewer than the minimum, or waiters and room to grow. */
  private topUp(): void {
    if (this.closed) return;
    const total = this.slots.length + this.starting;
    if (total < this.options.min || (this.waiters.length > 0 && total < this.options.max)) this.spawnInBackground();
  }

  private release(slot: Slot): void {
    const next = this.waiters.shift();
    if (next) {
      clearTimeout(next.timer);
      slot.busy = true;
      next.resolve(slot);
      return;
    }
    slot.busy = false;
    if (this.slots.length > this.options.min) {
      slot.idleTimer = setTimeout(() => {
        if (!slot.busy && this.slots.length > this.options.min) {
          this.remove(slot);
          slot.engine.close().catch(() => undefined);
        }
      }, this.options.idleRetireMs);
      slot.idleTimer.unref();
    }
  }

  private remove(slot: Slot): void {
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
    if (slot.idleTimer) clearTimeout(slot.idleTimer);
  }

  private acquireSlot(timeoutMs: number, deadlineMs: number): Promise<Slot> {
    // workers that died while idle are dropped (and replaced below)
    for (const dead of this.slots.filter((s) => !s.busy && !s.engine.alive)) this.remove(dead);
    const idle = this.slots.find((s) => !s.busy);
    if (idle) {
      idle.busy = true;
      if (idle.idleTimer) clearTimeout(idle.idleTimer);
      this.topUp();
      return Promise.resolve(idle);
    }
    const wait = new Promise<Slot>((resolve, reject) => {
      const waiter: SlotWaiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(
            new DemoQueryError(
              'DEMO_ERR_BUSY',
              `no demo engine became free before the statement's ${deadlineMs} ms deadline (a new one was still starting); the statement was not run and nothing was charged: retry in a few seconds`,
              { retryAfter: 2 },
            ),
          );
        }, Math.max(0, timeoutMs)),
      };
      this.waiters.push(waiter);
    });
    this.topUp();
    return wait;
  }

  async run(q: DemoQuery): Promise<ReadQueryResult> {
    const tenant = tenantKey(q);
    this.checkCooldown(tenant);
    // the statement has its engine once it has its place across the replicas too, not at the gate:
    // an agent that leaves while it waits for that place is not charged (nothing ran)
    const { onStart, ...gated } = q;
    return admitted(this.gate, gated, async (deadline) => {
      this.checkCooldown(tenant); // its earlier statement may have been stopped while this one waited
      // its place among every replica's statements of this sender (none to take on one replica alone)
      const places = q.trial ? Math.min(this.gate.perTenant, this.gate.trialCapacity) : this.gate.perTenant;
      const leave = await this.shares?.take(tenant, places, deadline, { timeoutMs: q.timeoutMs, signal: q.signal, holdRetryMs: this.options.cooldownMs });
      try {
        if (!q.signal?.aborted) {
          this.startedCount++;
          onStart?.();
        }
        return await this.runOn(await this.acquireSlot(deadline - Date.now(), q.timeoutMs), q, deadline);
      } finally {
        leave?.();
      }
    });
  }

  /** `tenant`'s statement cost a worker: held back here, and on every other replica (shares) */
  private async holdBack(tenant: string): Promise<void> {
    this.cooldown.set(tenant, Date.now());
    const shares = this.shares;
    if (!shares) return;
    const max = this.options.cooldownMs;
    // as checkCooldown: without a replacement starting, the hold ends after cooldownMs
    setTimeout(() => {
      if (this.starting === 0 && this.cooldown.has(tenant)) {
        this.cooldown.delete(tenant);
        void shares.clear(tenant);
      }
    }, max).unref();
    // before the answer: a retry through another replica must find it
    await shares.hold(tenant, 6 * max);
  }

  private checkCooldown(tenant: string): void {
    const since = this.cooldown.get(tenant);
    if (since === undefined) return;
    // it lasts until the replacement is warm (adopt() clears it); the bounds only matter when no
    // replacement comes: none is starting past cooldownMs, or it takes past six times that
    const age = Date.now() - since;
    const max = this.options.cooldownMs;
    if (age >= 6 * max || (age >= max && this.starting === 0)) {
      this.cooldown.delete(tenant);
      void this.shares?.clear(tenant);
      return;
    }
    const wait = Math.max(1, Math.ceil(Math.max(1000, max - age) / 1000));
    const whose = tenant.startsWith('trial:') ? 'a free-trial statement from this address' : "this organization's last statement";
    throw new DemoQueryError(
      'DEMO_ERR_COOLDOWN',
      `${whose} cost a demo engine its worker (it ran past its deadline, or needed more memory than the engine has) and the replacement is still starting; nothing was run or charged: retry in ${wait} s`,
      { retryAfter: wait },
    );
  }

  /**
   * Senders (tenantKey) whose statement cost a worker (stopped at its deadline, or out of memory), from when,
   * until its replacement is warm: they cannot take the remaining workers from everyone else
   * meanwhile (on a loaded machine a replacement can take longer than `cooldownMs` to start;
   * an organization let go then could stop the last warm worker too).
   */
  private readonly cooldown = new Map<string, number>();

  private async runOn(slot: Slot, q: DemoQuery, deadline: number): Promise<ReadQueryResult> {
    if (q.signal?.aborted) {
      // stopped while it waited for an engine: nothing to end, the warm worker goes back
      this.release(slot);
      throw new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the statement was stopped before it ran');
    }
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      // the only way to stop a running statement in PGlite: end its thread
      void slot.engine.terminate();
    }, Math.max(0, deadline - Date.now()));
    // revoked or expired: the same way to stop it, without the deadline's cooldown
    const onAbort = (): void => void slot.engine.terminate();
    if (q.signal?.aborted) onAbort();
    else q.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await slot.engine.read({ preamble: preamble(q), sql: q.sql, maxRows: q.maxRows, maxBytes: q.maxBytes, direct: q.direct });
    } catch (err) {
      if (timedOut) {
        await this.holdBack(tenantKey(q));
        throw new DemoQueryError('DEMO_ERR_TIMEOUT', `the statement ran past its ${q.timeoutMs} ms deadline and was cancelled`);
      }
      if (err instanceof EmbeddedError && valueTooLargeToBuild(err)) {
        // a value or row the engine cannot build (e.g. repeat('x', 600000000)); its WASM heap is
        // not trusted with the next query: the engine is replaced (finally, below), and like a
        // statement stopped at its deadline, its sender is held back until the replacement is warm
        await this.holdBack(tenantKey(q));
        await slot.engine.terminate();
        throw new ApiError(
          'invalid_sql',
          `the statement needs more memory than the demo engine has (${err.message}): a value or row too large to build; select fewer or shorter values (e.g. left(column, 1000))`,
          { sqlstate: err.sqlState, reason: 'out_of_memory' },
        );
      }
      if (err instanceof EmbeddedError && err.sqlState === VALUE_TOO_DEEP_CODE) throw valueTooDeep();
      if (err instanceof EmbeddedError && err.code === 'EMBEDDED_ERR_SQL') throw new DemoQueryError('DEMO_ERR_SQL', err.message, { sqlState: err.sqlState });
      throw new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the demo engine failed while running the statement');
    } finally {
      clearTimeout(timer);
      q.signal?.removeEventListener('abort', onAbort);
      if (slot.engine.alive) {
        this.release(slot);
      } else {
        this.remove(slot);
        this.topUp();
      }
    }
  }

  admissions(): GateAdmissions {
    return this.gate.admissions();
  }

  started(): number {
    return this.startedCount;
  }

  stats(): { running: number; waiting: number } {
    return this.gate.stats();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.gate.close();
    for (const w of this.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the demo engine is shutting down'));
    }
    await Promise.all(this.slots.splice(0).map((s) => (s.busy ? s.engine.terminate() : s.engine.close().catch(() => s.engine.terminate()))));
  }
}


/** Seeding's progress as log lines: each pack as it is loaded, then the final pass. */
function seedLog(info: NonNullable<DemoEngineOptions['info']>, started: number): (p: SeedProgress) => void {
  return (p) => {
    const ms = Date.now() - started;
    if (p.stage === 'pack') info(`demo pack ${p.pack} generated (${p.done} of ${p.of})`, { pack: p.pack, targets: p.targets, rows: p.rows, ms });
    else info('demo datasets generated; indexing and saving the image', { ms });
  };
}

/** the embedded engine's workers at most (under load), for `workers` kept warm */
export function demoWorkersMax(workers: number): number {
  return Math.max(workers * 2, workers + 1);
}

export async function startDemoEngine(o: DemoEngineOptions & { readonly shares?: DemoShares | undefined }): Promise<DemoEngine> {
  if (o.demoDatabaseUrl) {
    return PostgresDemoEngine.start(o.demoDatabaseUrl, o.datasets, undefined, o.info);
  }
  const pool = { min: o.workers, max: demoWorkersMax(o.workers), shares: o.shares };
  const file = demoImageFile(path.join(o.dataDir, 'demo'), o.datasets);
  const image = o.image ?? (await readImageFile(file));
  if (image) {
    try {
      return await EmbeddedDemoEngine.start(image, pool);
    } catch (err) {
      // a saved image that no worker can start on (damaged on disk, or made by another PostgreSQL
      // version) is built again; an image given by the caller is the caller's
      if (o.image) throw err;
      o.warn?.(`the saved demo image ${file} cannot be used (${(err as Error).message}); building it again (about half a minute)`);
      await fs.rm(file, { force: true }).catch(() => undefined);
    }
  }
  // first start: seed in a thread of its own, which ends (with the memory seeding took) before the
  // workers start on the image it left
  const started = Date.now();
  o.info?.(`generating the demo datasets (first start: usually 10 to 30 s; the API answers meanwhile, demo queries wait)`, { packs: new Set(o.datasets.map((d) => d.pack)).size, targets: o.datasets.length, image: file });
  const engine = await EmbeddedDemoEngine.start(await seededImage(file, o.info ? seedLog(o.info, started) : undefined), pool);
  o.info?.('demo datasets loaded and saved; later starts reuse them', { ms: Date.now() - started });
  return engine;
}
