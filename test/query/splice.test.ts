/**
 * The SQL policy's text splice (control-plane/query/sql/splice.ts): the rewritten statement as
 * the agent's own text with each table name replaced, verified like the deparsed tree it stands
 * in for.
 *
 * - which statements take it and which are left to the deparsed tree (sql-cases.ts `spliceCases`;
 *   sql-pglite.test.ts runs both outputs of each and compares the rows);
 * - a faulty splice (a test hook, like deparse.ts's) never gets through: what comes back is the
 *   deparsed tree, verified, or a refusal;
 * - the bench's 3-table join (bench/run.ts) takes it, and on the demo data answers the same rows
 *   as the deparsed tree.
 */
import t from 'tap';
import { parseSync } from 'pgsql-parser';

import { Catalogue, parseScopes } from '../../control-plane/catalogue/index.js';
import { DEMO_WORKER_SETTINGS } from '../../control-plane/demo/engine.js';
import { DEMO_READER_ROLE } from '../../control-plane/demo/load.js';
import { unpackImage } from '../../control-plane/embedded/image-fs.js';
import { EmbeddedPostgres } from '../../control-plane/embedded/index.js';
import { demoPolicy } from '../../control-plane/query/backends.js';
import { scopeSettings } from '../../control-plane/query/scope-settings.js';
import { checkAndRewrite, initSqlParser, SqlPolicyError, type CheckedQuery } from '../../control-plane/query/sql/index.js';
import { splicer } from '../../control-plane/query/sql/splice.js';
import { demoImage } from '../helpers/server.js';
import { ENC_PRED_OUT, policy, spliceCases, splicedOut, viaTree } from './sql-cases.js';

await initSqlParser();

/** the parse tree without source positions: equal trees are the same statement */
function shape(sql: string): string {
  const positions = new Set(['location', 'stmt_location', 'stmt_len', 'rexpr_list_start', 'rexpr_list_end', 'list_start', 'list_end']);
  return JSON.stringify(parseSync(sql), (k, v: unknown) => (positions.has(k) ? undefined : v));
}

t.test('which statements are spliced and which deparsed', async (t) => {
  for (const c of spliceCases) {
    const r = checkAndRewrite(c.sql, policy);
    const tree = viaTree(() => checkAndRewrite(c.sql, policy));
    t.same(r.tables, tree.tables, `tables: ${c.sql}`);
    t.equal(r.kind, tree.kind, `kind: ${c.sql}`);
    if (c.path === 'tree') {
      t.equal(r.sql, tree.sql, `deparsed: ${c.sql}`);
      continue;
    }
    t.equal(r.sql, splicedOut(c), `spliced: ${c.sql}`);
    // the same statement as the deparsed tree, only written differently
    t.equal(shape(r.sql), shape(tree.sql), `same parse tree as the deparsed rewrite: ${c.sql}`);
  }
});

t.test('quoted names that are not the table are refused as before', async (t) => {
  for (const sql of ['SELECT * FROM "Encounters"', 'SELECT * FROM demo_healthcare."ENCOUNTERS" e']) {
    for (const f of [() => checkAndRewrite(sql, policy), () => viaTree(() => checkAndRewrite(sql, policy))]) {
      t.throws(f, { code: 'scope_violation', detail: { reason: 'unknown_table' } }, sql);
    }
  }
});

t.test('a faulty splice never gets through: the deparsed tree, verified, or a refusal', async (t) => {
  const sql = 'SELECT e.id, p.name FROM encounters e JOIN patients p ON p.id = e.patient_id WHERE e.cost > 1';
  const tree = viaTree(() => checkAndRewrite(sql, policy));
  const spliced = checkAndRewrite(sql, policy).sql;
  t.not(spliced, tree.sql, 'sanity: the statement is spliced');
  const subquery = /\(SELECT \* FROM demo_healthcare\.encounters WHERE .*? OFFSET 0\)/;
  const faults: Array<[string, (s: string, agent: string) => string]> = [
    ['leaves the agent text as it was', (_s, agent) => agent],
    ['drops the scoped subquery', (s) => s.replace(subquery, 'demo_healthcare.encounters')],
    ['drops the subquery\'s OFFSET 0', (s) => s.replace(' OFFSET 0)', ')')],
    ['widens the predicate', (s) => s.replace('2024-04-01', '2099-01-01')],
    ['drops the predicate', (s) => s.replace(/ WHERE period_start .*? OFFSET 0/, ' OFFSET 0')],
    ['appends a statement', (s) => `${s}; DROP TABLE x`],
    ['adds a table', (s) => `${s} UNION SELECT id, 'x' FROM demo_healthcare.claims`],
    ['adds an unqualified table', (s) => s.replace('"demo_healthcare"."patients" p', 'claims p')],
    ['shadows the table with a CTE over the physical one', (s) => `WITH encounters AS (SELECT * FROM demo_healthcare.encounters) ${s.replace(subquery, 'encounters')}`],
    ['adds a function', (s) => s.replace('SELECT e.id', 'SELECT pg_sleep(1)')],
    ['turns it into EXPLAIN', (s) => `EXPLAIN ${s}`],
    ['writes garbage', () => 'SELECT FROM WHERE'],
    ['writes nothing', () => ''],
    ['throws', () => { throw new Error('a splice bug'); }],
  ];
  const real = splicer.splice;
  try {
    for (const [what, fault] of faults) {
      let wrote: string | undefined;
      splicer.splice = (text, span, rewrites) => {
        wrote = fault(real(text, span, rewrites) as string, text);
        return wrote;
      };
      let r: CheckedQuery | SqlPolicyError;
      try {
        r = checkAndRewrite(sql, policy);
      } catch (err) {
        if (!(err instanceof SqlPolicyError)) throw err;
        r = err;
      }
      if (what !== 'throws') t.ok(wrote !== undefined && wrote !== spliced, `${what}: the faulty text was written`);
      t.ok(!(r instanceof SqlPolicyError), `${what}: not refused (the tree takes over)`);
      if (r instanceof SqlPolicyError) continue;
      t.equal(r.sql, tree.sql, `${what}: the deparsed tree, not the faulty text`);
      t.same(r.tables, tree.tables);
      t.equal(r.sql.split(ENC_PRED_OUT).length - 1, 1, `${what}: the predicate applied`);
    }
  } finally {
    splicer.splice = real;
  }
  t.equal(checkAndRewrite(sql, policy).sql, spliced, 'the real splice restored');
});

t.test('what the verify pass guarantees is the scope, not the splice\'s faithfulness', async (t) => {
  // ONLY inside the trusted subquery is allowed (the tree keeps an agent's ONLY there): a splice
  // that wrote it would be run, and would still read only in-scope rows
  const sql = 'SELECT count(*) FROM encounters e';
  const real = splicer.splice;
  try {
    splicer.splice = (text, span, rewrites) => real(text, span, rewrites)?.replace('FROM demo_healthcare.encounters', 'FROM ONLY demo_healthcare.encounters') ?? null;
    const r = checkAndRewrite(sql, policy);
    t.equal(r.sql, `SELECT count(*) FROM (SELECT * FROM ONLY demo_healthcare.encounters WHERE ${ENC_PRED_OUT} OFFSET 0) e`);
  } finally {
    splicer.splice = real;
  }
});

t.test('the bench join is spliced and answers the same rows as the deparsed tree, on the demo data', async (t) => {
  // bench/run.ts's statement and scopes
  const sql = `SELECT p.gender, e.class_code, count(*) AS encounters, sum(c.total_amount) AS billed
  FROM encounters e JOIN patients p ON p.patient_id = e.patient_id
  LEFT JOIN claims c ON c.encounter_id = e.encounter_id
  WHERE e.status = 'finished' GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 20`;
  const catalogue = new Catalogue();
  const target = catalogue.target('demo-healthcare');
  if (!target) throw new Error('no demo-healthcare target');
  const scopes = parseScopes(target, ['read:encounters', 'read:patients', 'read:claims', 'period:2024']);
  const demo = demoPolicy(target, scopes);

  const fast = checkAndRewrite(sql, demo);
  const tree = viaTree(() => checkAndRewrite(sql, demo));
  const period = (column: string): string =>
    `${column} >= '2024-01-01T00:00:00.000Z'::timestamptz AND ${column} < '2025-01-01T00:00:00.000Z'::timestamptz`;
  t.equal(
    fast.sql,
    `SELECT p.gender, e.class_code, count(*) AS encounters, sum(c.total_amount) AS billed
  FROM (SELECT * FROM demo_healthcare.encounters WHERE ${period('period_start')} OFFSET 0) e JOIN "demo_healthcare"."patients" p ON p.patient_id = e.patient_id
  LEFT JOIN (SELECT * FROM demo_healthcare.claims WHERE ${period('created_at')} OFFSET 0) c ON c.encounter_id = e.encounter_id
  WHERE e.status = 'finished' GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 20`,
    'the agent text, line breaks and aliases kept, each table name replaced',
  );
  t.same(fast.tables, tree.tables);
  t.equal(fast.kind, tree.kind);
  t.equal(shape(fast.sql), shape(tree.sql), 'the same parse tree as the deparsed rewrite');

  const db = await EmbeddedPostgres.start({ image: await unpackImage(await demoImage()), settings: DEMO_WORKER_SETTINGS });
  t.teardown(() => db.terminate());
  // as a demo query runs: the reader role, row security told the scopes
  const preamble = [`SET LOCAL ROLE ${DEMO_READER_ROLE}`, 'SET LOCAL search_path = pg_catalog', ...scopeSettings([...demo.allowed.values()], scopes.periods)];
  // as a set: ties under ORDER BY … LIMIT may come in either order
  const rows = async (text: string): Promise<string[]> =>
    (await db.read({ preamble, sql: text, maxRows: 1000, maxBytes: 10_000_000, direct: false })).rows.map((r) => JSON.stringify(r)).sort();
  const fastRows = await rows(fast.sql);
  t.ok(fastRows.length > 0, 'rows came back');
  t.same(fastRows, await rows(tree.sql), 'the same rows');
});
