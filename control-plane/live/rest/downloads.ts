/**
 * The `http-files` downloads of statements and listings: admitted, and shared while in flight.
 *
 * Admission: a statement (or listing) that has to download a file first takes a place in a fair
 * gate (../../demo/gate.ts): at most `capacity` of them hold one in the process and at most
 * `perOrg` for one organization, and waiting ones are served round-robin across organizations.
 * One still waiting when its signal aborts has fetched nothing and is answered as what stopped
 * it: the shutdown's 503 (also when the gate is closed at shutdown, ../index.ts), a revocation,
 * or at its deadline the caller's `busy` error. A place is held until every statement using what
 * it downloaded has its rows where it needs them (loaded into its engine, or its columns listed),
 * since the parsed rows are what stays in memory; so the bytes the file reads hold at once are
 * bounded by the places, not by the number of statements sent.
 *
 * Sharing: the same file wanted by several statements while it is being downloaded is downloaded
 * once; a statement that finds every file it needs in flight (when it comes, or while it waits
 * for a place) joins them without a place. Only
 * the same organization, registration of the credential (its version and secret), URL, format,
 * byte limit and row cap share a download, and only while it runs (what a finished one read is
 * never handed to a later statement). A shared download stops when no statement waits for it
 * any more; it keeps the deadline of the statement that started it (statements sent later have
 * later ones, so the first one started ends first).
 */
import { createHash } from 'node:crypto';
import { FairGate, GateError } from '../../demo/gate.js';
import type { ApiError } from '../../errors.js';
import { loadFile, type FileSpec, type LoadedFile } from './files.js';
import { abortAnswer, shutdownStop } from '../../query/errors.js';
import { timeoutError, type RequestPolicy } from './http.js';

/** The files one statement (or listing) reads, and how. */
export interface FileReads {
  readonly orgId: string;
  /** the credential's registration (CredentialFields.version) */
  readonly version: string | undefined;
  readonly secret: string;
  readonly files: readonly FileSpec[];
  readonly maxRows: number;
  /** the statement's requests: its signal, deadline and byte limit per file */
  readonly policy: RequestPolicy;
}

export interface Admitted {
  /** one per file, in order; rejects at once when the statement's signal aborts */
  readonly loaded: readonly Promise<LoadedFile>[];
  /** the statement no longer needs the rows (loaded, listed, or given up): call it when done (more calls do nothing) */
  done(): void;
}

/** A place in the gate, given back once nothing holds it (the statement, and what it started). */
class Place {
  private holds = 1;
  constructor(private readonly release: () => void) {}
  hold(): void {
    this.holds++;
  }
  drop(): void {
    if (--this.holds === 0) this.release();
  }
}

interface Flight {
  readonly key: string;
  readonly result: Promise<LoadedFile>;
  /** statements waiting for it or using its rows */
  users: number;
  /** stops the download once no statement waits for it */
  readonly stop: AbortController;
  settled: boolean;
  /** the place it was admitted with */
  readonly place: Place;
}

export class FileDownloads {
  private readonly gate: FairGate;
  /** downloads running, by {@link keyOf} */
  private readonly flights = new Map<string, Flight>();
  /** statements waiting for a place, told when a download starts */
  private readonly waiting = new Set<() => void>();

  constructor(capacity: number, perOrg: number) {
    this.gate = new FairGate(capacity, perOrg);
  }

  /**
   * The shutdown: statements waiting for a place are answered with its 503 at once, and none
   * waits for one after it (downloads running stop when their statements do).
   */
  close(): void {
    this.gate.close();
  }

  /** downloads running in the process (tests, metrics) */
  get running(): number {
    return this.flights.size;
  }

  /**
   * The statement's files: joined where already in flight, otherwise downloaded under a place
   * waited for until `r.policy.signal` aborts (then `busy()`).
   */
  async admit(r: FileReads, busy: () => ApiError): Promise<Admitted> {
    const keys = r.files.map((f) => keyOf(r, f));
    const inFlight = (): boolean => keys.every((k) => this.flights.has(k));
    let place: Place | undefined;
    while (!place && !inFlight()) {
      // waiting for a place ends early when what it would download starts meanwhile: it joins that
      const joinable = new AbortController();
      const watch = (): void => {
        if (inFlight()) joinable.abort();
      };
      this.waiting.add(watch);
      try {
        const signal = AbortSignal.any([r.policy.signal, joinable.signal]);
        place = new Place(await this.gate.acquire(r.orgId, Math.max(0, r.policy.deadline - Date.now()), { signal }));
      } catch (err) {
        if (joinable.signal.aborted && !r.policy.signal.aborted) continue;
        if (err instanceof GateError) throw gateAnswer(err, r.policy.signal, busy);
        throw err;
      } finally {
        this.waiting.delete(watch);
      }
    }
    let started = 0;
    const joined = r.files.map((f, i) => {
      const key = keys[i] as string;
      let flight = this.flights.get(key);
      if (!flight) {
        flight = this.start(key, r, f, place as Place);
        started++;
      }
      flight.users++;
      return flight;
    });
    if (place && started === 0) {
      // what it waited for started meanwhile: it joined those, and needs no place of its own
      place.drop();
      place = undefined;
    }
    let left = false;
    const done = (): void => {
      if (left) return;
      left = true;
      for (const f of joined) this.leave(f);
      place?.drop();
    };
    const loaded = joined.map((f) => untilAborted(f.result, r.policy.signal));
    for (const p of loaded) p.catch(() => undefined);
    return { loaded, done };
  }

  private start(key: string, r: FileReads, file: FileSpec, place: Place): Flight {
    place.hold();
    const stop = new AbortController();
    const policy: RequestPolicy = { ...r.policy, signal: stop.signal };
    const flight: Flight = { key, result: loadFile(file, r.secret, policy, r.maxRows), users: 0, stop, settled: false, place };
    this.flights.set(key, flight);
    for (const watch of [...this.waiting]) watch();
    const settle = (): void => {
      flight.settled = true;
      this.forget(flight);
    };
    flight.result.then(settle, settle);
    return flight;
  }

  private leave(f: Flight): void {
    if (--f.users > 0) return;
    // nobody waits for it any more: no later statement joins it, and a download still running stops
    this.forget(f);
    if (!f.settled) f.stop.abort();
    f.place.drop();
  }

  private forget(f: Flight): void {
    if (this.flights.get(f.key) === f) this.flights.delete(f.key);
  }
}

/**
 * A wait for a place that ended without one: the gate closed (the shutdown: its 503, not
 * charged), else what stopped `signal` (query/errors.ts abortAnswer: the shutdown, a revocation),
 * else `busy()` (its deadline came first).
 */
export function gateAnswer(err: GateError, signal: AbortSignal, busy: () => ApiError): ApiError {
  return err.code === 'GATE_ERR_CLOSED' ? shutdownStop() : abortAnswer(signal, busy);
}

/** Who may share a download: never across organizations, credentials, or different limits. */
function keyOf(r: FileReads, f: FileSpec): string {
  return createHash('sha256')
    .update(JSON.stringify([r.orgId, r.version ?? '', r.secret, f.url, f.format, r.policy.maxBytes, r.maxRows]))
    .digest('hex');
}

/** `p`, or as soon as `signal` aborts its answer (query/errors.ts abortAnswer: the shutdown's 503, else query_timeout). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortAnswer(signal, timeoutError));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortAnswer(signal, timeoutError));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
