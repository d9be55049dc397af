/**
 * A data directory shared by many embedded engines: the files of one image (a gzip tarball from
 * `EmbeddedPostgres.dump()`) are unpacked once per process into one SharedArrayBuffer, and every
 * engine started from it reads them in place. An engine that writes a file gets its own copy of
 * that file (copy on write), so engines never see each other's writes and the image never
 * changes. N demo workers hold the demo data once instead of N times, and start without
 * unpacking anything.
 *
 * The image is built in the event-loop thread (`unpackImage`, gunzip off the loop); `ImageFs`
 * runs inside an engine's worker thread, behind PGlite's custom-filesystem interface
 * (`@electric-sql/pglite/basefs`), whose calls are synchronous.
 */
import zlib from 'node:zlib';
import { BaseFilesystem, type FsStats } from '@electric-sql/pglite/basefs';

/** One file or directory of an image; a file's bytes are `buffer[offset, offset + size)`. */
export interface ImageEntry {
  readonly path: string;
  readonly dir: boolean;
  readonly mode: number;
  readonly mtime: number;
  readonly offset: number;
  readonly size: number;
}

/** The files of a data directory, ready to be sent to any number of worker threads. */
export interface DataImage {
  readonly buffer: SharedArrayBuffer;
  readonly entries: readonly ImageEntry[];
}

export class ImageError extends Error {
  readonly code = 'EMBEDDED_ERR_IMAGE';
  constructor(message: string) {
    super(`embedded image: ${message}`);
    this.name = 'ImageError';
  }
}

const BLOCK = 512;
const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;

function field(block: Uint8Array, at: number, len: number): string {
  const raw = block.subarray(at, at + len);
  const end = raw.indexOf(0);
  return Buffer.from(end < 0 ? raw : raw.subarray(0, end)).toString('utf8');
}

function octal(block: Uint8Array, at: number, len: number, what: string): number {
  const text = field(block, at, len).trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) throw new ImageError(`bad ${what} field ${JSON.stringify(text)}`);
  return parseInt(text, 8);
}

/** The path of an entry relative to the data directory, as `a/b/c` (no leading slash, no dots). */
function cleanPath(name: string): string {
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.some((p) => p === '..')) throw new ImageError(`entry ${JSON.stringify(name)} leaves the data directory`);
  return parts.join('/');
}

/**
 * Unpack a gzip tarball (ustar, regular files and directories only, as `dump()` writes it) into one
 * shared buffer, streaming: the tar is never whole in memory, and the buffer is sized from the gzip
 * trailer (the uncompressed size), so nothing is copied twice. A damaged or truncated image is
 * refused, never half loaded.
 */
export async function unpackImage(tarball: Uint8Array): Promise<DataImage> {
  if (tarball.length < 18 || tarball[0] !== 0x1f || tarball[1] !== 0x8b) throw new ImageError('not a gzip stream');
  // ISIZE: the uncompressed length mod 2^32, an upper bound of the file bytes for images < 4 GB
  const isize = Buffer.from(tarball.buffer, tarball.byteOffset, tarball.byteLength).readUInt32LE(tarball.length - 4);
  // deflate expands at most ~1032:1: a damaged trailer must not make us reserve gigabytes
  if (isize > tarball.length * 1032) throw new ImageError('its gzip trailer declares an impossible size');
  let buffer: SharedArrayBuffer;
  try {
    buffer = new SharedArrayBuffer(isize);
  } catch (err) {
    throw new ImageError(`cannot reserve ${isize} bytes (${(err as Error).message})`);
  }
  const bytes = new Uint8Array(buffer);
  const entries: ImageEntry[] = [];
  /** what each path is, so that a file never sits inside a file and nothing is there twice */
  const kinds = new Map<string, 'file' | 'dir' | 'implied'>();
  const place = (path: string, dir: boolean): void => {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const parent = parts.slice(0, i).join('/');
      const kind = kinds.get(parent);
      if (kind === 'file') throw new ImageError(`entry ${JSON.stringify(path)} is inside the file ${JSON.stringify(parent)}`);
      if (!kind) kinds.set(parent, 'implied');
    }
    const kind = kinds.get(path);
    if (kind === 'file' || kind === 'dir' || (kind === 'implied' && !dir)) throw new ImageError(`entry ${JSON.stringify(path)} is there twice`);
    kinds.set(path, dir ? 'dir' : 'file');
  };
  const header = new Uint8Array(BLOCK);
  let headerFill = 0;
  /** bytes of the current entry still to copy, then padding to skip */
  let dataLeft = 0;
  let padLeft = 0;
  let offset = 0;
  let seen = 0;
  let ended = false;

  const onHeader = (): void => {
    if (header.every((b) => b === 0)) {
      ended = true;
      return;
    }
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : header[i]!;
    if (sum !== octal(header, 148, 8, 'checksum')) throw new ImageError(`header checksum mismatch at byte ${seen}`);
    const type = String.fromCharCode(header[156]!);
    const name = field(header, 0, 100);
    const prefix = field(header, 345, 131);
    const path = cleanPath(prefix ? `${prefix}/${name}` : name);
    const size = octal(header, 124, 12, 'size');
    if (type !== '0' && type !== '\0' && type !== '5') throw new ImageError(`entry ${JSON.stringify(path)} has unsupported type ${JSON.stringify(type)}`);
    const dir = type === '5';
    if (dir && size !== 0) throw new ImageError(`directory ${JSON.stringify(path)} has a size`);
    if (offset + size > bytes.length) throw new ImageError(`entry ${JSON.stringify(path)} runs past the size the image declares`);
    if (path !== '') place(path, dir);
    if (path !== '') entries.push({ path, dir, mode: octal(header, 100, 8, 'mode') & 0o7777, mtime: octal(header, 136, 12, 'mtime') * 1000, offset, size });
    dataLeft = size;
    padLeft = (BLOCK - (size % BLOCK)) % BLOCK;
  };

  const gunzip = zlib.createGunzip({ chunkSize: 1 << 20 });
  gunzip.end(tarball);
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) {
      let at = 0;
      seen += chunk.length;
      if (seen > isize) throw new ImageError('longer than its gzip trailer declares');
      while (at < chunk.length && !ended) {
        if (dataLeft > 0) {
          const n = Math.min(dataLeft, chunk.length - at);
          bytes.set(chunk.subarray(at, at + n), offset);
          offset += n;
          dataLeft -= n;
          at += n;
        } else if (padLeft > 0) {
          const n = Math.min(padLeft, chunk.length - at);
          padLeft -= n;
          at += n;
        } else {
          const n = Math.min(BLOCK - headerFill, chunk.length - at);
          header.set(chunk.subarray(at, at + n), headerFill);
          headerFill += n;
          at += n;
          if (headerFill === BLOCK) {
            headerFill = 0;
            onHeader();
          }
        }
      }
    }
  } catch (err) {
    gunzip.destroy();
    if (err instanceof ImageError) throw err;
    throw new ImageError(`not a readable gzip stream (${(err as Error).message})`);
  }
  if (!ended) throw new ImageError('truncated (no end-of-archive block)');
  if (seen !== isize) throw new ImageError(`${seen} bytes where its gzip trailer declares ${isize}`);
  if (!entries.some((e) => e.path === 'PG_VERSION' && !e.dir)) throw new ImageError('no PG_VERSION: not a data directory');
  return { buffer, entries };
}

// ---------------------------------------------------------------------------------------------
// The filesystem, inside an engine's thread

interface DirNode {
  readonly kind: 'dir';
  mode: number;
  mtime: number;
  readonly children: Map<string, Node>;
}

interface FileNode {
  readonly kind: 'file';
  mode: number;
  mtime: number;
  size: number;
  /** the image's bytes, read in place (never written) */
  shared: Uint8Array | undefined;
  /** this engine's own copy, once written; its length is the capacity */
  own: Uint8Array | undefined;
}

type Node = DirNode | FileNode;

/** An error PGlite's filesystem layer turns into an errno (`code` is the errno number). */
class FsError extends Error {
  readonly code: number;
  constructor(name: keyof typeof ERRNO, path: string) {
    super(`${name}: ${path}`);
    this.code = ERRNO[name];
  }
}

// emscripten's errno numbers (musl), as PGlite's own filesystems use them
const ERRNO = { EBADF: 8, EEXIST: 20, EINVAL: 28, EISDIR: 31, ENOENT: 44, ENOTDIR: 54, ENOTEMPTY: 55 } as const;

/** Capacity for a file that must hold `n` bytes: room to grow without a copy per write. */
function capacityFor(n: number, current: number): number {
  const grown = Math.max(n, current + (current >> 1), 8192);
  return grown > 1 << 20 ? Math.ceil(grown / (1 << 20)) * (1 << 20) : grown;
}

export class ImageFs extends BaseFilesystem {
  private readonly root: DirNode;
  private readonly fds = new Map<number, FileNode>();
  private nextFd = 1;

  constructor(image: DataImage) {
    super();
    const now = Date.now();
    this.root = { kind: 'dir', mode: S_IFDIR | 0o700, mtime: now, children: new Map() };
    const bytes = new Uint8Array(image.buffer);
    for (const e of image.entries) {
      const parts = e.path.split('/');
      const name = parts.pop()!;
      const parent = this.dirAt(parts, true);
      if (e.dir) {
        const existing = parent.children.get(name);
        if (existing?.kind === 'dir') {
          existing.mode = S_IFDIR | e.mode;
          existing.mtime = e.mtime;
        } else parent.children.set(name, { kind: 'dir', mode: S_IFDIR | e.mode, mtime: e.mtime, children: new Map() });
      } else {
        parent.children.set(name, { kind: 'file', mode: S_IFREG | e.mode, mtime: e.mtime, size: e.size, shared: bytes.subarray(e.offset, e.offset + e.size), own: undefined });
      }
    }
  }

  /** Bytes this engine holds of its own (files it wrote), for tests and metrics. */
  ownBytes(): number {
    let total = 0;
    const walk = (d: DirNode): void => {
      for (const n of d.children.values()) {
        if (n.kind === 'dir') walk(n);
        else total += n.own?.length ?? 0;
      }
    };
    walk(this.root);
    return total;
  }

  private static parts(path: string): string[] {
    return path.split('/').filter((p) => p !== '' && p !== '.');
  }

  private dirAt(parts: readonly string[], create = false): DirNode {
    let node: DirNode = this.root;
    for (const p of parts) {
      let next = node.children.get(p);
      if (!next && create) {
        next = { kind: 'dir', mode: S_IFDIR | 0o700, mtime: Date.now(), children: new Map() };
        node.children.set(p, next);
      }
      if (!next) throw new FsError('ENOENT', parts.join('/'));
      if (next.kind !== 'dir') throw new FsError('ENOTDIR', parts.join('/'));
      node = next;
    }
    return node;
  }

  private nodeAt(path: string): Node {
    const parts = ImageFs.parts(path);
    if (parts.length === 0) return this.root;
    const name = parts.pop()!;
    const node = this.dirAt(parts).children.get(name);
    if (!node) throw new FsError('ENOENT', path);
    return node;
  }

  private fileAt(path: string): FileNode {
    const node = this.nodeAt(path);
    if (node.kind !== 'file') throw new FsError('EISDIR', path);
    return node;
  }

  /** The parent directory of `path` and the last name in it. */
  private parentOf(path: string): [DirNode, string] {
    const parts = ImageFs.parts(path);
    const name = parts.pop();
    if (name === undefined) throw new FsError('EINVAL', path);
    return [this.dirAt(parts), name];
  }

  private fd(fd: number): FileNode {
    const node = this.fds.get(fd);
    if (!node) throw new FsError('EBADF', String(fd));
    return node;
  }

  /** Make the file this engine's own, with room for `need` bytes. */
  private own(node: FileNode, need: number): Uint8Array {
    const current = node.own;
    if (current && current.length >= need) return current;
    // the first copy of an image file is exact (most are written in place, never grown)
    const next = new Uint8Array(!current && need <= node.size ? node.size : capacityFor(need, current?.length ?? node.size));
    const from = current ?? node.shared;
    if (from) next.set(from.subarray(0, node.size));
    node.own = next;
    node.shared = undefined;
    return next;
  }

  private static stats(node: Node): FsStats {
    const size = node.kind === 'file' ? node.size : 4096;
    return { dev: 0, ino: 0, mode: node.mode, nlink: 1, uid: 0, gid: 0, rdev: 0, size, blksize: 4096, blocks: Math.ceil(size / 512), atime: node.mtime, mtime: node.mtime, ctime: node.mtime };
  }

  chmod(path: string, mode: number): void {
    const node = this.nodeAt(path);
    node.mode = (node.mode & ~0o7777) | (mode & 0o7777);
  }

  close(fd: number): void {
    if (!this.fds.delete(fd)) throw new FsError('EBADF', String(fd));
  }

  fstat(fd: number): FsStats {
    return ImageFs.stats(this.fd(fd));
  }

  lstat(path: string): FsStats {
    return ImageFs.stats(this.nodeAt(path));
  }

  mkdir(path: string, options?: { recursive?: boolean; mode?: number }): void {
    const parts = ImageFs.parts(path);
    const name = parts.pop();
    if (name === undefined) {
      if (options?.recursive) return;
      throw new FsError('EEXIST', path);
    }
    const parent = this.dirAt(parts, options?.recursive === true);
    const existing = parent.children.get(name);
    if (existing) {
      if (options?.recursive && existing.kind === 'dir') return;
      throw new FsError('EEXIST', path);
    }
    parent.children.set(name, { kind: 'dir', mode: S_IFDIR | ((options?.mode ?? 0o700) & 0o7777), mtime: Date.now(), children: new Map() });
  }

  open(path: string): number {
    const node = this.fileAt(path);
    const fd = this.nextFd++;
    this.fds.set(fd, node);
    return fd;
  }

  readdir(path: string): string[] {
    const node = this.nodeAt(path);
    if (node.kind !== 'dir') throw new FsError('ENOTDIR', path);
    return [...node.children.keys()];
  }

  read(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number {
    const node = this.fd(fd);
    const n = Math.max(0, Math.min(length, node.size - position));
    if (n === 0) return 0;
    const from = (node.own ?? node.shared)!;
    // PGlite passes the whole heap's view and an offset into it
    new Uint8Array(buffer.buffer, buffer.byteOffset + offset, n).set(from.subarray(position, position + n));
    return n;
  }

  rename(oldPath: string, newPath: string): void {
    const [from, oldName] = this.parentOf(oldPath);
    const node = from.children.get(oldName);
    if (!node) throw new FsError('ENOENT', oldPath);
    const [to, newName] = this.parentOf(newPath);
    const target = to.children.get(newName);
    if (target === node) return;
    if (target?.kind === 'dir') {
      if (node.kind !== 'dir') throw new FsError('EISDIR', newPath);
      if (target.children.size > 0) throw new FsError('ENOTEMPTY', newPath);
    } else if (target && node.kind === 'dir') throw new FsError('ENOTDIR', newPath);
    from.children.delete(oldName);
    to.children.set(newName, node);
  }

  rmdir(path: string): void {
    const [parent, name] = this.parentOf(path);
    const node = parent.children.get(name);
    if (!node) throw new FsError('ENOENT', path);
    if (node.kind !== 'dir') throw new FsError('ENOTDIR', path);
    if (node.children.size > 0) throw new FsError('ENOTEMPTY', path);
    parent.children.delete(name);
  }

  truncate(path: string, len = 0): void {
    const node = this.fileAt(path);
    this.resize(node, len);
  }

  private resize(node: FileNode, len: number): void {
    if (len < 0) throw new FsError('EINVAL', String(len));
    if (len <= node.size) {
      if (node.own) node.own.fill(0, len, node.size);
      else if (node.shared) node.shared = node.shared.subarray(0, len);
      if (len === 0) {
        node.own = undefined;
        node.shared = undefined;
      }
    } else {
      // grown bytes read as zeros: a fresh buffer is zeroed, and a shrunk one was zeroed above
      this.own(node, len);
    }
    node.size = len;
    node.mtime = Date.now();
  }

  unlink(path: string): void {
    const [parent, name] = this.parentOf(path);
    const node = parent.children.get(name);
    if (!node) throw new FsError('ENOENT', path);
    if (node.kind === 'dir') throw new FsError('EISDIR', path);
    // open descriptors keep the file (POSIX): they hold the node, not the name
    parent.children.delete(name);
  }

  utimes(path: string, _atime: number, mtime: number): void {
    this.nodeAt(path).mtime = mtime;
  }

  writeFile(path: string, data: string | Uint8Array, options?: { encoding?: string; mode?: number; flag?: string }): void {
    const [parent, name] = this.parentOf(path);
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    let node = parent.children.get(name);
    if (node?.kind === 'dir') throw new FsError('EISDIR', path);
    if (!node) {
      node = { kind: 'file', mode: S_IFREG | ((options?.mode ?? 0o600) & 0o7777), mtime: Date.now(), size: 0, shared: undefined, own: undefined };
      parent.children.set(name, node);
    }
    node.own = undefined;
    node.shared = undefined;
    node.size = 0;
    if (bytes.length > 0) {
      this.own(node, bytes.length).set(bytes);
      node.size = bytes.length;
    }
    node.mtime = Date.now();
  }

  write(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number {
    const node = this.fd(fd);
    if (length === 0) return 0;
    // PGlite passes the heap's ArrayBuffer here (typed as a Uint8Array); accept either
    const source = buffer instanceof Uint8Array ? new Uint8Array(buffer.buffer, buffer.byteOffset + offset, length) : new Uint8Array(buffer as ArrayBufferLike, offset, length);
    const end = position + length;
    const target = this.own(node, end);
    // a write past the end leaves a hole that reads as zeros (the buffer beyond size is zeroed)
    target.set(source, position);
    if (end > node.size) node.size = end;
    node.mtime = Date.now();
    return length;
  }
}
