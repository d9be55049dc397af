/**
 * A guard on the raw byte stream of a database connection (PostgreSQL or MySQL wire protocol),
 * placed between the socket and the driver's parser: it follows the message boundaries across
 * chunks and reads every message's declared length BEFORE the driver sees the message's body.
 * A row message (PostgreSQL DataRow 'D'; every MySQL packet once the guard is armed) that
 * declares more bytes than the caller's remaining result budget, or any other message larger
 * than a fixed ceiling, is never handed to the driver: the guard stops reading, destroys the
 * stream (the driver's pending query fails with a lost connection) and reports the trip, so the
 * caller answers with the rows that fit (truncated) and cancels the statement at the source.
 * Without it, a single `SELECT repeat('x', 600000000)` makes the driver buffer the whole message
 * and build a string longer than V8 allows inside the socket's data handler, which kills the
 * process.
 *
 * Errors thrown by the driver's own data handler (a parser failure) are caught here and turned
 * into a destroyed stream: the driver sees a connection error, never an uncaught exception.
 */
import type { EventEmitter } from 'node:events';

export type WireFraming = 'postgres' | 'mysql';

export interface WireTrip {
  /** bytes the refused message declared: a PostgreSQL DataRow's value bytes, a MySQL logical packet so far */
  readonly declared: number;
  /** the budget it was measured against */
  readonly budget: number;
  readonly kind: 'row' | 'other';
}

export interface WireGuardOptions {
  readonly framing: WireFraming;
  /**
   * Bytes the next row message may declare. Called when a row message's header has arrived,
   * after every earlier byte was handed to the driver (whose parser runs synchronously), so a
   * budget computed from the rows collected so far is exact.
   */
  rowBudget(): number;
  /** most bytes any non-row message may declare (default 16 MiB) */
  readonly maxOtherBytes?: number;
  /** called once, after the stream was stopped */
  onTrip?(trip: WireTrip): void;
}

/** the stream as both drivers keep it: a socket or a TLS socket */
export interface GuardedStream extends EventEmitter {
  pause(): unknown;
  destroy(err?: Error): unknown;
}

export interface WireGuard {
  /** the refused message, once one was refused */
  readonly tripped: WireTrip | null;
  /** bytes of the row messages let through so far (PostgreSQL: value bytes) */
  readonly rowBytes: number;
  /** the caller's own stop: read nothing more and close the stream */
  stop(): void;
  /** give the stream back its original listeners (when the connection is reused) */
  release(): void;
}

const DEFAULT_MAX_OTHER = 16 * 1024 * 1024;
const PG_HEADER = 5;
const MYSQL_HEADER = 4;
const MYSQL_MAX_PACKET = 0xffffff;
const PG_DATA_ROW = 0x44; // 'D'
const PG_ROW_DESCRIPTION = 0x54; // 'T'

/**
 * Install the guard on a connected driver's stream. The stream must be at a message boundary
 * (a connection idle after its handshake).
 */
export function guardWire(stream: GuardedStream, o: WireGuardOptions): WireGuard {
  const headerSize = o.framing === 'postgres' ? PG_HEADER : MYSQL_HEADER;
  const maxOther = o.maxOtherBytes ?? DEFAULT_MAX_OTHER;
  const original = stream.listeners('data') as ((chunk: Buffer) => void)[];
  const header = Buffer.alloc(headerSize);
  let have = 0; // header bytes gathered
  let bodyLeft = 0; // body bytes of the current message still to pass
  let mysqlLogical = 0; // bytes of a MySQL logical packet split into 0xffffff pieces so far
  let tripped: WireTrip | null = null;
  let released = false;
  let rowBytes = 0;
  // PostgreSQL: the column count of the last RowDescription, read from its first two body bytes,
  // so a DataRow is measured by its values (its declared length less 2 + 4 bytes per column)
  let columns = 0;
  let countLeft = 0;

  const deliver = (piece: Buffer): void => {
    if (piece.length === 0) return;
    for (const l of original) l.call(stream, piece);
  };
  const stopStream = (): void => {
    try {
      stream.pause();
    } finally {
      stream.destroy();
    }
  };
  const trip = (t: WireTrip): void => {
    tripped = t;
    stopStream();
    try {
      o.onTrip?.(t);
    } catch {
      // the caller's reaction must not break the socket's data handler
    }
  };

  /** true when the message whose header is in `header` may pass */
  const admit = (): boolean => {
    if (o.framing === 'postgres') {
      const type = header[0] as number;
      const length = header.readUInt32BE(1) - 4;
      bodyLeft = Math.max(0, length);
      if (type === PG_ROW_DESCRIPTION && length >= 2) {
        columns = 0;
        countLeft = 2;
      }
      if (type === PG_DATA_ROW) {
        const declared = Math.max(0, length - 2 - 4 * columns);
        const budget = o.rowBudget();
        if (declared > budget) {
          trip({ declared, budget, kind: 'row' });
          return false;
        }
        rowBytes += declared;
      } else if (length > maxOther) {
        trip({ declared: length, budget: maxOther, kind: 'other' });
        return false;
      }
      return true;
    }
    const len = (header[0] as number) | ((header[1] as number) << 8) | ((header[2] as number) << 16);
    bodyLeft = len;
    const logical = mysqlLogical + len;
    mysqlLogical = len === MYSQL_MAX_PACKET ? logical : 0;
    const budget = o.rowBudget();
    if (logical > budget) {
      trip({ declared: logical, budget, kind: 'row' });
      return false;
    }
    rowBytes += len;
    return true;
  };

  const onData = (chunk: Buffer): void => {
    if (tripped || released) return;
    try {
      let from = 0; // first byte of this chunk not yet delivered
      let i = 0;
      while (i < chunk.length) {
        if (bodyLeft > 0) {
          if (countLeft > 0) {
            columns = (columns << 8) | (chunk[i] as number);
            countLeft--;
            bodyLeft--;
            i++;
            continue;
          }
          const take = Math.min(bodyLeft, chunk.length - i);
          bodyLeft -= take;
          i += take;
          continue;
        }
        const headerStartsHere = have === 0;
        const take = Math.min(headerSize - have, chunk.length - i);
        chunk.copy(header, have, i, i + take);
        have += take;
        const start = i;
        i += take;
        if (have < headerSize) break; // the rest of the header comes with the next chunk
        have = 0;
        // everything before this message goes to the driver first, so the budget is current
        if (headerStartsHere) {
          deliver(chunk.subarray(from, start));
          from = start;
        }
        if (!admit()) return;
      }
      deliver(chunk.subarray(from));
    } catch (err) {
      // a driver's parser threw inside the data handler: fail the connection, not the process
      stream.destroy(err instanceof Error ? err : new Error(String(err)));
    }
  };

  stream.removeAllListeners('data');
  stream.on('data', onData);

  return {
    get tripped() {
      return tripped;
    },
    get rowBytes() {
      return rowBytes;
    },
    stop() {
      if (!released) stopStream();
    },
    release() {
      if (released) return;
      released = true;
      stream.removeListener('data', onData);
      for (const l of original) stream.on('data', l);
    },
  };
}
