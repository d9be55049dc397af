/**
 * `load`, run on the first call and its result kept for every later one, unless it fails: a
 * failed load is forgotten (its callers get its error) and the next call runs it again. Calls
 * made while a load runs share it. For modules and compiled code loaded on first use: a failure
 * that passes (a file briefly unreadable, memory short) must not fail every later use until the
 * process restarts.
 */
export function keptOnceLoaded<T>(load: () => Promise<T>): () => Promise<T> {
  let kept: Promise<T> | undefined;
  return () =>
    (kept ??= load().catch((err: unknown) => {
      kept = undefined;
      throw err;
    }));
}
