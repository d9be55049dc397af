/**
 * One process at a time on an embedded store's directory. PGlite keeps the whole database
 * engine in the process that opened it and takes no lock of its own (the `postmaster.pid` it
 * writes names its WebAssembly process, not ours): a second control plane started on the same
 * data dir ran beside the first, each with its own buffers and WAL position, and each
 * overwrote the other's pages.
 *
 * The lock is a Unix domain socket the holder listens on, beside the store's directory
 * (`<dir>.lock`): the kernel closes it when the holder exits, however it exits, so a lock left
 * by a kill is told from a live one by connecting to it (refused: nobody listens). A live holder
 * answers each connection with its process id, named in the refusal. On Linux the socket is
 * reached through the directory's descriptor (`/proc/self/fd/<fd>/…`), so a long data dir path
 * still fits the 107 bytes a socket's address may have.
 */
import { existsSync, openSync, closeSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';

/** Held until released; a second lock of the same directory is refused meanwhile. */
export interface DirLock {
  /** whether the lock is held (false: no socket could be made, and the store opened unlocked) */
  readonly held: boolean;
  release(): Promise<void>;
}

export class DirLockedError extends Error {
  readonly code = 'STORE_ERR_LOCKED';
  constructor(message: string) {
    super(message);
    this.name = 'DirLockedError';
  }
}

/** the longest address a Unix socket may have here (sun_path less its terminating zero) */
const SOCKET_PATH_MAX = 103;
/** how long a takeover of a dead holder's lock may take before another process takes it as dead too */
const TAKEOVER_STALE_MS = 5_000;
/** how long acquiring keeps trying while another process takes a dead holder's lock over */
const ACQUIRE_MS = 15_000;

/** A lock that could not be had where it is kept (no socket there): the store opens unlocked, with a warning. */
class LockUnavailable extends Error {}

/**
 * The lock of `dir` (which need not exist; its parent must), or DirLockedError when another live
 * process holds it. Where no socket can be made (a file system without them, a path too long
 * where there is no /proc), `warn` is told and the store opens without one, as before there was one.
 */
export async function lockDirectory(dir: string, warn: (message: string) => void = () => undefined): Promise<DirLock> {
  const parent = path.dirname(path.resolve(dir));
  const name = `${path.basename(dir)}.lock`;
  const file = path.join(parent, name);
  // the parent's descriptor makes the socket's address short (Linux); elsewhere the path itself
  const parentFd = existsSync('/proc/self/fd') ? openSync(parent, 'r') : undefined;
  const address = parentFd !== undefined ? `/proc/self/fd/${parentFd}/${name}` : file;
  const closeFd = (): void => {
    if (parentFd !== undefined) closeSync(parentFd);
  };
  const unlocked = (why: string): DirLock => {
    closeFd();
    warn(`the embedded store ${dir} is not locked (${why}): nothing stops a second process from opening it; run one control plane on it at a time`);
    return { held: false, release: async () => undefined };
  };
  if (Buffer.byteLength(address) > SOCKET_PATH_MAX) return unlocked(`its lock ${file} is longer than a socket's address may be, ${SOCKET_PATH_MAX} bytes`);
  const until = Date.now() + ACQUIRE_MS;
  try {
    for (;;) {
      const server = (await listen(address)) ?? (await takeOver(file, address));
      if (server) {
        return {
          held: true,
          release: async () => {
            await new Promise<void>((resolve) => server.close(() => resolve()));
            closeFd();
          },
        };
      }
      const holder = await holderOf(address);
      if (holder !== undefined) {
        throw new DirLockedError(
          `${dir} is in use by another control-plane process (${holder}): the embedded store serves one process at a time; stop that one first, or give this one another SVC_DATA_DIR (several replicas share a PostgreSQL store: DATABASE_URL)`,
        );
      }
      if (Date.now() > until) throw new DirLockedError(`cannot lock ${dir}: ${file} could not be taken over within ${ACQUIRE_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } catch (err) {
    if (err instanceof LockUnavailable) return unlocked(`no socket can be made at ${file}: ${err.message}`);
    closeFd();
    throw err;
  }
}

/** A server listening at `address`, or undefined when the address is taken (by a live holder or a dead one's socket). */
function listen(address: string): Promise<net.Server | undefined> {
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.end(`pid ${process.pid}\n`);
    });
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' ? resolve(undefined) : reject(new LockUnavailable(err.code ?? err.message))));
    server.listen(address, () => {
      // the lock never keeps the process alive
      server.unref();
      resolve(server);
    });
  });
}

/** Who holds the socket at `address` ("pid 123"), or undefined when nobody listens there. */
function holderOf(address: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect(address);
    let said = '';
    let connected = false;
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(connected ? (/^pid \d+/.exec(said)?.[0] ?? 'a process that did not say which') : undefined);
    };
    const timer = setTimeout(done, 1000);
    socket.on('connect', () => (connected = true));
    socket.on('data', (d: Buffer) => (said += d.toString('latin1')));
    socket.on('end', done);
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // ECONNREFUSED: a socket nobody listens on; ENOENT: removed meanwhile (try again)
      if (!connected && err.code !== 'ECONNREFUSED' && err.code !== 'ENOENT') connected = true;
      done();
    });
  });
}

/**
 * The lock, taken over from a holder that is gone (killed), or undefined when a live process
 * holds it or another one is taking it over. Done under `<file>.takeover` (made exclusively):
 * two processes that both found the holder gone would otherwise each remove its socket, the
 * second removing the first's new one; only the process holding the mark removes a socket, and
 * it listens before it gives the mark up.
 */
async function takeOver(file: string, address: string): Promise<net.Server | undefined> {
  const mark = `${file}.takeover`;
  try {
    await fs.writeFile(mark, `${process.pid}\n`, { flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    // another process is taking it over; one killed while doing so left its mark
    const age = await fs.stat(mark).then((s) => Date.now() - s.mtimeMs, () => 0);
    if (age > TAKEOVER_STALE_MS) await fs.rm(mark, { force: true });
    return undefined;
  }
  try {
    if ((await holderOf(address)) !== undefined) return undefined;
    await fs.rm(file, { force: true });
    return await listen(address);
  } finally {
    await fs.rm(mark, { force: true });
  }
}
