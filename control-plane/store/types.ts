/** The control plane's state store: one SQL dialect (PostgreSQL), two engines. */

export type Row = Record<string, unknown>;

export interface QueryOptions {
  /**
   * one of the statements every query sends (its reservation, its settlement): an embedded store
   * keeps it prepared, parsed and planned once per engine instead of for each call; a PostgreSQL
   * store sends it as any other (a balancer between the store and its server may not keep a
   * session's prepared statements)
   */
  readonly prepared?: boolean;
}

export interface Sql {
  query<T extends object = Row>(text: string, params?: readonly unknown[], options?: QueryOptions): Promise<T[]>;
}

export interface Store extends Sql {
  readonly kind: 'embedded' | 'postgres';
  /**
   * this process is the only one using the store (the embedded store, its data dir locked:
   * dir-lock.ts): what the store holds for a running process when it opens (a query's money
   * reservation, a webhook delivery's lease) was left by one that ended, and can be given back at once
   */
  readonly soleProcess?: boolean;
  /** Run `fn` in one transaction; it commits when `fn` resolves and rolls back when it throws. */
  tx<T>(fn: (sql: Sql) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  /** the connection pool's state (a PostgreSQL store; the embedded one has no pool) */
  pool?(): { readonly total: number; readonly idle: number; readonly waiting: number };
}

export class StoreError extends Error {
  readonly code: 'STORE_ERR_OPEN' | 'STORE_ERR_MIGRATION';
  constructor(code: StoreError['code'], message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreError';
    this.code = code;
  }
}
