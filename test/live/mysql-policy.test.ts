/**
 * The MySQL statement checker on its own (no database): hostile statements are refused, allowed
 * ones are rewritten so every table reference reads only in-scope rows (a filtered table becomes
 * an in-scope derived table, an unfiltered one is named exactly as scoped).
 */
import t from 'tap';
import type { ParsedScopes } from '../../control-plane/catalogue/index.js';
import { checkMysql } from '../../control-plane/live/mysql/check.js';
import { mysqlPolicy } from '../../control-plane/live/mysql/policy.js';
import { lexMysql } from '../../control-plane/live/mysql/lexer.js';

const lexMysqlDepth = (sql: string): number => lexMysql(sql).specialDepth;

const scopes = (read: string[], filters: ParsedScopes['filters'] = []): ParsedScopes => ({ read: new Set(read), periods: [], relay: undefined, filters, normalized: [] });
const policy = mysqlPolicy(scopes(['orders', 'shop.customers'], [{ table: 'shop.customers', column: 'tenant', value: "o'brien" }]));

const refused = (sql: string): { code: string; message: string; reason: string } => {
  try {
    checkMysql(sql, policy);
  } catch (err) {
    const e = err as { code: string; message: string; detail: { reason: string } };
    return { code: e.code, message: e.message, reason: e.detail?.reason };
  }
  throw new Error(`accepted: ${sql}`);
};

t.test('allowed statements are rewritten to in-scope tables: filtered ones to derived tables', async (t) => {
  const r = checkMysql('SELECT o.id, c.name FROM orders o JOIN customers c ON o.cid = c.id WHERE c.x > 1 ORDER BY o.id LIMIT 5', policy);
  t.same(r.tables, ['orders', 'shop.customers']);
  t.match(r.sql, /FROM `orders` AS `o`/, 'a table without filters is read as itself (its indexes serve the statement)');
  t.notMatch(r.sql, /SELECT \* FROM `orders`/, 'no derived table for it: MySQL would materialize it whole');
  t.match(r.sql, /\(SELECT \* FROM `shop`\.`customers` WHERE `tenant` = X'6f27627269656e' LIMIT 18446744073709551615\) AS `c`/, 'the filter value is a hex literal: no escaping to get wrong');
  const cte = checkMysql('WITH t AS (SELECT * FROM orders) SELECT count(*) AS n FROM t', policy);
  t.same(cte.tables, ['orders']);
  t.match(cte.sql, /WITH `t` AS \(SELECT \* FROM `orders` AS `orders`\)/);
  const bare = checkMysql('SELECT * FROM orders', policy);
  t.match(bare.sql, /^SELECT \* FROM `orders` AS `orders`$/, 'named exactly as scoped, aliased as written');
  const upper = checkMysql('SELECT * FROM ORDERS WHERE Orders.id = 1', policy);
  t.match(upper.sql, /FROM `orders` AS `orders`/, 'a folded spelling reads the scoped name');
  const shadow = checkMysql('WITH customers AS (SELECT 1 AS x) SELECT * FROM customers', policy);
  t.same(shadow.tables, [], 'a CTE name shadows a table');
  const sub = checkMysql('SELECT * FROM orders WHERE EXISTS (SELECT 1 FROM customers) AND id IN (SELECT cid FROM shop.customers)', policy);
  t.same(sub.tables, ['orders', 'shop.customers']);
  t.notMatch(sub.sql, /FROM `customers`/, 'references in subqueries are rewritten too');
  t.ok(checkMysql("SELECT DATE_FORMAT(created, '%Y-%m') AS m, COUNT(*), SUM(total) FROM orders GROUP BY m WITH ROLLUP", policy));
  t.ok(checkMysql('SELECT * FROM DUAL', policy));
});

t.test('parenthesised joins: rewritten while at most one of their tables has filters', async (t) => {
  const r = checkMysql('SELECT o.id, c.name FROM (orders o JOIN customers c ON o.cid = c.id)', policy);
  t.match(r.sql, /FROM \(`orders` AS `o` INNER JOIN \(SELECT \* FROM `shop`\.`customers` WHERE `tenant` = X'6f27627269656e' LIMIT 18446744073709551615\) AS `c` ON/);
  const both = mysqlPolicy(scopes(['orders', 'shop.customers'], [{ table: 'orders', column: 'tenant', value: 'a' }, { table: 'shop.customers', column: 'tenant', value: 'a' }]));
  // the checker cannot reproduce two derived tables inside parentheses: unsupported, not a violation
  const e = (() => {
    try {
      checkMysql('SELECT * FROM (orders JOIN customers ON 1 = 1)', both);
    } catch (err) {
      return err as { code: string; detail: { reason: string } };
    }
    throw new Error('accepted');
  })();
  t.equal(e.code, 'invalid_sql');
  t.equal(e.detail.reason, 'unsupported');
});

t.test('hostile statements are refused', async (t) => {
  const cases: [string, string, RegExp?][] = [
    ['SELECT 1; SELECT 2', 'scope_violation', /exactly one statement/],
    ['SELECT * FROM orders; DROP TABLE orders', 'scope_violation'],
    ['DELETE FROM orders', 'scope_violation', /only a single SELECT/],
    ['UPDATE orders SET x = 1', 'scope_violation'],
    ["SELECT * FROM orders INTO OUTFILE '/tmp/x'", 'scope_violation', /INTO/],
    ["SELECT * FROM orders INTO DUMPFILE '/tmp/x'", 'scope_violation', /INTO/],
    ['SELECT id FROM orders INTO @x', 'scope_violation', /INTO/],
    ["SELECT LOAD_FILE('/etc/passwd')", 'scope_violation', /LOAD_FILE/],
    ['SELECT SLEEP(10)', 'scope_violation', /SLEEP/],
    ['SELECT BENCHMARK(100000000, MD5(1))', 'scope_violation', /BENCHMARK/],
    ["SELECT GET_LOCK('x', 10)", 'scope_violation', /GET_LOCK/],
    ['SELECT DATABASE()', 'scope_violation'],
    ['SELECT @@version', 'scope_violation', /variables/],
    ['SELECT @a := 1', 'scope_violation', /assignments/],
    ['SELECT * FROM orders WHERE id = @x', 'scope_violation'],
    ['SELECT * FROM orders FOR UPDATE', 'scope_violation', /locking/],
    ['SELECT * FROM orders LOCK IN SHARE MODE', 'invalid_sql'],
    ['SELECT * FROM information_schema.tables', 'scope_violation', /system schema/],
    ['SELECT * FROM mysql.user', 'scope_violation', /system schema/],
    ['SELECT * FROM MySQL.user', 'scope_violation', /system schema/],
    ['SELECT * FROM `INFORMATION_SCHEMA`.`TABLES`', 'scope_violation', /system schema/],
    ['SELECT * FROM Performance_Schema.threads', 'scope_violation', /system schema/],
    ['SELECT * FROM SYS.processlist', 'scope_violation', /system schema/],
    ['SELECT * FROM orders JOIN MYSQL.user ON 1 = 1', 'scope_violation', /system schema/],
    ['SELECT * FROM performance_schema.threads', 'scope_violation'],
    ['SELECT (SELECT max(id) FROM mysql.user)', 'scope_violation'],
    ['SELECT * FROM orders WHERE id IN (SELECT id FROM secrets)', 'scope_violation', /not in this connection's scopes/],
    ['SELECT * FROM other.customers', 'scope_violation', /not in this connection's scopes/],
    ['SELECT * FROM shop.secrets', 'scope_violation', /not in this connection's scopes/],
    ['SELECT * FROM shop.orders x JOIN other.secrets y ON 1 = 1', 'scope_violation', /not in this connection's scopes/],
    ['SELECT a FROM orders UNION SELECT b FROM secrets', 'scope_violation'],
    ['SELECT * FROM orders /*! , mysql.user */', 'scope_violation', /executable comments/],
    ['SELECT /*+ MAX_EXECUTION_TIME(1000000) */ * FROM orders', 'scope_violation', /hints/],
    ["SELECT 'x\\' FROM mysql.user -- ' FROM secrets", 'scope_violation', /secrets/],
    ['SELECT db.func(1) FROM orders', 'scope_violation', /schema-qualified/],
    ['SELECT ? FROM orders', 'scope_violation'],
    ['SELECT * FROM orders WHERE id = :x', 'scope_violation'],
    ['SELECT * FROM orders PARTITION (p0)', 'invalid_sql'],
    ["SELECT EXTRACTVALUE('<a/>', '/a')", 'scope_violation'],
    ['SELECT * FROM', 'invalid_sql'],
    ['', 'invalid_sql'],
    ['SELECT 1\u0000', 'invalid_sql'],
  ];
  for (const [sql, code, message] of cases) {
    const r = refused(sql);
    t.equal(r.code, code, `${JSON.stringify(sql)}: ${code}`);
    if (message) t.match(r.message, message, `${JSON.stringify(sql)}: says why`);
  }
});

t.test('literals the parser reads differently from the server are refused: no SQL is smuggled through a rewritten escape', async (t) => {
  // node-sql-parser decodes \uXXXX (and \f) inside literals; MySQL/MariaDB read them as the letters.
  // Written back, \u0027 became a real quote and \u002f*! an executable comment the server ran.
  const smuggled: [string, RegExp][] = [
    [String.raw`SELECT 'a\u0027 \u002f*! , (SELECT group_concat(id) FROM secrets) AS other */ -- ' AS b FROM orders`, /read differently by the server/],
    [String.raw`SELECT 'x\u005c' AS b, 'y' AS c FROM orders`, /read differently by the server/],
    [String.raw`SELECT '\u0041' AS a FROM orders`, /read differently by the server/],
    [String.raw`SELECT '\f' AS a FROM orders`, /read differently by the server/],
    [String.raw`SELECT "q\u0022 , (SELECT 1 FROM secrets) AS x -- " AS b FROM orders`, /read differently by the server/],
    // `--1` is a comment to the parser, two minus signs to the server: the parser never saw the
    // subquery the server would run (the agent's trailing literals paid for the rewritten ones)
    [String.raw`SELECT 'a\u0027 --1, (SELECT group_concat(value) FROM secrets) AS x
, \u0027a' AS c FROM orders --'a','a'`, /read differently by the server/],
    ["SELECT 1 --1, (SELECT group_concat(value) FROM secrets) AS x\nFROM orders", /two minus signs/],
    ["SELECT 'a' --'b', (SELECT 1 FROM secrets) AS x\nFROM orders", /two minus signs/],
  ];
  for (const [sql, message] of smuggled) {
    const r = refused(sql);
    t.equal(r.code, 'invalid_sql', `${sql}: invalid_sql`);
    t.equal(r.reason, 'unsupported', `${sql}: unsupported`);
    t.match(r.message, message);
  }
  for (const sql of ['SELECT 1 /*M! , (SELECT 1 FROM secrets) */ AS x FROM orders', 'SELECT 1 /*m!100000 , 2 */ AS x FROM orders']) {
    t.equal(refused(sql).code, 'scope_violation', `MariaDB executable comment: ${sql}`);
  }
  // escapes both read the same way are fine
  const fine = checkMysql(String.raw`SELECT 'it\'s' AS a, 'a''b' AS b, "d\"q" AS c, 'x\\y' AS d, 'n\nl' AS e, 'p\%' AS f FROM orders WHERE 'x' = 'x'`, policy);
  t.match(fine.sql, /'it\\'s'/);
  const filtered = checkMysql("SELECT name FROM customers WHERE name = 'bob'", policy);
  t.match(filtered.sql, /X'6f27627269656e'/, "the scope's own filter literal is allowed");
});

t.test('nesting the parser takes exponential time to check is refused before parsing', async (t) => {
  // 16 nested CASTs (244 bytes) held the check for minutes; 7 nested CAST(… AS SIGNED) 28 s
  for (const sql of [
    `SELECT ${'CAST('.repeat(16)}id${' AS CHAR)'.repeat(16)} FROM orders`,
    `SELECT ${'CAST('.repeat(3)}id${' AS SIGNED)'.repeat(3)} AS x FROM orders`,
    'SELECT CAST(abs(CAST(abs(CAST(id AS SIGNED)) AS SIGNED)) AS SIGNED) AS x FROM orders',
    `SELECT ${'TRIM('.repeat(12)}name${')'.repeat(12)} AS x FROM orders`,
    `SELECT ${'('.repeat(65)}id${')'.repeat(65)} AS x FROM orders`,
  ]) {
    const started = performance.now();
    const r = refused(sql);
    t.equal(r.code, 'invalid_sql', `${sql.slice(0, 40)}…: invalid_sql`);
    t.equal(r.reason, 'too_complex');
    t.ok(performance.now() - started < 50, 'at once, before parsing');
  }
  t.match(refused(`SELECT ${'CAST('.repeat(3)}id${' AS SIGNED)'.repeat(3)} AS x FROM orders`).message, /nested at most 2 deep.*subquery or CTE/);
  // what is allowed still checks
  t.match(checkMysql('SELECT TRIM(CAST(id AS CHAR)) AS a, CAST(id AS SIGNED) + CAST(id AS SIGNED) AS b FROM orders', policy).sql, /TRIM/);
  t.match(checkMysql(`SELECT ${'abs('.repeat(60)}id${')'.repeat(60)} AS x FROM orders`, policy).sql, /abs/i);
  t.equal(lexMysqlDepth("SELECT CAST ('(' AS CHAR), `CAST(`, cast(trim(x))"), 2, "literals and identifiers do not count; a name's case does not matter");
});

t.test('the server lexer: literals as MySQL decodes them, comments as MySQL sees them', async (t) => {
  t.same(lexMysql(String.raw`SELECT 'a\u0027', 'it\'s', 'a''b', "d""q", 'x\\y', '\%\_', '\0\Z'`).literals, ['au0027', "it's", "a'b", 'd"q', 'x\\y', '\\%\\_', '\u0000\u001a']);
  t.equal(lexMysql('SELECT 1 -- x').comments, 1);
  t.equal(lexMysql('SELECT 1--1').comments, 0, '-- without a space is two minus signs');
  t.equal(lexMysql('SELECT 1--1').bareDashes, 1, 'and is counted as such');
  t.equal(lexMysql("SELECT '--1', `--x` -- c").bareDashes, 0, 'not inside literals, identifiers or comments');
  t.equal(lexMysql(String.raw`SELECT '\u0027', '\f', 'ok\n\%'`).undefinedEscapes, 2);
  t.equal(lexMysql("SELECT '-- not a comment', `#x` # yes").comments, 1);
  t.equal(lexMysql('SELECT /*! 1 */ 2 /*M! 3 */').comments, 2);
  t.equal(lexMysql("SELECT 'open").unterminated, true);
  t.equal(lexMysql('SELECT /* open').unterminated, true);
});

t.test('scopes: read:* and system schemas are refused; unqualified and qualified names resolve', async (t) => {
  t.throws(() => mysqlPolicy({ ...scopes([]), read: 'all' }), { code: 'invalid_scope' });
  t.throws(() => mysqlPolicy(scopes(['mysql.user'])), { code: 'invalid_scope' });
  const p = mysqlPolicy(scopes(['shop.orders']));
  t.same(checkMysql('SELECT * FROM orders', p).tables, ['shop.orders'], 'an unambiguous table name resolves to its scoped schema');
  t.match(checkMysql('SELECT * FROM orders', p).sql, /`shop`\.`orders`/);
  const two = mysqlPolicy(scopes(['a.orders', 'b.orders']));
  t.throws(() => checkMysql('SELECT * FROM orders', two), { code: 'scope_violation' }, 'ambiguous without a schema');
});

t.test('CTE names against a server that folds case: the checker never takes a table for a CTE the server would not', async (t) => {
  const fold = mysqlPolicy(scopes(['orders']), 'fold');
  const refusal = (sql: string, p = fold): { code?: string; reason?: string } => {
    try {
      checkMysql(sql, p);
      return {};
    } catch (err) {
      const e = err as { code: string; detail: { reason: string } };
      return { code: e.code, reason: e.detail.reason };
    }
  };
  // JavaScript lower-cases ẞ to ß and Ƞ to ƞ; MariaDB's comparison does not: the reference below is the real table there
  t.same(refusal('WITH `GEHÄLTER_MAẞE` AS (SELECT 1 AS x) SELECT * FROM `gehälter_maße`'), { code: 'invalid_sql', reason: 'unsupported' }, 'a non-ASCII CTE name is refused');
  t.same(refusal('WITH `Ƞotes` AS (SELECT 1 AS id) SELECT * FROM `ƞotes`'), { code: 'invalid_sql', reason: 'unsupported' });
  // the Kelvin sign folds to k in JavaScript: the reference is looked up as a table (and refused), never taken for the CTE
  t.same(refusal('WITH kinds AS (SELECT 1 AS id) SELECT * FROM `\u212Ainds`'), { code: 'scope_violation', reason: 'table_not_in_scope' });
  t.ok(checkMysql('WITH Recent AS (SELECT id FROM orders) SELECT * FROM RECENT', fold), 'ASCII CTE names fold as before');
  const exact = mysqlPolicy(scopes(['orders']), 'exact');
  t.ok(checkMysql('WITH `Ƞotes` AS (SELECT 1 AS id) SELECT * FROM `Ƞotes`', exact), 'a case-sensitive server compares names exactly: any name is fine');
});

t.test("a WITH of one member of a set operation does not reach the next member's tables", async (t) => {
  const p = mysqlPolicy(scopes(['orders']));
  for (const sql of [
    '(WITH secrets AS (SELECT 1 AS id) SELECT id FROM secrets) UNION ALL SELECT id FROM secrets',
    'SELECT id FROM orders UNION (WITH secrets AS (SELECT 1 AS id) SELECT id FROM secrets) UNION SELECT id FROM secrets',
  ]) {
    const r = (() => {
      try {
        return checkMysql(sql, p);
      } catch (err) {
        return err as { code: string; detail: { reason: string } };
      }
    })();
    t.equal('code' in r ? r.code : 'accepted', 'scope_violation', `refused: ${sql}`);
  }
  const whole = checkMysql('WITH recent AS (SELECT id FROM orders) SELECT id FROM recent UNION SELECT id FROM orders', p);
  t.same(whole.tables, ['orders'], 'a WITH of the whole statement still serves its first member');
});
