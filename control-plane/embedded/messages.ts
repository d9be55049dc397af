/** Messages between the event-loop thread and an embedded PostgreSQL (PGlite) worker thread. */
import type { Row } from '../results/index.js';
import type { DataImage } from './image-fs.js';

export interface ReadQuerySpec {
  /** statements run first inside the read-only transaction (SET LOCAL …, set_config(…)); trusted */
  readonly preamble: readonly string[];
  /** the (already checked and rewritten) read statement */
  readonly sql: string;
  readonly maxRows: number;
  readonly maxBytes: number;
  /** EXPLAIN cannot run through a cursor */
  readonly direct: boolean;
}

export interface QueryResult {
  readonly rows: Row[];
}

/** a compiled `WebAssembly.Module` (sent to a thread, its compiled code is shared, not copied) */
export type EngineModule = object & { readonly __wasmModule?: never };

export type Request =
  | {
      readonly id: number;
      readonly op: 'init';
      /** PGlite's engine, compiled once by the host (embedded/index.ts) */
      readonly module: EngineModule;
      readonly dataDir?: string;
      readonly loadDataDir?: Uint8Array;
      /** a shared image to run on (copy on write; see image-fs.ts) */
      readonly image?: DataImage;
      /** server settings given at start (`-c name=value`), e.g. shared_buffers */
      readonly settings?: Readonly<Record<string, string>>;
      /** initdb options, when a new database is created */
      readonly initdb?: readonly string[];
    }
  | { readonly id: number; readonly op: 'query'; readonly sql: string; readonly params: readonly unknown[] }
  | { readonly id: number; readonly op: 'exec'; readonly sql: string }
  /** statements run one after another, each on its own (autocommit): one message for many */
  | { readonly id: number; readonly op: 'batch'; readonly items: readonly BatchItem[] }
  | { readonly id: number; readonly op: 'read'; readonly spec: ReadQuerySpec }
  | { readonly id: number; readonly op: 'dump' }
  /** bytes of image files this engine copied (see image-fs.ts) */
  | { readonly id: number; readonly op: 'owned' }
  /** import `module` (a file URL of our own code) in the worker and await `fn(db)` */
  | { readonly id: number; readonly op: 'run'; readonly module: string; readonly fn: string }
  | { readonly id: number; readonly op: 'close' };

export interface WorkerErrorInfo {
  readonly message: string;
  /** SQLSTATE when the database raised it */
  readonly code?: string;
  readonly position?: number;
}

/** One statement of a batch; `prepared`: kept prepared by the thread after its first run, by its text. */
export interface BatchItem {
  readonly sql: string;
  readonly params: readonly unknown[];
  readonly prepared?: boolean;
}

/** One statement's outcome in a batch. */
export type BatchItemResult = { readonly ok: true; readonly rows: Row[] } | { readonly ok: false; readonly error: WorkerErrorInfo };

export type Response =
  | { readonly id: number; readonly ok: true; readonly result: unknown }
  | { readonly id: number; readonly ok: false; readonly error: WorkerErrorInfo }
  /** news from a `run` still running (e.g. seeding's progress); its answer comes later */
  | { readonly id: number; readonly progress: unknown };
