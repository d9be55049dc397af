/**
 * The pg Client every pg-read caller connects with: its every message, from the start-up on,
 * passes the wire guard (protocol/wire-guard.ts), so a server's message larger than the budget
 * of the read in progress (16 MiB between reads) is never decoded and no server can make the
 * process build a huge string. Used by svc-relay's pool, the `postgres` live target and the
 * external-PostgreSQL demo engine (every client that talks to a database we do not control).
 */
import pg from 'pg';
import { guardPgClient, type PgClientLike } from '../protocol/wire-guard.js';

export class GuardedPgClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    guardPgClient(this as unknown as PgClientLike);
  }
}
