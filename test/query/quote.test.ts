/**
 * The one quoting of the PostgreSQL text svc writes itself (control-plane/query/sql/quote.ts):
 * the exact text it produces, what it refuses, and that PostgreSQL (PGlite) reads each quoted
 * name and literal back as the original string. Also the row-security settings built with it.
 */
import t from 'tap';
import { PGlite } from '@electric-sql/pglite';

import { scopeSettings } from '../../control-plane/query/scope-settings.js';
import { periodPredicate } from '../../control-plane/query/sql/period.js';
import { quoteIdent, quoteLiteral, quoteLiteralAnySetting } from '../../control-plane/query/sql/quote.js';

/** Names and values that need care: quotes of both kinds, backslashes, unicode, SQL-looking text. */
const AWKWARD = [
  '',
  'plain',
  'Mixed Case',
  `it's`,
  `''`,
  '"',
  'a"b',
  '""x""',
  'back\\slash',
  '\\',
  `\\'`,
  'tab\there',
  'line\nbreak',
  'café',
  '雪',
  '😀 emoji',
  'e\u0301', // a combining accent
  "x'; DROP TABLE t; --",
  'x"; DROP TABLE t; --',
  '$$dollar$$',
];

t.test('quoteIdent: double quotes around, every " doubled, everything else as it is', async (t) => {
  t.equal(quoteIdent('orders'), '"orders"');
  t.equal(quoteIdent(''), '""');
  t.equal(quoteIdent('a"b'), '"a""b"');
  t.equal(quoteIdent('"'), '""""');
  t.equal(quoteIdent('""x""'), '"""""x"""""');
  t.equal(quoteIdent("it's"), `"it's"`, 'a single quote is not special in a name');
  t.equal(quoteIdent('back\\slash'), '"back\\slash"', 'nor is a backslash');
  t.equal(quoteIdent('café 雪 😀'), '"café 雪 😀"', 'unicode kept as it is');
  t.equal(quoteIdent('a\0b'), '"a\0b"', 'a NUL byte is not refused here (PostgreSQL refuses the text itself)');
});

t.test('quoteLiteral: single quotes around, every \' doubled, backslashes kept, NUL refused', async (t) => {
  t.equal(quoteLiteral('x'), "'x'");
  t.equal(quoteLiteral(''), "''");
  t.equal(quoteLiteral("it's"), "'it''s'");
  t.equal(quoteLiteral("''"), "''''''");
  t.equal(quoteLiteral('a"b'), `'a"b'`, 'a double quote is not special in a literal');
  t.equal(quoteLiteral('back\\slash'), "'back\\slash'", 'a backslash is kept as it is (no E-string)');
  t.equal(quoteLiteral("\\'"), "'\\'''", 'a backslash before a quote does not escape it');
  t.equal(quoteLiteral('café 雪 😀'), "'café 雪 😀'", 'unicode kept as it is');
  t.throws(() => quoteLiteral('a\0b'), { message: 'NUL byte in a demo value' }, 'a NUL byte is refused, in the words it always had');
  t.throws(() => quoteLiteral('\0', 'a period bound'), { message: 'NUL byte in a period bound' }, 'naming what held it');
  t.throws(() => periodPredicate('at', [{ start: '2024-01-01\0', end: '2024-04-01' }]), { message: 'NUL byte in a period bound' }, 'a period bound with a NUL byte');
});

t.test('PostgreSQL reads every quoted name and literal back as the original', async (t) => {
  const db = new PGlite();
  t.teardown(() => db.close());
  for (const s of AWKWARD) {
    const literal = await db.query<{ v: string }>(`SELECT ${quoteLiteral(s)}::text AS v`);
    t.equal(literal.rows[0]?.v, s, `literal ${JSON.stringify(s)}`);
    if (s === '') continue; // a zero-length identifier is refused by PostgreSQL itself
    const name = await db.query<Record<string, unknown>>(`SELECT 1 AS ${quoteIdent(s)}`);
    t.same(Object.keys(name.rows[0] ?? {}), [s], `identifier ${JSON.stringify(s)}`);
  }
  await db.exec(`CREATE SCHEMA ${quoteIdent('we"ird')}; CREATE TABLE ${quoteIdent('we"ird')}.${quoteIdent("t'ble")} (${quoteIdent('c"ol')} text)`);
  await db.exec(`INSERT INTO ${quoteIdent('we"ird')}.${quoteIdent("t'ble")} VALUES (${quoteLiteral("va'l\\ue")})`);
  const back = await db.query<Record<string, unknown>>(`SELECT * FROM ${quoteIdent('we"ird')}.${quoteIdent("t'ble")}`);
  t.same(back.rows, [{ 'c"ol': "va'l\\ue" }], 'a table named with quotes of both kinds holds the value as written');
});

t.test('quoteLiteralAnySetting: read back as the original with standard_conforming_strings on and off', async (t) => {
  t.equal(quoteLiteralAnySetting("it's"), "'it''s'", 'without a backslash, as quoteLiteral');
  t.equal(quoteLiteralAnySetting("\\'"), "E'\\\\'''", 'with one, an E-string: every backslash doubled');
  const db = new PGlite();
  t.teardown(() => db.close());
  for (const setting of ['on', 'off']) {
    await db.exec(`SET standard_conforming_strings = ${setting}`);
    for (const s of AWKWARD) {
      const r = await db.query<{ v: string }>(`SELECT ${quoteLiteralAnySetting(s)}::text AS v`);
      t.equal(r.rows[0]?.v, s, `${setting}: ${JSON.stringify(s)}`);
    }
  }
});

t.test('scopeSettings: the SET LOCAL statements of the row-security layer', async (t) => {
  t.same(scopeSettings([], []), [
    `SET LOCAL "svc.tables" = ''`,
    `SET LOCAL "svc.period_n" = '0'`,
    `SET LOCAL "svc.period_lo" = '-infinity'`,
    `SET LOCAL "svc.period_hi" = 'infinity'`,
    `SET LOCAL "svc.periods" = ''`,
  ]);
  const tables = [
    { schema: 'demo_healthcare', table: 'encounters' },
    { schema: "o'brien", table: 'claims' },
  ];
  const periods = [
    { start: '2024-07-01T00:00:00Z', end: '2024-10-01T00:00:00Z' },
    { start: '2024-01-01T00:00:00Z', end: '2024-04-01T00:00:00Z' },
  ];
  t.same(scopeSettings(tables, periods), [
    `SET LOCAL "svc.tables" = 'demo_healthcare.encounters,o''brien.claims'`,
    `SET LOCAL "svc.period_n" = '2'`,
    `SET LOCAL "svc.period_lo" = '2024-01-01T00:00:00Z'`,
    `SET LOCAL "svc.period_hi" = '2024-10-01T00:00:00Z'`,
    `SET LOCAL "svc.periods" = '2024-07-01T00:00:00Z/2024-10-01T00:00:00Z,2024-01-01T00:00:00Z/2024-04-01T00:00:00Z'`,
  ], 'names quoted as literals; the overall bounds are the earliest start and the latest end');
  t.throws(() => scopeSettings([{ schema: 's', table: 't\0' }], []), { message: 'NUL byte in a demo value' });
});
