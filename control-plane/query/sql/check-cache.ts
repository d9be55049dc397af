/**
 * Checked statements by what decides them: the target, the connection's scopes and the text. The
 * check is a pure function of those three (the policy is derived from the target and the scopes),
 * so a statement an agent sends again under the same scopes is not parsed, checked and rewritten
 * again. Only statements that passed are kept; a refusal is checked again (it is cheap to refuse,
 * and counted against the refusal budget either way). Whether the connection may still run it
 * (revoked, expired, out of money) is decided on every query, never here.
 *
 * Bounded by entries and by characters held, least recently used first out.
 */
export class CheckCache<V extends { readonly sql: string }> {
  private readonly entries = new Map<string, { readonly value: V; readonly size: number }>();
  private chars = 0;
  private hitCount = 0;
  private missCount = 0;

  constructor(
    readonly maxEntries = 2_000,
    readonly maxChars = 8_000_000,
  ) {}

  /**
   * The key of one check: target, scopes (in any order) and statement text, as JSON: a scope may
   * hold any character (a filter's value), so no separator character could keep two different
   * lists apart.
   */
  static key(targetId: string, scopes: readonly string[], sql: string): string {
    return JSON.stringify([targetId, [...scopes].sort(), sql]);
  }

  get(key: string): V | undefined {
    const e = this.entries.get(key);
    if (!e) {
      this.missCount++;
      return undefined;
    }
    this.hitCount++;
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.value;
  }

  set(key: string, value: V): void {
    const size = key.length + value.sql.length;
    if (size > this.maxChars) return;
    const old = this.entries.get(key);
    if (old) {
      this.entries.delete(key);
      this.chars -= old.size;
    }
    this.entries.set(key, { value, size });
    this.chars += size;
    while (this.entries.size > this.maxEntries || this.chars > this.maxChars) {
      const oldest = this.entries.entries().next();
      if (oldest.done) break;
      this.entries.delete(oldest.value[0]);
      this.chars -= oldest.value[1].size;
    }
  }

  /** hits, misses and what it holds (tests, metrics) */
  stats(): { hits: number; misses: number; entries: number; chars: number } {
    return { hits: this.hitCount, misses: this.missCount, entries: this.entries.size, chars: this.chars };
  }
}
