/**
 * Worker thread hosting one embedded PostgreSQL (PGlite). PGlite executes synchronously on its
 * thread, so it never runs on the event loop; the host (./index.ts) talks to it by messages.
 */
import { parentPort } from 'node:worker_threads';
import { messages as wire, PGlite, parse as results, protocol, type PGliteOptions } from '@electric-sql/pglite';
import { ImageFs } from './image-fs.js';
import { collectRows, FETCH_BATCH, firstFetch, isValueTooDeep, VALUE_TOO_DEEP_CODE, type Batch, type ReadQueryResult, type Row } from '../results/index.js';
import type { BatchItem, BatchItemResult, ReadQuerySpec, Request, Response, WorkerErrorInfo } from './messages.js';

if (!parentPort) throw new Error('embedded/worker.ts must run in a worker thread');
const port = parentPort;
let db: PGlite | undefined;
/** the filesystem when the engine runs on a shared image */
let imageFs: ImageFs | undefined;


/**
 * One message to the engine (one entry into it), its answers parsed, errors and notices among them.
 * Not `execProtocolRaw`: that one also parses every answer into the engine's record of its current
 * query, which only its own `query()`/`exec()` clear, so every row read that way stayed in this
 * thread's memory until the next of those (an engine that only reads and batches never clears it).
 */
function send(pg: PGlite, message: Uint8Array): Promise<wire.BackendMessage[]> {
  return pg.execProtocolStream(message, { syncToFs: false, throwOnError: false });
}

function database(): PGlite {
  if (!db) throw new Error('embedded engine not initialised');
  return db;
}

function errorInfo(err: unknown): WorkerErrorInfo {
  // a value nested too deeply to answer (results/rows.ts jsonRow): the host answers it again
  if (isValueTooDeep(err)) return { message: err.message, code: VALUE_TOO_DEEP_CODE };
  const e = err as { message?: unknown; code?: unknown; position?: unknown };
  const info: { message: string; code?: string; position?: number } = {
    // the filesystem layer throws plain objects ({errno, code}), not Errors
    message: typeof e?.message === 'string' ? e.message : typeof (err as { code?: unknown })?.code === 'string' ? `filesystem error ${(err as { code: string }).code}` : String(err),
  };
  if (typeof e?.code === 'string') info.code = e.code;
  if (typeof e?.position === 'string' && /^\d+$/.test(e.position)) info.position = Number(e.position);
  return info;
}

/**
 * One agent statement in a read-only transaction. PGlite's `exec()` enters the engine twice and
 * its `query()` six times; here the transaction, its settings (the preamble is ours: settings with
 * quoted literals, never the agent's text), the cursor and its first rows go as one message, and
 * each further fetch as one: two entries for most statements instead of sixteen. The statement
 * itself goes through the extended protocol, which runs exactly one statement.
 */
async function read(spec: ReadQuerySpec): Promise<ReadQueryResult> {
  const pg = database();
  const s = protocol.serialize;
  const begin = s.query(['BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY', ...spec.preamble].join(';\n'));
  try {
    const caps = { maxRows: spec.maxRows, maxBytes: spec.maxBytes, once: spec.direct };
    if (spec.direct) {
      const all = await extended(pg, [begin], spec.sql);
      return await collectRows(() => Promise.resolve(all), caps);
    }
    const ask = firstFetch(spec.maxRows);
    let ahead: Batch | undefined = await extended(pg, [begin, s.parse({ text: `DECLARE svc_cursor NO SCROLL CURSOR FOR ${spec.sql}` }), s.bind({}), s.execute({})], `FETCH ${ask} FROM svc_cursor`);
    return await collectRows((n) => {
      const first = ahead;
      ahead = undefined;
      if (!first) return extended(pg, [], `FETCH ${Math.min(n, FETCH_BATCH)} FROM svc_cursor`);
      // the rows fetched ahead are the cursor's first: a first ask of another size would lose them
      if (n !== ask) return Promise.reject(new Error(`embedded read: the first fetch asked ${n} rows, ${ask} were fetched ahead (results/rows.ts firstFetch)`));
      return Promise.resolve(first);
    }, caps);
  } finally {
    await send(pg, s.query('ROLLBACK'));
  }
}

/**
 * `before` (messages answered first: the transaction, the cursor), then `sql` through the
 * extended protocol, all rows, as one message ending in a sync; the rows of `sql`, parsed by the
 * engine's own type parsers as `query()` parses them, or the first error of any of it, thrown.
 */
async function extended(pg: PGlite, before: readonly Uint8Array[], sql: string): Promise<Batch> {
  const s = protocol.serialize;
  const messages = await send(pg, Buffer.concat([...before, s.parse({ text: sql }), s.bind({}), s.describe({ type: 'P' }), s.execute({}), s.sync()]));
  const error = messages.find((m): m is wire.DatabaseError => m instanceof wire.DatabaseError);
  if (error) throw error;
  const sets = results.parseResults(messages, pg.parsers, { rowMode: 'array' });
  const last = sets[sets.length - 1];
  return { fields: last?.fields ?? [], rows: (last?.rows ?? []) as unknown[][] };
}

/**
 * Parameters as text, as node-postgres sends them (`String(value)`: a boolean is `true` or
 * `false`), the server inferring their types from the statement as it does for PGlite's `query()`;
 * undefined when one is of another kind (a Date, an array, an object, bytes), which `query()`
 * serializes by its type. For every type `query()` reads such a value as the same text, but for
 * three it reads by the parameter's type, where this reads it as node-postgres (so the
 * PostgreSQL store) does: a number for a date or timestamp parameter (`query()`: milliseconds
 * since 1970), a bigint or a non-finite number for a json one (`query()`: a JSON string, `null`).
 * A string `query()` refuses for a bytea or boolean parameter is read by PostgreSQL here.
 */
function textParams(params: readonly unknown[]): (string | null)[] | undefined {
  const out: (string | null)[] = [];
  for (const p of params) {
    if (p === null || p === undefined) out.push(null);
    else if (typeof p === 'string') out.push(p);
    else if (typeof p === 'number' || typeof p === 'bigint' || typeof p === 'boolean') out.push(String(p));
    else return undefined;
  }
  return out;
}

/**
 * Statements kept prepared in this engine's session, by text (`BatchItem.prepared`: the query
 * path's reservation and settlement, sent for every query): parsing and planning the outer
 * statement was about a third of the engine's time for each. Named here, at most
 * {@link PREPARED_MAX}; a name is marked prepared once a statement ran under it without error.
 */
const preparedNames = new Map<string, string>();
const preparedReady = new Set<string>();
const PREPARED_MAX = 32;

function preparedName(sql: string): string | undefined {
  let name = preparedNames.get(sql);
  if (name === undefined && preparedNames.size < PREPARED_MAX) preparedNames.set(sql, (name = `svc_prepared_${preparedNames.size + 1}`));
  return name;
}

/**
 * Statements run one after another, each on its own (autocommit), each answering or failing alone.
 * PGlite's `query()` enters the engine six times per statement (parse, describe, bind, describe,
 * execute, sync); statements whose parameters are all text, numbers, booleans or null go together
 * as one extended-protocol message instead (parse, bind, describe, execute, sync for each: the
 * sync after each ends its implicit transaction, and an error skips only to it), whose answers
 * are parsed with the engine's own type parsers, as `query()` does.
 */
async function batch(items: readonly BatchItem[]): Promise<BatchItemResult[]> {
  const pg = database();
  const out: BatchItemResult[] = [];
  let i = 0;
  while (i < items.length) {
    const group: Grouped[] = [];
    for (let values; i < items.length && (values = textParams((items[i] as BatchItem).params)); i++) {
      const item = items[i] as BatchItem;
      const name = item.prepared ? preparedName(item.sql) : undefined;
      group.push({ sql: item.sql, values, ...(name ? { name } : {}) });
    }
    if (group.length > 0) {
      out.push(...(await together(pg, group)));
      continue;
    }
    out.push(await alone(pg, items[i++] as BatchItem));
  }
  return out;
}

/** A statement of a batch whose parameters are all text; `name`: the one it is kept prepared under. */
type Grouped = { readonly sql: string; readonly values: (string | null)[]; readonly name?: string };

/** One statement through PGlite's `query()`. */
async function alone(pg: PGlite, item: BatchItem): Promise<BatchItemResult> {
  try {
    return { ok: true, rows: (await pg.query(item.sql, item.params as unknown[])).rows as Row[] };
  } catch (err) {
    return { ok: false, error: errorInfo(err) };
  }
}

/**
 * Never throws once the message is sent: the host sends the statements of a failed batch again one
 * by one, so a failure here after some ran would run them twice. What cannot be read fails its
 * statement alone, as its `query()` would have, after it ran; an engine that fails mid-message
 * fails every statement of it (which of them ran is unknown).
 */
async function together(pg: PGlite, group: readonly Grouped[]): Promise<BatchItemResult[]> {
  const s = protocol.serialize;
  let message: Uint8Array;
  try {
    const parts: Uint8Array[] = [];
    for (const g of group) {
      if (g.name === undefined) parts.push(s.parse({ text: g.sql }), s.bind({ values: g.values }));
      else if (preparedReady.has(g.name)) parts.push(s.bind({ statement: g.name, values: g.values }));
      // closing a name that is not prepared is no error: a statement that failed may have left it
      else parts.push(s.close({ type: 'S', name: g.name }), s.parse({ text: g.sql, name: g.name }), s.bind({ statement: g.name, values: g.values }));
      parts.push(s.describe({ type: 'P' }), s.execute({}), s.sync());
    }
    message = Buffer.concat(parts);
  } catch {
    // not sent (too large together): each alone, one after another
    const out: BatchItemResult[] = [];
    for (const g of group) out.push(await alone(pg, { sql: g.sql, params: g.values }));
    return out;
  }
  // each statement's messages end with its ReadyForQuery
  const answers: wire.BackendMessage[][] = [[]];
  let synced: WorkerErrorInfo | undefined;
  try {
    for (const m of await send(pg, message)) {
      if (m.name === 'readyForQuery') answers.push([]);
      else (answers[answers.length - 1] as wire.BackendMessage[]).push(m);
    }
  } catch (err) {
    // which statements ran, and so which names are prepared, is unknown: each is prepared again
    preparedReady.clear();
    const error = errorInfo(err);
    return group.map(() => ({ ok: false, error }));
  }
  try {
    await pg.syncToFs();
  } catch (err) {
    // ran, not written out: each fails, as its query() would have
    synced = errorInfo(err);
  }
  const out: BatchItemResult[] = [];
  for (const [k, g] of group.entries()) {
    const messages = answers[k] ?? [];
    const error = messages.find((m): m is wire.DatabaseError => m instanceof wire.DatabaseError);
    if (g.name !== undefined) {
      if (error || k >= answers.length - 1) preparedReady.delete(g.name);
      else preparedReady.add(g.name);
      // the prepared statement was gone (DEALLOCATE) or its plan no longer fits (a function
      // recreated with other columns): it did not run, so it runs now, unprepared (prepared
      // again next time)
      if (error && notPreparedAnyMore(error)) {
        out.push(await alone(pg, { sql: g.sql, params: g.values }));
        continue;
      }
    }
    out.push(answerOf(pg, messages, error, k >= answers.length - 1, synced));
  }
  return out;
}

/** what a statement of a batch answers: its rows, or why not */
function answerOf(pg: PGlite, messages: wire.BackendMessage[], error: wire.DatabaseError | undefined, unanswered: boolean, synced: WorkerErrorInfo | undefined): BatchItemResult {
  if (error) return { ok: false, error: errorInfo(error) };
  if (unanswered) return { ok: false, error: { message: 'the engine gave no answer to this statement' } };
  if (synced) return { ok: false, error: synced };
  try {
    return { ok: true, rows: (results.parseResults(messages, pg.parsers)[0]?.rows ?? []) as Row[] };
  } catch (err) {
    return { ok: false, error: errorInfo(err) };
  }
}

/** a prepared statement's error that means it was not run: no such statement, or its plan's columns changed */
function notPreparedAnyMore(error: wire.DatabaseError): boolean {
  return error.code === '26000' || (error.code === '0A000' && /cached plan must not change result type/.test(error.message));
}

/** the last log lines of a starting server kept for its failure's message */
const START_LOG_LINES = 200;

/**
 * A start's failure with the reasons the server logged (`PANIC:`, `FATAL:` and `ERROR:` lines and
 * their `DETAIL:`: a damaged or missing WAL, control file or catalog), so a store that cannot
 * open says why.
 */
function withServerReason(err: unknown, said: readonly string[]): unknown {
  const reasons = said.flatMap((l) => /\b(?:PANIC|FATAL|ERROR|DETAIL):\s+(.*)/.exec(l)?.[1]?.trim() ?? []);
  if (reasons.length === 0) return err;
  const info = errorInfo(err);
  return new Error(`PostgreSQL: ${[...new Set(reasons)].slice(-4).join('; ')} (${info.message})`);
}

async function handle(msg: Request): Promise<unknown> {
  switch (msg.op) {
    case 'init': {
      const options: PGliteOptions = { pgliteWasmModule: msg.module as PGliteOptions['pgliteWasmModule'] };
      if (msg.loadDataDir) options.loadDataDir = new Blob([msg.loadDataDir]);
      if (msg.image) options.fs = imageFs = new ImageFs(msg.image);
      if (msg.initdb) options.initDbStartParams = [...msg.initdb];
      if (msg.settings) options.startParams = [...PGlite.defaultStartParams, ...Object.entries(msg.settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
      // what the server logs while it starts: when it cannot start, its reason (the engine itself
      // only says `Aborted()`)
      const said: string[] = [];
      let starting = true;
      options.onStderr = (line) => {
        if (starting && said.push(line) > START_LOG_LINES) said.shift();
        return false;
      };
      try {
        db = msg.dataDir ? await PGlite.create(msg.dataDir, options) : await PGlite.create(options);
      } catch (err) {
        throw withServerReason(err, said);
      } finally {
        starting = false;
      }
      return null;
    }
    case 'query': {
      const res = await database().query(msg.sql, msg.params as unknown[]);
      return { rows: res.rows };
    }
    case 'exec':
      await database().exec(msg.sql);
      return null;
    case 'batch':
      return batch(msg.items);
    case 'read':
      return read(msg.spec);
    case 'run': {
      const mod = (await import(msg.module)) as Record<string, unknown>;
      const fn = mod[msg.fn];
      if (typeof fn !== 'function') throw new Error(`${msg.module} has no function ${msg.fn}`);
      const progress = (p: unknown): void => port.postMessage({ id: msg.id, progress: p } satisfies Response);
      await (fn as (db: PGlite, progress: (p: unknown) => void) => Promise<unknown>)(database(), progress);
      return null;
    }
    case 'owned':
      return imageFs?.ownBytes() ?? 0;
    case 'dump': {
      const blob = await database().dumpDataDir('gzip');
      return new Uint8Array(await blob.arrayBuffer());
    }
    case 'close':
      if (db && !db.closed) await db.close();
      db = undefined;
      return null;
  }
}

port.on('message', (msg: Request) => {
  handle(msg).then(
    (result) => port.postMessage({ id: msg.id, ok: true, result } satisfies Response),
    (err: unknown) => port.postMessage({ id: msg.id, ok: false, error: errorInfo(err) } satisfies Response),
  );
});
