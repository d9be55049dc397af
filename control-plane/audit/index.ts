/**
 * The per-connection audit trail in the store: append under the connection's row lock (so
 * concurrent queries never fork the chain), list, stream as JSONL, verify.
 */
import { randomBytes } from 'node:crypto';
import type { Sql, Store } from '../store/index.js';
import { ChainVerifier, eventHash, type EventBody, type StoredEvent, type VerifyResult } from './chain.js';

export { canon, eventHash, genesisHash, sha256Hex, verifyChain, ChainVerifier, type VerifyResult, type GenesisInput } from './chain.js';

export class AuditError extends Error {
  readonly code = 'AUDIT_ERR_NO_CONNECTION';
  constructor(message: string) {
    super(message);
    this.name = 'AuditError';
  }
}

export type AuditEvent = EventBody & { readonly id: string; readonly hash: string };

export function newEventId(): string {
  return `evt_${randomBytes(12).toString('base64url')}`;
}

/**
 * Append one event in the caller's transaction. `fields` must be JSON data (no undefined, no
 * non-finite numbers); `seq`, `prev_hash`, `id`, `connection_id` and `at` are filled in here.
 */
export async function appendEvent(sql: Sql, connectionId: string, fields: Record<string, unknown>, id: string = newEventId()): Promise<AuditEvent> {
  const [head] = await sql.query<{ head_hash: string; head_seq: number }>('SELECT head_hash, head_seq FROM connections WHERE id = $1 FOR UPDATE', [connectionId]);
  if (!head) throw new AuditError(`connection ${connectionId} not found`);
  const body: EventBody = {
    ...fields,
    id,
    connection_id: connectionId,
    at: new Date().toISOString(),
    seq: head.head_seq + 1,
    prev_hash: head.head_hash,
  };
  const hash = eventHash(body);
  await sql.query('INSERT INTO audit_events (connection_id, seq, event_id, body, hash) VALUES ($1, $2, $3, $4, $5)', [connectionId, body.seq, id, JSON.stringify(body), hash]);
  await sql.query('UPDATE connections SET head_hash = $2, head_seq = $3 WHERE id = $1', [connectionId, hash, body.seq]);
  return { ...body, id, hash };
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

export async function listEvents(store: Store, connectionId: string, afterSeq: number, limit: number): Promise<AuditEvent[]> {
  const rows = await store.query<EventRow>('SELECT seq, body, hash FROM audit_events WHERE connection_id = $1 AND seq > $2 ORDER BY seq LIMIT $3', [connectionId, afterSeq, limit]);
  return rows.map((r) => toEvent(parse(r)));
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
