/**
 * Requests the app makes to itself (fastify inject: the hosted MCP server's tool calls) have no
 * socket that closes when the one who asked leaves. The in-process caller registers the signal
 * that stands for its own client under a random token, sent in the {@link IN_PROCESS_CALL_HEADER}
 * header of the injected request; routes that stop their work when their client leaves (a query,
 * a schema listing) follow that signal as well as their own connection (`whenCallerLeaves`). A
 * token nobody registered (sent from outside) names nothing.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

export const IN_PROCESS_CALL_HEADER = 'x-svc-in-process-call';

const callers = new Map<string, AbortSignal>();

/**
 * Headers for one injected request standing for a client whose leaving `signal` tells, and the
 * release to call once its answer is in (the token is forgotten then).
 */
export function inProcessCall(signal: AbortSignal): { readonly headers: Record<string, string>; release(): void } {
  const token = randomBytes(16).toString('hex');
  callers.set(token, signal);
  return { headers: { [IN_PROCESS_CALL_HEADER]: token }, release: () => void callers.delete(token) };
}

/** how many in-process calls are registered (tests: none is left behind) */
export function inProcessCalls(): number {
  return callers.size;
}

/**
 * Calls `leave` once when the request's client goes before its answer is sent: its connection
 * closes, or (an in-process call) the signal its caller registered aborts. Returns the cleanup to
 * call when the work is done.
 */
export function whenCallerLeaves(req: FastifyRequest, reply: FastifyReply, leave: () => void): () => void {
  let left = false;
  const once = (): void => {
    if (left || reply.raw.writableFinished) return;
    left = true;
    leave();
  };
  reply.raw.once('close', once);
  // gone already (while auth or the handler awaited before watching): its 'close' has been emitted
  if (reply.raw.destroyed) once();
  const token = req.headers[IN_PROCESS_CALL_HEADER];
  const signal = typeof token === 'string' ? callers.get(token) : undefined;
  if (signal?.aborted) once();
  else signal?.addEventListener('abort', once, { once: true });
  return () => {
    reply.raw.off('close', once);
    signal?.removeEventListener('abort', once);
  };
}
