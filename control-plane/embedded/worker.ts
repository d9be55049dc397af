/**
 * Worker thread hosting one embedded PostgreSQL (PGlite). PGlite executes synchronously on its
 * thread, so it never runs on the event loop; the host (./index.ts) talks to it by messages.
 */
import { parentPort } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import type { ColumnInfo, ReadQueryResult, ReadQuerySpec, Request, Response, WorkerErrorInfo } from './messages.js';
import { RowCollector, uniqueColumnNames } from './result-rows.js';

if (!parentPort) throw new Error('embedded/worker.ts must run in a worker thread');
const port = parentPort;
let db: PGlite | undefined;

const FETCH_BATCH = 500;

function database(): PGlite {
  if (!db) throw new Error('embedded engine not initialised');
  return db;
}

function errorInfo(err: unknown): WorkerErrorInfo {
  const e = err as { message?: unknown; code?: unknown; position?: unknown };
  const info: { message: string; code?: string; position?: number } = {
    message: typeof e?.message === 'string' ? e.message : String(err),
  };
  if (typeof e?.code === 'string') info.code = e.code;
  if (typeof e?.position === 'string' && /^\d+$/.test(e.position)) info.position = Number(e.position);
  return info;
}

async function read(spec: ReadQuerySpec): Promise<ReadQueryResult> {
  const pg = database();
  await pg.exec('BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    for (const stmt of spec.preamble) await pg.query(stmt);
    if (spec.direct) {
      const res = await pg.query<unknown[]>(spec.sql, [], { rowMode: 'array' });
      const names = uniqueColumnNames(res.fields.map((f) => f.name));
      const columns: ColumnInfo[] = res.fields.map((f, i) => ({ name: names[i] as string, type_oid: f.dataTypeID }));
      const collector = new RowCollector(columns, spec.maxRows, spec.maxBytes);
      for (const row of res.rows) if (!collector.add(row)) break;
      return { columns, rows: collector.rows, truncated: collector.truncated, bytes: collector.bytes };
    }
    await pg.query(`DECLARE svc_cursor NO SCROLL CURSOR FOR ${spec.sql}`);
    let collector: RowCollector | undefined;
    let columns: ColumnInfo[] = [];
    for (;;) {
      const batch = await pg.query<unknown[]>(`FETCH ${FETCH_BATCH} FROM svc_cursor`, [], { rowMode: 'array' });
      if (!collector) {
        const names = uniqueColumnNames(batch.fields.map((f) => f.name));
        columns = batch.fields.map((f, i) => ({ name: names[i] as string, type_oid: f.dataTypeID }));
        collector = new RowCollector(columns, spec.maxRows, spec.maxBytes);
      }
      let more = true;
      for (const row of batch.rows) {
        if (!collector.add(row)) {
          more = false;
          break;
        }
      }
      if (!more || batch.rows.length < FETCH_BATCH) break;
    }
    const c = collector as RowCollector;
    return { columns, rows: c.rows, truncated: c.truncated, bytes: c.bytes };
  } finally {
    await pg.exec('ROLLBACK');
  }
}

async function handle(msg: Request): Promise<unknown> {
  switch (msg.op) {
    case 'init': {
      const options: { loadDataDir?: Blob } = {};
      if (msg.loadDataDir) options.loadDataDir = new Blob([msg.loadDataDir]);
      db = msg.dataDir ? await PGlite.create(msg.dataDir, options) : await PGlite.create(options);
      return null;
    }
    case 'query': {
      const res = await database().query(msg.sql, msg.params as unknown[]);
      return { rows: res.rows };
    }
    case 'exec':
      await database().exec(msg.sql);
      return null;
    case 'read':
      return read(msg.spec);
    case 'run': {
      const mod = (await import(msg.module)) as Record<string, unknown>;
      const fn = mod[msg.fn];
      if (typeof fn !== 'function') throw new Error(`${msg.module} has no function ${msg.fn}`);
      await (fn as (db: PGlite) => Promise<unknown>)(database());
      return null;
    }
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
