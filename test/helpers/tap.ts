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

/** An API answer as test/helpers/server.ts `api` gives it (status, headers, parsed body, text). */
interface Answer {
  readonly status: number;
  readonly text: string;
  readonly headers: Headers;
  readonly body: { error?: { code: string; message: string; details?: Record<string, unknown> } };
}

/**
 * `r` is a statement the shutdown stopped after its drain: 503 service_unavailable with
 * Retry-After, answered by the query path (audited) and not charged. Returns its audit event id.
 */
export function expectShutdownStop(t: TapTest, r: Answer): unknown {
  t.equal(r.status, 503, r.text);
  t.equal(r.body.error?.code, 'service_unavailable');
  t.equal(r.headers.get('retry-after'), '1', 'Retry-After');
  t.match(r.body.error?.message, /shutting down.*not charged/);
  const auditId = r.body.error?.details?.['audit_event_id'];
  t.type(auditId, 'string', 'answered by the query path (audited), not the 503 of a request that came after the close');
  t.notOk(r.body.error?.details && 'cost_cents' in r.body.error.details, 'not charged');
  return auditId;
}
