/**
 * What both demo engines share (engine.ts, the embedded one; external.ts, SVC_DEMO_DATABASE_URL):
 * the query, its errors, the engine interface and options, fair admission through the gate and
 * the per-transaction preamble. Kept apart so that the two engines import it, not each other.
 */
import { createHash } from 'node:crypto';
import type { ReadQueryResult } from '../results/index.js';
import type { DatasetDef } from './types.js';
import { DEMO_READER_ROLE } from './load.js';
import { FairGate, GateError, type GateAdmissions } from './gate.js';

export interface DemoQuery {
  /** checked and rewritten statement */
  readonly sql: string;
  /** EXPLAIN statements run without a cursor */
  readonly direct: boolean;
  /** trusted SET LOCAL / set_config statements (e.g. row-security settings) */
  readonly settings: readonly string[];
  readonly timeoutMs: number;
  readonly maxRows: number;
  readonly maxBytes: number;
  /** the organization the statement runs for: the engines share themselves fairly between them */
  readonly tenant: string;
  /** aborted when the connection is revoked or expires: the statement is stopped at once */
  readonly signal?: AbortSignal;
  /** a free organization (it never funded a wallet): admitted in the free class, shared fairly per client address */
  readonly trial?: boolean;
  /** the caller's client address (trial work is shared per address, not per organization) */
  readonly address?: string;
  /** called once the statement has an engine (admitted by the gate, and its place across replicas taken), before it runs */
  readonly onStart?: () => void;
}

export class DemoQueryError extends Error {
  /**
   * TIMEOUT: ran past its deadline and was stopped; BUSY: no engine was free within the deadline
   * (it never ran); COOLDOWN: this organization's last statement was stopped at its deadline and
   * the engine it held is being replaced; UNAVAILABLE: the engine cannot be reached; SQL: the
   * engine rejected the statement. The demo backend maps them to API errors (query/errors.ts).
   */
  readonly code: 'DEMO_ERR_TIMEOUT' | 'DEMO_ERR_BUSY' | 'DEMO_ERR_COOLDOWN' | 'DEMO_ERR_SQL' | 'DEMO_ERR_UNAVAILABLE';
  /** SQL: the engine's SQLSTATE */
  readonly sqlState: string | undefined;
  /** seconds after which a retry can succeed (BUSY, COOLDOWN) */
  readonly retryAfter: number | undefined;
  constructor(
    code: DemoQueryError['code'],
    message: string,
    o: { sqlState?: string | undefined; retryAfter?: number } = {},
  ) {
    super(message);
    this.name = 'DemoQueryError';
    this.code = code;
    this.sqlState = o.sqlState;
    this.retryAfter = o.retryAfter;
  }
}

export interface DemoEngine {
  readonly kind: 'embedded' | 'postgres';
  run(q: DemoQuery): Promise<ReadQueryResult>;
  /** what the fair gate has admitted since start, by class */
  admissions(): GateAdmissions;
  /** statements running and waiting at the gate now */
  stats(): { running: number; waiting: number };
  /**
   * statements that reached their engine since start (their `onStart` moment: past the gate and,
   * on a shared store, past their place among the replicas), whatever became of them
   */
  started(): number;
  close(): Promise<void>;
}

/**
 * Whom a statement is shared (and held back) as: its organization, or for trial work its client
 * address (many free organizations from one address are one tenant of the trial share).
 */
export function tenantKey(q: DemoQuery): string {
  return q.trial ? `trial:${q.address ?? q.tenant}` : q.tenant;
}

/**
 * Size of a key space of places (advisory locks in the two-int4 form): a space is a range of
 * second keys starting at a multiple of this, 16 bits of the sender's digest times 64 places.
 */
export const PLACE_SPACE_SIZE = 1 << 22;

/** The digest of a sender's name (tenantKey) its places are keyed by (and a hold is named by, shares.ts). */
export function tenantDigest(tenant: string): Buffer {
  return createHash('sha256').update(tenant).digest();
}

/**
 * The advisory-lock keys of the places of the sender whose {@link tenantDigest} is `digest`, in
 * `space` (a multiple of {@link PLACE_SPACE_SIZE}): place `s` (0…63) is `(key1, key2 + s)`. 48
 * bits of the digest tell senders apart (32 in the first key, 16 in the second): two
 * organizations share places only if those 48 bits agree (about one chance in 56,000 among
 * 100,000 organizations; 32 bits alone gave about 1% among 10,000).
 */
export function placeKeys(digest: Buffer, space: number): { readonly key1: number; readonly key2: number } {
  return { key1: digest.readInt32BE(0), key2: space + digest.readUInt16BE(4) * 64 };
}

/** Run `work` once the fair gate admits the statement, within its deadline. */
export async function admitted<T>(gate: FairGate, q: DemoQuery, work: (deadline: number) => Promise<T>): Promise<T> {
  const deadline = Date.now() + q.timeoutMs;
  let leave: () => void;
  try {
    // trial work is one class, and keyed by client address: many free organizations from one
    // address are one tenant of the trial share
    leave = await gate.acquire(tenantKey(q), q.timeoutMs, { trial: q.trial === true, ...(q.signal ? { signal: q.signal } : {}) });
  } catch (err) {
    if (err instanceof GateError && err.code === 'GATE_ERR_TIMEOUT') {
      const whose = q.trial
        ? 'the engines free-trial statements may share are busy with other trial statements from this address or others'
        : "this organization's other statements hold its share of the engines";
      const why = `no demo engine became free before the statement's ${q.timeoutMs} ms deadline (${whose}); the statement was not run and nothing was charged: retry in a few seconds, or send fewer statements at once`;
      throw new DemoQueryError('DEMO_ERR_BUSY', why, { retryAfter: 2 });
    }
    throw new DemoQueryError('DEMO_ERR_UNAVAILABLE', 'the demo engine is shutting down');
  }
  try {
    q.onStart?.();
    return await work(deadline);
  } finally {
    leave();
  }
}

export function preamble(q: DemoQuery): string[] {
  return [
    `SET LOCAL ROLE ${DEMO_READER_ROLE}`,
    `SET LOCAL statement_timeout = ${Math.max(1, Math.floor(q.timeoutMs))}`,
    `SET LOCAL lock_timeout = ${Math.max(1, Math.floor(q.timeoutMs))}`,
    `SET LOCAL idle_in_transaction_session_timeout = ${Math.max(1000, Math.floor(q.timeoutMs) * 2)}`,
    'SET LOCAL search_path = pg_catalog',
    "SET LOCAL TimeZone = 'UTC'",
    // row-security quals defeat row estimates; a nested loop over a misestimated join can take
    // minutes where a hash join takes milliseconds (the demo tables are small)
    'SET LOCAL enable_nestloop = off',
    ...q.settings,
  ];
}

/** Half the engine at most for one organization, so others always find room. */
export function perTenant(capacity: number): number {
  return Math.max(1, Math.floor(capacity / 2));
}

export interface DemoEngineOptions {
  readonly demoDatabaseUrl: string | undefined;
  readonly dataDir: string;
  readonly workers: number;
  readonly datasets: readonly DatasetDef[];
  /** an already-built image (tests share one) */
  readonly image?: Uint8Array;
  /** told when a saved image is built again (an operator should know why a start takes long) */
  readonly warn?: (message: string) => void;
  /** told how generating the datasets goes on a first start (it takes several seconds) */
  readonly info?: (message: string, fields?: Readonly<Record<string, unknown>>) => void;
}
