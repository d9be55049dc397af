/** A store whose rate-bucket statements a test watches or holds (tests of http/rate-limit.ts StoreBuckets). */
import type { Store } from '../../control-plane/store/index.js';
import type { QueryOptions, Row } from '../../control-plane/store/types.js';

/** the text of StoreBuckets' look at a bucket (its admit/wait), not its take */
const PEEK = /^SELECT .* FROM rate_buckets b WHERE key = \$1$/s;

/** Runs a statement (`run`), and may do something before or after. */
export type Around = <T>(run: () => Promise<T[]>) => Promise<T[]>;

const asIs: Around = (run) => run();

/**
 * `store` with its looks at a bucket through `peek` and its other statements through `other`;
 * `kind: 'postgres'` for a RefusalBudget to keep its buckets in it, as on a shared store.
 */
export function storeAround(store: Store, o: { readonly kind?: Store['kind']; readonly peek?: Around; readonly other?: Around }): Store {
  const { peek = asIs, other = asIs } = o;
  return {
    ...store,
    kind: o.kind ?? store.kind,
    query: <T extends object = Row>(text: string, params?: readonly unknown[], q?: QueryOptions) => (PEEK.test(text) ? peek : other)(() => store.query<T>(text, params, q)),
  };
}

/** `store` counting its looks at a bucket (`peeks()`). */
export function countingPeeks(store: Store, kind?: Store['kind']): { readonly store: Store; peeks(): number } {
  let n = 0;
  const counted = storeAround(store, {
    ...(kind ? { kind } : {}),
    peek: (run) => {
      n++;
      return run();
    },
  });
  return { store: counted, peeks: () => n };
}
