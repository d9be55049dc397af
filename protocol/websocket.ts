/**
 * A WebSocket (the `ws` package's, or anything shaped like it) as the session's transport: one
 * frame per binary message; text messages are refused; messages that arrive before the session
 * subscribes are kept for it; an unresponsive peer (close code 4000) is terminated rather than
 * waited for; the sends of one tick are corked into one write on the socket. Structurally
 * typed, so protocol/ imports nothing but Node built-ins.
 */
import { CloseCode } from './errors.js';
import type { Transport } from './transport.js';

/** the socket under a WebSocket, as far as writes go (the `ws` package keeps it as `_socket`) */
export interface CorkableSocket {
  cork(): void;
  uncork(): void;
}

export interface WebSocketLike {
  send(data: Uint8Array, options: { binary: boolean }): void;
  /** ws's underlying (TLS) socket; when present, the sends of one tick are written together */
  readonly _socket?: CorkableSocket | null;
  close(code?: number, reason?: string): void;
  terminate(): void;
  on(event: 'message', listener: (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => void): unknown;
  on(event: 'close', listener: (code: number, reason: Buffer) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/** A close reason fits a WebSocket close frame (123 bytes of UTF-8). */
function clampReason(reason: string): string {
  let r = reason;
  while (Buffer.byteLength(r) > 123) r = r.slice(0, -1);
  return r;
}

export function webSocketTransport(ws: WebSocketLike): Transport {
  const early: Uint8Array[] = [];
  let onMsg: ((b: Uint8Array) => void) | null = null;
  let closed: [number, string] | null = null;
  let onCl: ((code: number, reason: string) => void) | null = null;
  ws.on('message', (data, isBinary) => {
    if (!isBinary) {
      ws.close(1003, 'binary frames only');
      return;
    }
    const buf = Array.isArray(data) ? Buffer.concat(data) : data instanceof ArrayBuffer ? Buffer.from(data) : data;
    if (onMsg) onMsg(buf);
    else early.push(buf);
  });
  ws.on('close', (code, reason) => {
    closed = [code, reason.toString()];
    onCl?.(code, reason.toString());
  });
  ws.on('error', () => {
    /* 'close' follows */
  });
  // The frames a tick sends (a small answer is COLUMNS, ROWS and END; many streams answer in the
  // same tick) are corked into one write: one TLS write and one syscall instead of one each.
  // ws's own cork/uncork pairs nest inside ours; the socket flushes when the tick's work is done.
  let corked: CorkableSocket | null = null;
  const uncork = (): void => {
    const s = corked;
    corked = null;
    s?.uncork();
  };
  return {
    send: (bytes) => {
      const socket = ws._socket;
      if (corked === null && socket && typeof socket.cork === 'function') {
        socket.cork();
        corked = socket;
        process.nextTick(uncork);
      }
      ws.send(bytes, { binary: true });
    },
    close: (code, reason) => (code === CloseCode.UNRESPONSIVE ? ws.terminate() : ws.close(code, clampReason(reason))),
    onMessage: (cb) => {
      onMsg = cb;
      for (const b of early.splice(0)) cb(b);
    },
    onClose: (cb) => {
      onCl = cb;
      if (closed) cb(closed[0], closed[1]);
    },
  };
}
