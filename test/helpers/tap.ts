/** The type of the `t` a tap subtest callback receives (tap's last `test` overload is `(cb)`). */
import type t from 'tap';

export type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];

/** Polls `check` every 50 ms until it holds (true) or `ms` have passed (false). */
export async function eventually(check: () => Promise<boolean>, ms = 3000): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** {@link eventually}, failing with `timed out waiting: <what>` when `cond` never holds within `ms`. */
export async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  if (!(await eventually(async () => cond(), ms))) throw new Error(`timed out waiting: ${what}`);
}
