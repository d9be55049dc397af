/**
 * The per-connection audit trail in the store: append under the connection's row lock (so
 * concurrent queries never fork the chain), list, stream as JSONL, verify.
 */
import { randomId } from '../ids.js';
import type { Sql, Store } from '../store/index.js';
import { canonParts, ChainVerifier, type EventBody, type StoredEvent, type VerifyResult } from './chain.js';

export { canon, canonParts, eventHash, genesisHash, sha256Hex, verifyChain, ChainVerifier, type VerifyResult, type GenesisInput } from './chain.js';

export class AuditError extends Error {
  readonly code = 'AUDIT_ERR_NO_CONNECTION';
  constructor(message: string) {
    super(message);
    this.name = 'AuditError';
  }
}

export type AuditEvent = EventBody & { readonly id: string; readonly hash: string };

export function newEventId(): string {
  return randomId('evt');
}

/** What the store answers for an appended event (svc_append_event, svc_settle). */
export interface AppendedRow {
  readonly o_seq: number;
  readonly o_prev: string;
  readonly o_hash: string;
  readonly o_at: string;
}

/**
 * An event ready to append: its id, and its canonical JSON cut around `at`, `prev_hash` and `seq`
 * (filled in by the store under the connection's row lock, so concurrent appends never fork the
 * chain and times never go backwards along it). `fields` must be JSON data (no non-finite numbers).
 */
export class PendingEvent {
  readonly parts: readonly [string, string, string, string];
  constructor(
    readonly connectionId: string,
    private readonly fields: Record<string, unknown>,
    readonly id: string = newEventId(),
  ) {
    this.parts = canonParts({ ...fields, id, connection_id: connectionId });
  }

  /** The event as appended, from the store's answer. */
  appended(row: AppendedRow | undefined): AuditEvent {
    if (!row) throw new AuditError(`connection ${this.connectionId} not found`);
    return { ...this.fields, id: this.id, connection_id: this.connectionId, at: row.o_at, seq: row.o_seq, prev_hash: row.o_prev, hash: row.o_hash };
  }
}

/** Append one event: one statement, in the caller's transaction or on its own. */
export async function appendEvent(sql: Sql, connectionId: string, fields: Record<string, unknown>, id: string = newEventId()): Promise<AuditEvent> {
  return appendPending(sql, new PendingEvent(connectionId, fields, id));
}

export async function appendPending(sql: Sql, ev: PendingEvent): Promise<AuditEvent> {
  try {
    const [row] = await sql.query<AppendedRow>('SELECT o_seq, o_prev, o_hash, o_at FROM svc_append_event($1, $2, $3, $4, $5, $6)', [ev.connectionId, ev.id, ...ev.parts], { prepared: true });
    return ev.appended(row);
  } catch (err) {
    if (isNoData(err)) throw new AuditError(`connection ${ev.connectionId} not found`);
    throw err;
  }
}

/** how many events {@link appendPendingMany} appends in one statement */
const APPEND_MANY_CHUNK = 500;

/**
 * Append one event to each of many connections (one event per connection: a connection named
 * twice would have its chain linked within one statement), a few statements in all instead of
 * one each, in the caller's transaction: revoking a relay's connections appended one statement
 * per connection, holding the store's lock for seconds with thousands of them.
 */
export async function appendPendingMany(sql: Sql, events: readonly PendingEvent[]): Promise<AuditEvent[]> {
  if (new Set(events.map((e) => e.connectionId)).size !== events.length) throw new Error('appendPendingMany: one event per connection');
  const out: AuditEvent[] = [];
  for (let i = 0; i < events.length; i += APPEND_MANY_CHUNK) {
    const chunk = events.slice(i, i + APPEND_MANY_CHUNK);
    const column = (k: number): string[] => chunk.map((e) => e.parts[k] as string);
    const rows = await sql.query<AppendedRow & { conn: string }>(
      `SELECT u.conn, a.o_seq, a.o_prev, a.o_hash, a.o_at
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS u(conn, id, a, b, c, d, n)
         CROSS JOIN LATERAL svc_append_event(u.conn, u.id, u.a, u.b, u.c, u.d) a ORDER BY u.n`,
      [chunk.map((e) => e.connectionId), chunk.map((e) => e.id), column(0), column(1), column(2), column(3)],
    );
    const byConn = new Map(rows.map((r) => [r.conn, r]));
    for (const e of chunk) out.push(e.appended(byConn.get(e.connectionId)));
  }
  return out;
}

/** the store's `no_data_found` (P0002): the connection named does not exist */
function isNoData(err: unknown): boolean {
  const e = err as { code?: unknown; sqlState?: unknown };
  return e?.code === 'P0002' || e?.sqlState === 'P0002';
}

interface EventRow {
  seq: number;
  body: string;
  hash: string;
}

function parse(row: EventRow): StoredEvent {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(row.body) as Record<string, unknown>;
  } catch {
    body = { unreadable: row.body };
  }
  return { seq: row.seq, body, hash: row.hash };
}

export function toEvent(e: StoredEvent): AuditEvent {
  return { ...(e.body as EventBody), hash: e.hash } as AuditEvent;
}

const PAGE = 1000;

/** Events oldest first, in pages, so an export never holds the whole chain in memory. */
export async function* eventsOf(store: Store, connectionId: string, afterSeq = 0): AsyncGenerator<StoredEvent> {
  let after = afterSeq;
  for (;;) {
    const rows = await store.query<EventRow>('SELECT seq, body, hash FROM audit_events WHERE connection_id = $1 AND seq > $2 ORDER BY seq LIMIT $3', [connectionId, after, PAGE]);
    for (const r of rows) yield parse(r);
    const last = rows[rows.length - 1];
    if (rows.length < PAGE || !last) return;
    after = last.seq;
  }
}

async function listEvents(sql: Sql, connectionId: string, afterSeq: number, limit: number): Promise<AuditEvent[]> {
  const rows = await sql.query<EventRow>('SELECT seq, body, hash FROM audit_events WHERE connection_id = $1 AND seq > $2 ORDER BY seq LIMIT $3', [connectionId, afterSeq, limit]);
  return rows.map((r) => toEvent(parse(r)));
}

/**
 * A page of a connection's events and its head, from one snapshot of the store (other replicas
 * may be appending): no event of the page passes the head, and the head is where the chain ended
 * when the page was read.
 */
export async function pageOf(store: Store, connectionId: string, afterSeq: number, limit: number): Promise<{ head: { seq: number; hash: string }; events: AuditEvent[] }> {
  return store.tx(async (sql) => {
    await sql.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    const [c] = await sql.query<{ head_hash: string; head_seq: number }>('SELECT head_hash, head_seq FROM connections WHERE id = $1', [connectionId]);
    if (!c) throw new AuditError(`connection ${connectionId} not found`);
    return { head: { seq: c.head_seq, hash: c.head_hash }, events: await listEvents(sql, connectionId, afterSeq, limit) };
  });
}

/**
 * Verify a connection's chain from one consistent snapshot of its head and events (queries may
 * be appending meanwhile), page by page.
 */
export async function verifyConnection(store: Store, connectionId: string): Promise<VerifyResult> {
  return store.tx(async (sql) => {
    await sql.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    const [c] = await sql.query<{ genesis_hash: string; head_hash: string; head_seq: number }>('SELECT genesis_hash, head_hash, head_seq FROM connections WHERE id = $1', [connectionId]);
    if (!c) throw new AuditError(`connection ${connectionId} not found`);
    const verifier = new ChainVerifier(c.genesis_hash);
    let after = 0;
    for (;;) {
      const rows = await sql.query<EventRow>('SELECT seq, body, hash FROM audit_events WHERE connection_id = $1 AND seq > $2 ORDER BY seq LIMIT $3', [connectionId, after, PAGE]);
      let ok = true;
      for (const r of rows) if (!(ok = verifier.push(parse(r)))) break;
      const last = rows[rows.length - 1];
      if (!ok || rows.length < PAGE || !last) break;
      after = last.seq;
    }
    return verifier.finish({ seq: c.head_seq, hash: c.head_hash });
  });
}
