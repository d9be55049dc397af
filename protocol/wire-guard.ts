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
 *
 * Three ways in: `WireFilter` (the byte filter itself), `guardWire` (on a connected stream, for
 * the length of one read), and `guardPgClient` / `guardMysqlConnection` (installed when the
 * driver's connection is made, so the server's very first message is measured too, and left in
 * place for the connection's life; each read sets its budget with `use`). The database
 * connections of the control plane and of svc-relay are all guarded the last way.
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

/** The read in progress on a guarded connection: its row budget and what to do when a message is refused. */
export interface WireRead {
  /** bytes the next row message may declare (see {@link WireGuardOptions.rowBudget}) */
  rowBudget(): number;
  onTrip?(trip: WireTrip): void;
}

/**
 * The guard as a filter of the byte stream: `push` each chunk that arrives; what may pass is
 * handed to `deliver` (the driver's parser), message by message, and at the first refused
 * message `stop` is called and nothing more is delivered. Without a read in progress
 * (`use(null)`: the handshake, our own statements) every message, rows included, may be at most
 * `maxOtherBytes`.
 */
export class WireFilter {
  private readonly headerSize: number;
  private readonly maxOther: number;
  private readonly header: Buffer;
  private have = 0; // header bytes gathered
  private bodyLeft = 0; // body bytes of the current message still to pass
  private mysqlLogical = 0; // bytes of a MySQL logical packet split into 0xffffff pieces so far
  private trip: WireTrip | null = null;
  private rows = 0;
  // PostgreSQL: the column count of the last RowDescription, read from its first two body bytes,
  // so a DataRow is measured by its values (its declared length less 2 + 4 bytes per column)
  private columns = 0;
  private countLeft = 0;
  private read: WireRead | null = null;
  private failed = false;

  /**
   * @param stop closes the stream after a refused message
   * @param fail closes the stream with the driver parser's error (it reaches the pending query)
   */
  constructor(
    private readonly framing: WireFraming,
    private readonly deliver: (piece: Buffer) => void,
    private readonly stop: () => void,
    maxOtherBytes?: number,
    private readonly fail: (err: Error) => void = () => stop(),
  ) {
    this.headerSize = framing === 'postgres' ? PG_HEADER : MYSQL_HEADER;
    this.maxOther = maxOtherBytes ?? DEFAULT_MAX_OTHER;
    this.header = Buffer.alloc(this.headerSize);
  }

  /** the refused message, once one was refused */
  get tripped(): WireTrip | null {
    return this.trip;
  }

  /** bytes of the row messages let through so far (PostgreSQL: value bytes) */
  get rowBytes(): number {
    return this.rows;
  }

  /** the read whose budget applies from the next message on (null: none) */
  use(read: WireRead | null): void {
    this.read = read;
  }

  private refuse(t: WireTrip): void {
    this.trip = t;
    this.stop();
    try {
      this.read?.onTrip?.(t);
    } catch {
      // the caller's reaction must not break the socket's data handler
    }
  }

  private budget(): number {
    return this.read ? this.read.rowBudget() : this.maxOther;
  }

  /** true when the message whose header is in `header` may pass */
  private admit(): boolean {
    const header = this.header;
    if (this.framing === 'postgres') {
      const type = header[0] as number;
      const length = header.readUInt32BE(1) - 4;
      this.bodyLeft = Math.max(0, length);
      if (type === PG_ROW_DESCRIPTION && length >= 2) {
        this.columns = 0;
        this.countLeft = 2;
      }
      if (type === PG_DATA_ROW) {
        const declared = Math.max(0, length - 2 - 4 * this.columns);
        const budget = this.budget();
        if (declared > budget) {
          this.refuse({ declared, budget, kind: 'row' });
          return false;
        }
        this.rows += declared;
      } else if (length > this.maxOther) {
        this.refuse({ declared: length, budget: this.maxOther, kind: 'other' });
        return false;
      }
      return true;
    }
    const len = (header[0] as number) | ((header[1] as number) << 8) | ((header[2] as number) << 16);
    this.bodyLeft = len;
    const logical = this.mysqlLogical + len;
    this.mysqlLogical = len === MYSQL_MAX_PACKET ? logical : 0;
    const budget = this.budget();
    if (logical > budget) {
      this.refuse({ declared: logical, budget, kind: this.read ? 'row' : 'other' });
      return false;
    }
    this.rows += len;
    return true;
  }

  /** One chunk from the stream. A driver parser that throws fails the stream via `stop`, never the process. */
  push(chunk: Buffer): void {
    if (this.trip || this.failed) return;
    try {
      let from = 0; // first byte of this chunk not yet delivered
      let i = 0;
      while (i < chunk.length) {
        if (this.bodyLeft > 0) {
          if (this.countLeft > 0) {
            this.columns = (this.columns << 8) | (chunk[i] as number);
            this.countLeft--;
            this.bodyLeft--;
            i++;
            continue;
          }
          const take = Math.min(this.bodyLeft, chunk.length - i);
          this.bodyLeft -= take;
          i += take;
          continue;
        }
        const headerStartsHere = this.have === 0;
        const take = Math.min(this.headerSize - this.have, chunk.length - i);
        chunk.copy(this.header, this.have, i, i + take);
        this.have += take;
        const start = i;
        i += take;
        if (this.have < this.headerSize) break; // the rest of the header comes with the next chunk
        this.have = 0;
        // everything before this message goes to the driver first, so the budget is current
        if (headerStartsHere) {
          if (start > from) this.deliver(chunk.subarray(from, start));
          from = start;
        }
        if (!this.admit()) return;
      }
      if (chunk.length > from) this.deliver(chunk.subarray(from));
    } catch (err) {
      // a driver's parser threw inside the data handler: fail the connection, not the process
      this.failed = true;
      this.fail(err instanceof Error ? err : new Error(String(err)));
    }
  }
}

/**
 * Install the guard on a connected driver's stream. The stream must be at a message boundary
 * (a connection idle after its handshake).
 */
export function guardWire(stream: GuardedStream, o: WireGuardOptions): WireGuard {
  const original = stream.listeners('data') as ((chunk: Buffer) => void)[];
  let released = false;
  const stopStream = (): void => {
    try {
      stream.pause();
    } finally {
      stream.destroy();
    }
  };
  const filter = new WireFilter(
    o.framing,
    (piece) => {
      for (const l of original) l.call(stream, piece);
    },
    stopStream,
    o.maxOtherBytes,
    (err) => stream.destroy(err),
  );
  filter.use({ rowBudget: o.rowBudget, ...(o.onTrip ? { onTrip: o.onTrip } : {}) });
  const onData = (chunk: Buffer): void => {
    if (!released) filter.push(chunk);
  };
  stream.removeAllListeners('data');
  stream.on('data', onData);

  return {
    get tripped() {
      return filter.tripped;
    },
    get rowBytes() {
      return filter.rowBytes;
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

// ---------------------------------------------------------------------------------------------
// Guards installed when a driver's connection is made, so that nothing the server sends is
// decoded unmeasured, from the first byte of the handshake (a hostile server's 600 MB error
// during the startup would otherwise be built into a string by the driver).

/** A guard that lives as long as its connection; reads set their budget with `use`. */
export interface ConnectionGuard {
  /** the refused message, once one was refused (the connection is then closed) */
  readonly tripped: WireTrip | null;
  /** bytes of row messages let through since the connection was made */
  readonly rowBytes: number;
  /** the read whose budget applies from now on; null between reads (every message ≤ maxOtherBytes) */
  use(read: WireRead | null): void;
}

/** pg's Client, structurally: its Connection attaches the protocol parser to the (TLS) stream. */
export interface PgClientLike {
  readonly connection?: { attachListeners?: (stream: GuardedStream) => void; stream?: GuardedStream };
}

const pgGuards = new WeakMap<object, ConnectionGuard>();

function connectionGuard(get: () => WireFilter | null): ConnectionGuard {
  let read: WireRead | null = null;
  return {
    get tripped() {
      return get()?.tripped ?? null;
    },
    get rowBytes() {
      return get()?.rowBytes ?? 0;
    },
    use(r) {
      read = r;
      get()?.use(read);
    },
  };
}

/**
 * Guard a pg Client before it connects: the filter is put between the stream and pg's parser
 * when pg attaches the parser (after the TLS upgrade, when there is one). Returns the guard (also
 * found later with {@link pgConnectionGuard}).
 */
export function guardPgClient(client: PgClientLike, o: { maxOtherBytes?: number } = {}): ConnectionGuard {
  const connection = client.connection;
  const attach = connection?.attachListeners;
  if (!connection || !attach) throw new Error('guardPgClient: not a pg Client (no connection.attachListeners)');
  let filter: WireFilter | null = null;
  const guard = connectionGuard(() => filter);
  let current: WireRead | null = null;
  const use = guard.use;
  guard.use = (r) => {
    current = r;
    use(r);
  };
  connection.attachListeners = function (this: unknown, stream: GuardedStream): void {
    attach.call(this, stream);
    const original = stream.listeners('data') as ((chunk: Buffer) => void)[];
    stream.removeAllListeners('data');
    const f = new WireFilter(
      'postgres',
      (piece) => {
        for (const l of original) l.call(stream, piece);
      },
      () => {
        try {
          stream.pause();
        } finally {
          stream.destroy();
        }
      },
      o.maxOtherBytes,
      (err) => stream.destroy(err),
    );
    f.use(current);
    filter = f;
    stream.on('data', (chunk: Buffer) => f.push(chunk));
  };
  pgGuards.set(client, guard);
  return guard;
}

/** The guard {@link guardPgClient} installed on `client`, if any. */
export function pgConnectionGuard(client: object): ConnectionGuard | undefined {
  return pgGuards.get(client);
}

/** mysql2's Connection, structurally: every chunk of the (TLS) stream goes to `packetParser.execute`. */
export interface MysqlConnectionLike {
  packetParser?: { execute(chunk: Buffer): unknown };
  readonly stream?: GuardedStream;
}

/**
 * Guard a mysql2 connection right after it is created (before any byte arrives): every chunk it
 * reads, before and after a TLS upgrade, passes the filter before mysql2's packet parser. (The
 * parser swaps its own `execute` as it goes, so the connection gets a stand-in parser whose
 * `execute` is the filter and which reads everything else from the real one.)
 */
export function guardMysqlConnection(conn: MysqlConnectionLike, o: { maxOtherBytes?: number } = {}): ConnectionGuard {
  const parser = conn.packetParser;
  if (!parser) throw new Error('guardMysqlConnection: not a mysql2 connection (no packetParser)');
  const filter: WireFilter = new WireFilter(
    'mysql',
    (piece) => void parser.execute(piece),
    () => {
      // with an error: mysql2 fails a handshake in progress only on a stream error
      const stream = conn.stream;
      try {
        stream?.pause();
      } finally {
        stream?.destroy(new Error(`the server sent a packet of ${filter.tripped?.declared ?? 'too many'} bytes, more than ${filter.tripped?.budget ?? 'the limit'}; it was not read`));
      }
    },
    o.maxOtherBytes,
    (err) => conn.stream?.destroy(err),
  );
  const standIn = Object.create(parser) as { execute(chunk: Buffer): unknown };
  standIn.execute = (chunk: Buffer) => filter.push(chunk);
  conn.packetParser = standIn;
  return connectionGuard(() => filter);
}
