/**
 * Timers shared by the control plane's parts.
 */

/**
 * Resolves after `ms`, or as soon as `signal` aborts (at once if it has already), its timer
 * cleared then (a timer left behind holds the process open) and its listener removed (a
 * long-lived signal would otherwise keep one per call).
 */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  // an aborted signal fires no more 'abort' events: it would otherwise wait its whole time
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
