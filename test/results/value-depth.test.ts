/**
 * How deep a value of a row may nest (results/json-values.ts): arrays and objects count a level
 * each, dates and bytes none, and a row with a value past the bound is the statement's 400
 * value_too_deep before the row is built (jsonRow), whatever the engine.
 */
import t from 'tap';
import { MAX_VALUE_DEPTH, nestedDeeperThan } from '../../control-plane/results/json-values.js';
import { jsonRow } from '../../control-plane/results/rows.js';

const nested = (depth: number, leaf: unknown = 1, asObject = false): unknown => {
  let v = leaf;
  for (let i = 0; i < depth; i++) v = asObject ? { k: v } : [v];
  return v;
};

t.test('levels are arrays and objects, counted along the deepest path', async (t) => {
  t.notOk(nestedDeeperThan('x'), 'a scalar');
  t.notOk(nestedDeeperThan(null));
  t.notOk(nestedDeeperThan(new Date(0), 0), 'a date is a scalar');
  t.notOk(nestedDeeperThan(Buffer.from([1, 2]), 0), 'bytes are a scalar');
  t.notOk(nestedDeeperThan([], 1));
  t.ok(nestedDeeperThan([], 0));
  t.notOk(nestedDeeperThan(nested(MAX_VALUE_DEPTH)), 'at the bound');
  t.ok(nestedDeeperThan(nested(MAX_VALUE_DEPTH + 1)), 'one past it');
  t.ok(nestedDeeperThan(nested(MAX_VALUE_DEPTH + 1, 1, true)), 'objects too');
  // the deep path is the last of many keys and elements
  const wide = { ...Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, [i]])), last: [1, 2, nested(MAX_VALUE_DEPTH)] };
  t.ok(nestedDeeperThan(wide), 'found behind wide siblings');
  t.notOk(nestedDeeperThan({ a: [1, [2]], b: { c: new Date(0) } }, 3));
  t.ok(nestedDeeperThan(nested(100_000)), 'a hostile depth is walked without recursion');
});

t.test('a row with a value past the bound is refused before it is built', async (t) => {
  const columns = [{ name: 'doc', type_oid: 3802 }];
  t.same(jsonRow(columns, [nested(3)]), { doc: [[[1]]] });
  t.throws(() => jsonRow(columns, [nested(MAX_VALUE_DEPTH + 1)]), { code: 'invalid_sql', details: { reason: 'value_too_deep', max_depth: MAX_VALUE_DEPTH } });
});
