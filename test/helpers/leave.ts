/**
 * An agent that sends one request and then leaves: its own socket (node:http, no agent), closed
 * when it leaves, so nothing of the test's client outlives the request. (Node's fetch, aborted,
 * opens a spare keep-alive connection it keeps for the server's keep-alive hint, 70 s with
 * Fastify's 72 s, which a server's close then waited for.)
 */
import http from 'node:http';

export interface Leaving {
  /** closes the request's connection before its answer */
  leave(): void;
  /** settles once the connection is closed: the status when an answer came first, else undefined */
  readonly done: Promise<number | undefined>;
}

export function sendThenLeave(base: string, method: 'GET' | 'POST', path: string, key: string, body?: unknown, headers: Record<string, string> = {}): Leaving {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const req = http.request(`${base}${path}`, {
    method,
    agent: false,
    headers: { ...headers, authorization: `Bearer ${key}`, ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) },
  });
  const done = new Promise<number | undefined>((resolve) => {
    let status: number | undefined;
    req.on('response', (res) => {
      status = res.statusCode;
      res.resume();
    });
    req.on('error', () => undefined); // the socket we closed
    req.on('close', () => resolve(status));
  });
  req.end(payload);
  return { leave: () => void req.destroy(), done };
}
