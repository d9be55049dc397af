/**
 * The audit chain (docs/audit.md), pure: canonical JSON (RFC 8785), the genesis hash,
 * event hashes, and verification of a sequence of events. docs/audit.md publishes the same algorithm.
 */
import { createHash } from 'node:crypto';

/** RFC 8785 JSON Canonicalization Scheme. */
export function canon(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canon: non-finite number');
      return JSON.stringify(value); // ECMAScript Number.prototype.toString, as RFC 8785 requires
    case 'string':
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) return `[${value.map((v) => canon(v === undefined ? null : v)).join(',')}]`;
      const obj = value as Record<string, unknown>;
      // UTF-16 code-unit order is JavaScript's default string comparison
      const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort();
      return `{${keys.map((k) => `${JSON.stringify(k)}:${canon(obj[k])}`).join(',')}}`;
    }
    default:
      throw new TypeError(`canon: cannot encode ${typeof value}`);
  }
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

export interface GenesisInput {
  readonly connection_id: string;
  readonly org_id: string;
  readonly target_id: string;
  readonly scopes: readonly string[];
  readonly created_at: string;
}

export function genesisHash(g: GenesisInput): string {
  return sha256Hex(`svc-audit-v1\n${canon({ connection_id: g.connection_id, org_id: g.org_id, target_id: g.target_id, scopes: g.scopes, created_at: g.created_at })}`);
}

/** An event as hashed: everything but `hash`, including `seq` and `prev_hash`. */
export type EventBody = Record<string, unknown> & { readonly seq: number; readonly prev_hash: string };

export function eventHash(body: EventBody): string {
  return sha256Hex(`${body.prev_hash}\n${canon(body)}`);
}

/** The fields of an event only the store knows when it commits, in canonical key order. */
export const STORE_FILLED = ['at', 'prev_hash', 'seq'] as const;

/**
 * An event's canonical JSON cut around the values only the store knows when the event commits
 * (its time, `prev_hash` and `seq`, filled in under the connection's row lock):
 * `canon({...body, at, prev_hash, seq}) === a + at + b + prev_hash + c + seq + d` for an ISO-8601
 * `at`, a hex `prev_hash` and an integer `seq` (control-plane/store/functions.ts joins and hashes
 * them).
 */
export function canonParts(body: Record<string, unknown>): readonly [string, string, string, string] {
  for (const k of STORE_FILLED) if (k in body) throw new TypeError(`canonParts: ${k} is the store's`);
  const keys = [...Object.keys(body).filter((k) => body[k] !== undefined), ...STORE_FILLED].sort();
  const parts: string[] = [];
  let part = '{';
  let first = true;
  for (const k of keys) {
    const sep = first ? '' : ',';
    first = false;
    if (k === 'seq') {
      parts.push(`${part}${sep}"seq":`);
      part = '';
    } else if (k === 'at' || k === 'prev_hash') {
      parts.push(`${part}${sep}${JSON.stringify(k)}:"`);
      part = '"';
    } else part += `${sep}${JSON.stringify(k)}:${canon(body[k])}`;
  }
  parts.push(`${part}}`);
  return parts as unknown as readonly [string, string, string, string];
}

export interface VerifyResult {
  readonly verified: boolean;
  readonly events_checked: number;
  /** seq of the first event that fails, or null when intact */
  readonly broken_at: number | null;
  /** why it broke, for humans */
  readonly reason?: string;
}

export interface StoredEvent {
  readonly seq: number;
  /** the event without its hash, as stored */
  readonly body: Record<string, unknown>;
  readonly hash: string;
}

/**
 * Verifies events one at a time in storage order (so a chain of any length is checked in bounded
 * memory): the first event whose position, link or hash is wrong is reported; at the end, a head
 * that does not match the end of the chain is reported at the first seq past the shorter of the
 * two (a truncated tail, or events appended past the recorded head).
 */
export class ChainVerifier {
  private prev: string;
  private checked = 0;
  private broken: VerifyResult | undefined;
  private readonly firstSeq: number;

  /**
   * `genesis`: what the first event links to; `firstSeq`: its seq (1 for a whole chain; a part of
   * one, such as an export after `after_seq`, starts later and links to that event's hash)
   */
  constructor(genesis: string, firstSeq = 1) {
    this.prev = genesis;
    this.firstSeq = firstSeq;
  }

  /** Check the next event; false once the chain is broken (later events need not be read). */
  push(ev: StoredEvent): boolean {
    if (this.broken) return false;
    const expectedSeq = this.firstSeq + this.checked++;
    const body = ev.body as EventBody;
    const fail = (reason: string): boolean => {
      this.broken = { verified: false, events_checked: this.checked, broken_at: expectedSeq, reason };
      return false;
    };
    if (ev.seq !== expectedSeq || body.seq !== expectedSeq) return fail(`expected seq ${expectedSeq}, found ${String(body.seq)}`);
    if (body.prev_hash !== this.prev) return fail('prev_hash does not link to the previous event');
    if (eventHash(body) !== ev.hash) return fail('hash does not match the event');
    this.prev = ev.hash;
    return true;
  }

  finish(head?: { seq: number; hash: string }): VerifyResult {
    if (this.broken) return this.broken;
    if (head && (head.seq !== this.checked || head.hash !== this.prev)) {
      const brokenAt = Math.min(head.seq, this.checked) + 1;
      const reason = this.checked > head.seq ? 'events exist past the recorded head' : 'the recorded head does not match the end of the chain';
      return { verified: false, events_checked: this.checked, broken_at: head.seq === this.checked ? Math.max(1, this.checked) : brokenAt, reason };
    }
    return { verified: true, events_checked: this.checked, broken_at: null };
  }
}

/** Verify a whole sequence of events against the genesis hash and, when given, the recorded head. */
export function verifyChain(genesis: string, events: readonly StoredEvent[], head?: { seq: number; hash: string }): VerifyResult {
  const v = new ChainVerifier(genesis);
  for (const ev of events) if (!v.push(ev)) break;
  return v.finish(head);
}
