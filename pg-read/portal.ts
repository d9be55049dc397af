/**
 * One read as ONE write and ONE round trip: a custom pg query (as pg-cursor is one) that writes,
 * in the extended protocol and in one corked write,
 *
 *   [BEGIN READ ONLY]                      the transaction (absent when the caller opened it)
 *   SELECT pg_catalog.set_config('statement_timeout', …, true)
 *                                          (a SELECT takes the transaction's snapshot, after
 *                                          which nothing can switch it to read-write)
 *   settings…                              the caller's trusted statements (SET LOCAL …; after
 *                                          set_config, so a SET LOCAL ROLE among them may be a
 *                                          role that cannot call it)
 *   [DECLARE <cursor> NO SCROLL CURSOR FOR <statement>]
 *                                          (with a cursor: only a query can be declared)
 *   the statement (or FETCH FORWARD n FROM <cursor>) as the unnamed portal, described and
 *   executed with a row limit of the cap plus one (a larger result ends as PortalSuspended:
 *   truncated, never read past the cap)
 *   SELECT pg_catalog.pg_advisory_unlock_all()
 *                                          (RELEASE_SESSION_LOCKS)
 *   ROLLBACK                               (the last: what the transaction holds, e.g. a
 *                                          caller's transaction-scoped advisory locks, is held
 *                                          until the read's last statement)
 *   Sync
 *
 * After an error the database skips to the Sync; the caller then rolls back and releases the
 * locks itself. Every message is inside the transaction, or a statement of its own, so it works
 * behind a transaction-pooling pooler (PgBouncer) too.
 */
import { createRequire } from 'node:module';
import pg from 'pg';

/**
 * Run after every read, before its connection is used again: a session-level advisory lock
 * (`pg_advisory_lock`, allowed in a read-only transaction) is what a read may take that the
 * ROLLBACK does not undo and that would harm others. Left held, it would block the database's
 * other clients for as long as the pooled connection lives, and behind a transaction-pooling
 * PgBouncer it would follow the server connection to another client. (The ROLLBACK does not undo
 * a prepared statement either, made by PREPARE or by a DO block's EXECUTE 'PREPARE …', nor
 * setseed() or LOAD: the callers refuse those statements; `DEALLOCATE ALL` is not run here, as
 * behind PgBouncer it would drop the statements other clients prepared on the server connection.)
 */
export const RELEASE_SESSION_LOCKS = 'SELECT pg_catalog.pg_advisory_unlock_all()';

/**
 * A trusted setting for an agent's statement on a customer's database (the `postgres` target's
 * and svc-relay's `settings`): every function, operator and type the statement names unqualified
 * resolves in the catalog only. On the role's own search_path, a customer's function of an allowed
 * name with another signature (`public.lower(integer)`), or an operator on the customer's types,
 * could be chosen and run its body, which no scope rewrites, with the role's rights. Tables are
 * unaffected: the rewrite names each with its schema.
 */
export const PIN_SEARCH_PATH = 'SET LOCAL search_path = pg_catalog';

/** pg's Connection, as a custom query writes to it (pg/lib/connection.js) */
export interface PgWire {
  stream: { cork?: () => void; uncork?: () => void };
  parse(m: { text: string; name?: string; types?: number[] }): void;
  bind(m: { portal?: string; statement?: string; values?: unknown[]; binary?: boolean; valueMapper?: (v: unknown) => unknown }): void;
  describe(m: { type: 'P' | 'S'; name?: string }): void;
  execute(m: { portal?: string; rows?: number }): void;
  sync(): void;
  sendCopyFail(msg: string): void;
}

/** pg's own mapping of a parameter value to its text (arrays, dates, buffers, objects as JSON) */
const prepareValue = (createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue: (v: unknown) => unknown }).prepareValue;

/** pg's Result (pg/lib/result.js): the row parsers of a RowDescription, and CommandComplete's tag */
interface PgResult {
  command: string | null;
  rowCount: number | null;
  addFields(f: pg.FieldDef[]): void;
  parseRow(values: (string | null)[]): unknown[];
  addCommandComplete(msg: unknown): void;
}
const PgResultClass = (pg as unknown as { Result: new (rowMode: 'array', types?: unknown) => PgResult }).Result;

/** what one read's messages report, in the order the database sends them */
export interface PortalSink {
  columns(fields: pg.FieldDef[]): void;
  /** a row of the statement */
  row(row: unknown[]): void;
  /** the statement finished (`more`: rows were left when the row limit was reached) */
  done(command: string | undefined, rowCount: number | null, more: boolean): void;
  /** the statement was empty: only comments or semicolons (EmptyQueryResponse) */
  empty(): void;
  /** pg failed the query: an ErrorResponse, a lost connection, a row that would not parse */
  error(err: unknown): void;
  /** ReadyForQuery: everything written for this read was answered */
  ready(): void;
}

export interface PortalPlan {
  readonly text: string;
  readonly params: readonly unknown[];
  /** statement_timeout, ms (an integer ≥ 1) */
  readonly timeoutMs: number;
  /** the Execute's row limit (the cap plus one) */
  readonly rowLimit: number;
  /** null: the caller's transaction is open already */
  readonly begin: string | null;
  readonly settings: readonly string[];
  /** run through a NO SCROLL cursor of this name */
  readonly cursor: string | undefined;
}

export class PortalQuery {
  /** executes answered so far */
  #phase = 0;
  /** the index of the statement's (or FETCH's) execute */
  readonly #statement: number;
  /** pg gives it the client's type parsers (client.query sets `_result._types`) */
  readonly _result = new PgResultClass('array');
  #failed = false;
  #unsent = false;

  constructor(
    private readonly plan: PortalPlan,
    private readonly sink: PortalSink,
  ) {
    this.#statement = (plan.begin === null ? 0 : 1) + plan.settings.length + 1 + (plan.cursor === undefined ? 0 : 1);
  }

  /** whether the write failed half-way (a parameter pg cannot map): the connection is out of step */
  get unsent(): boolean {
    return this.#unsent;
  }

  /** whether no execute of the statement's own (its DECLARE, or itself) has been answered yet: what fails now is ours */
  get beforeStatement(): boolean {
    return this.#phase < this.#statement - (this.plan.cursor === undefined ? 0 : 1);
  }

  /** whether the statement's execute is the one being answered (its rows are arriving) */
  get inStatement(): boolean {
    return this.#phase === this.#statement;
  }

  submit(c: PgWire): Error | null {
    const p = this.plan;
    const simple = (text: string): void => {
      c.parse({ text });
      c.bind({});
      c.execute({});
    };
    c.stream.cork?.();
    try {
      if (p.begin !== null) simple(p.begin);
      // (qualified, as RELEASE_SESSION_LOCKS: both run on the role's own search_path, before the
      // pin or after the transaction, where a `public, pg_catalog` path would find a customer's
      // function of the same name and signature first)
      simple(`SELECT pg_catalog.set_config('statement_timeout', '${p.timeoutMs}', true)`);
      for (const s of p.settings) simple(s);
      if (p.cursor === undefined) {
        c.parse({ text: p.text });
        c.bind({ values: p.params as unknown[], valueMapper: prepareValue });
      } else {
        c.parse({ text: `DECLARE ${p.cursor} NO SCROLL CURSOR FOR ${p.text}` });
        c.bind({ values: p.params as unknown[], valueMapper: prepareValue });
        c.execute({});
        c.parse({ text: `FETCH FORWARD ${p.rowLimit} FROM ${p.cursor}` });
        c.bind({});
      }
      c.describe({ type: 'P' });
      c.execute({ rows: p.rowLimit });
      simple(RELEASE_SESSION_LOCKS);
      simple('ROLLBACK');
      c.sync();
    } catch (err) {
      // a parameter pg cannot map: what was written has no Sync; the caller drops the connection
      this.#unsent = true;
      return err instanceof Error ? err : new Error(String(err));
    } finally {
      c.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(msg: { fields: pg.FieldDef[] }): void {
    if (this.#phase !== this.#statement) return;
    this._result.addFields(msg.fields);
    this.sink.columns(msg.fields);
  }

  handleDataRow(msg: { fields: (string | null)[] }): void {
    if (this.#phase !== this.#statement || this.#failed) return; // (set_config's row, the lock release's)
    let row: unknown[];
    try {
      row = this._result.parseRow(msg.fields);
    } catch (err) {
      this.#failed = true;
      this.sink.error(err);
      return;
    }
    this.sink.row(row);
  }

  handlePortalSuspended(): void {
    if (this.#phase++ === this.#statement) this.sink.done(undefined, null, true);
  }

  handleCommandComplete(msg: unknown): void {
    if (this.#phase++ !== this.#statement) return;
    this._result.addCommandComplete(msg);
    this.sink.done(this._result.command ?? undefined, this._result.rowCount, false);
  }

  handleEmptyQuery(): void {
    if (this.#phase++ === this.#statement) this.sink.empty();
  }

  handleError(err: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.sink.error(err);
  }

  handleReadyForQuery(): void {
    if (!this.#failed) this.sink.ready();
  }

  handleCopyInResponse(c: PgWire): void {
    c.sendCopyFail('COPY FROM STDIN is not supported');
  }

  handleCopyData(): void {}
}
