/**
 * numeric and int8 values arrive as text, and are answered as JSON numbers when exact. Whether one
 * is exact was decided with `text.replace(/0+$/, '')`, which backtracks over every run of zeros
 * not at the end: quadratic in the run's length. A relay (customer-controlled) could send a
 * numeric of "1." and a million zeros and a "1" in one tunnel frame, about ten minutes of the
 * control plane's event loop for everyone; through any relay or `postgres` connection, an agent's
 * `SELECT ('1.' || repeat('0', 16000) || '1')::numeric FROM t LIMIT 20` (a value PostgreSQL
 * itself makes) held every request 3 s. It is linear now; the subtest's own timeout catches a
 * regression (300,000 zeros took about a minute).
 */
import t from 'tap';
import { toJsonValue } from '../../control-plane/results/json-values.js';

const NUMERIC = 1700;
const INT8 = 20;

t.test('exact decimals become numbers, others stay text', async (t) => {
  t.equal(toJsonValue('12.50', NUMERIC), 12.5);
  t.equal(toJsonValue('12.', NUMERIC), 12);
  t.equal(toJsonValue('-0012.5000', NUMERIC), -12.5);
  t.equal(toJsonValue('100', NUMERIC), 100);
  t.equal(toJsonValue('9007199254740993', INT8), '9007199254740993', 'past 2^53: not exact, kept as text');
  t.equal(toJsonValue('0.1000000000000000055511151231257827', NUMERIC), '0.1000000000000000055511151231257827');
  t.equal(toJsonValue('NaN', NUMERIC), 'NaN');
});

t.test('a numeric with a long run of zeros inside is decided in linear time', { timeout: 20_000 }, async (t) => {
  const zeros = '0'.repeat(300_000);
  t.equal(toJsonValue(`1.${zeros}1`, NUMERIC), `1.${zeros}1`, 'not exact as a double: kept as text');
  t.equal(toJsonValue(`12.5${zeros}`, NUMERIC), 12.5, 'trailing zeros are still dropped');
  t.equal(toJsonValue(`${'0'.repeat(300_000)}7.25`, NUMERIC), 7.25, 'and leading ones');
});
