/**
 * Column names as agents receive them: duplicates get `_2`, `_3`, … without colliding with names
 * the result already has; a hostile column list (a relay or database can send 16,000 × `a`
 * beside `a_2` … `a_16001`) is named in linear time (it was quadratic: ~16 s of a blocked event
 * loop per query; the subtest's own timeout catches a regression).
 */
import t from 'tap';
import { uniqueColumnNames } from '../../control-plane/results/rows.js';

t.test('duplicates are numbered around the names already taken', async (t) => {
  t.same(uniqueColumnNames(['id', 'name', 'id', 'id']), ['id', 'name', 'id_2', 'id_3']);
  t.same(uniqueColumnNames(['a', 'a_2', 'a', 'a']), ['a', 'a_2', 'a_3', 'a_4']);
  t.same(uniqueColumnNames(['a', 'a', 'a_2']), ['a', 'a_3', 'a_2'], 'a later a_2 keeps its own name');
  t.same(uniqueColumnNames([]), []);
});

t.test('a hostile list of 40,000 columns is named quickly and without collisions', { timeout: 20_000 }, async (t) => {
  const n = 20_000;
  const names = [...Array.from({ length: n }, () => 'a'), ...Array.from({ length: n }, (_, i) => `a_${i + 2}`)];
  const out = uniqueColumnNames(names);
  t.equal(out.length, names.length);
  t.equal(new Set(out).size, out.length, 'all distinct');
  t.same(out.slice(n), names.slice(n), 'the names the result already has are kept');
  t.equal(out[1], `a_${n + 2}`, 'the first duplicate takes the first free suffix');
});
