/**
 * Stopping a statement at the database with the protocol's CancelRequest: the key from the
 * connection's BackendKeyData (behind a pooler such as PgBouncer, the pooler's key, which it
 * forwards to the server connection it lent), a plain 16-byte message on a new socket, no
 * authentication and no connection slot. (`pg_cancel_backend(pid)` on a second connection would
 * need both, and behind a pooler the pid is not the server's.)
 */
import { connect } from 'node:net';

/** a pg Client as its start-up left it: the server's cancel key and the address it connected to */
export interface CancelTarget {
  readonly processID?: unknown;
  readonly secretKey?: unknown;
  readonly host?: unknown;
  readonly port?: unknown;
}

const CANCEL_REQUEST_CODE = 80877102;

/**
 * Sends a CancelRequest for what runs on `client`'s connection; resolves once the server closed
 * the socket (it has signalled the backend), or after `timeoutMs`, or at once when the client has
 * no key (it never finished its start-up). Never rejects.
 */
export function sendCancelRequest(client: CancelTarget, timeoutMs: number): Promise<void> {
  const { processID, secretKey } = client;
  if (typeof processID !== 'number' || typeof secretKey !== 'number') return Promise.resolve();
  const host = typeof client.host === 'string' && client.host.length > 0 ? client.host : 'localhost';
  const port = typeof client.port === 'number' ? client.port : 5432;
  return new Promise<void>((resolve) => {
    const sock = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(port, host);
    const timer = setTimeout(() => sock.destroy(), timeoutMs);
    timer.unref?.();
    const msg = Buffer.alloc(16);
    msg.writeInt32BE(16, 0);
    msg.writeInt32BE(CANCEL_REQUEST_CODE, 4);
    msg.writeInt32BE(processID, 8);
    msg.writeInt32BE(secretKey, 12);
    sock.on('connect', () => sock.write(msg));
    sock.on('data', () => undefined);
    sock.on('error', () => undefined);
    // the server closes the socket once it has signalled the backend
    sock.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** `p`, or a rejection after `ms` (p's own outcome is then ignored) */
export function within<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
