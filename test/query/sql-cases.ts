/** Shared statement corpus of the SQL policy tests (sql.test.ts, sql-pglite.test.ts, splice.test.ts). */
import type { ScopedTable, SqlPolicy } from '../../control-plane/query/sql/index.js';
import { splicer } from '../../control-plane/query/sql/splice.js';

export const ENC_PRED = `"period_start" >= '2024-01-01T00:00:00Z'::timestamptz AND "period_start" < '2024-04-01T00:00:00Z'::timestamptz`;
/** how the predicate reads after deparse */
export const ENC_PRED_OUT = `period_start >= '2024-01-01T00:00:00Z'::timestamptz AND period_start < '2024-04-01T00:00:00Z'::timestamptz`;

/**
 * `f` run with the policy's text splice (splice.ts) turned off: what it returns is the deparsed
 * rewritten tree, the policy's only output before the splice and its fallback since.
 */
export function viaTree<T>(f: () => T): T {
  const real = splicer.splice;
  splicer.splice = () => null;
  try {
    return f();
  } finally {
    splicer.splice = real;
  }
}

export const allowed = new Map<string, ScopedTable>([
  ['encounters', { name: 'encounters', schema: 'demo_healthcare', table: 'encounters', predicate: ENC_PRED }],
  ['patients', { name: 'patients', schema: 'demo_healthcare', table: 'patients', predicate: null }],
]);
export const policy: SqlPolicy = {
  allowed,
  known: ['claims', 'encounters', 'patients'],
  schemas: ['demo_healthcare', 'public'],
};

// ---------------------------------------------------------------------------------------------
// legit statements

export interface Legit {
  sql: string;
  tables: string[];
  kind?: string;
  /** how many times the encounters predicate must appear */
  enc?: number;
  /** in the deparsed rewrite (the tree path, {@link viaTree}) */
  contains?: string[];
  notContains?: string[];
}

export const legit: Legit[] = [
  { sql: 'SELECT e.id, p.name FROM encounters e JOIN patients p ON p.id = e.patient_id', tables: ['encounters', 'patients'], enc: 1, contains: ['AS e', 'AS p', 'demo_healthcare.patients'] },
  {
    sql: 'SELECT e.id, p.name, e2.id FROM encounters e JOIN patients p ON p.id = e.patient_id LEFT JOIN encounters e2 ON e2.patient_id = p.id AND e2.period_start > e.period_start WHERE p.gender = \'f\' ORDER BY 1 LIMIT 10',
    tables: ['encounters', 'patients'],
    enc: 2,
  },
  {
    sql: 'WITH a AS (SELECT * FROM encounters), b AS (SELECT patient_id, count(*) AS n FROM a GROUP BY 1) SELECT * FROM b JOIN patients p ON p.id = b.patient_id',
    tables: ['encounters', 'patients'],
    enc: 1,
  },
  {
    sql: 'WITH RECURSIVE chain(id, depth) AS (SELECT id, 0 FROM encounters UNION ALL SELECT e.id, c.depth + 1 FROM encounters e JOIN chain c ON e.previous_id = c.id WHERE c.depth < 5) SELECT * FROM chain',
    tables: ['encounters'],
    enc: 2,
    contains: ['FROM chain'],
  },
  {
    // WITH RECURSIVE: a CTE may refer to a later sibling
    sql: 'WITH RECURSIVE a AS (SELECT * FROM b), b AS (SELECT id FROM encounters) SELECT * FROM a',
    tables: ['encounters'],
    enc: 1,
  },
  {
    sql: 'SELECT id, row_number() OVER (PARTITION BY patient_id ORDER BY period_start), lag(period_start) OVER w, sum(cost) OVER (ORDER BY period_start ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM encounters WINDOW w AS (ORDER BY period_start)',
    tables: ['encounters'],
    enc: 1,
  },
  { sql: "SELECT count(*) FILTER (WHERE status = 'finished'), count(DISTINCT patient_id) FROM encounters", tables: ['encounters'], enc: 1 },
  { sql: 'SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), mode() WITHIN GROUP (ORDER BY status) FROM encounters', tables: ['encounters'], enc: 1 },
  { sql: 'SELECT status, class, count(*) FROM encounters GROUP BY ROLLUP (status, class)', tables: ['encounters'], enc: 1 },
  { sql: 'SELECT status, class, count(*) FROM encounters GROUP BY GROUPING SETS ((status), (class), ()) HAVING count(*) > 1', tables: ['encounters'], enc: 1 },
  { sql: 'SELECT patient_id FROM encounters GROUP BY patient_id HAVING avg(cost) > 100 ORDER BY avg(cost) DESC', tables: ['encounters'], enc: 1 },
  { sql: 'SELECT id FROM encounters UNION SELECT id FROM patients ORDER BY 1 LIMIT 5', tables: ['encounters', 'patients'], enc: 1 },
  { sql: 'SELECT id FROM encounters INTERSECT SELECT id FROM patients EXCEPT ALL SELECT 1', tables: ['encounters', 'patients'], enc: 1 },
  {
    sql: 'SELECT p.id, last.period_start FROM patients p CROSS JOIN LATERAL (SELECT e.period_start FROM encounters e WHERE e.patient_id = p.id ORDER BY e.period_start DESC LIMIT 1) AS last',
    tables: ['encounters', 'patients'],
    enc: 1,
    contains: ['LATERAL'],
  },
  { sql: 'EXPLAIN SELECT * FROM encounters', tables: ['encounters'], kind: 'explain', enc: 1 },
  { sql: 'EXPLAIN (FORMAT JSON, VERBOSE, COSTS OFF) SELECT * FROM encounters e JOIN patients p ON p.id = e.patient_id', tables: ['encounters', 'patients'], kind: 'explain', enc: 1 },
  { sql: "VALUES (1, 'a'), (2, 'b')", tables: [], kind: 'values' },
  { sql: 'TABLE encounters', tables: ['encounters'], enc: 1, contains: ['AS encounters'] },
  { sql: 'SELECT * FROM demo_healthcare.encounters', tables: ['encounters'], enc: 1, contains: ['AS encounters'] },
  { sql: 'SELECT patients.name FROM public.patients', tables: ['patients'], contains: ['AS patients'] },
  { sql: 'SELECT * FROM "encounters"', tables: ['encounters'], enc: 1 },
  { sql: 'SELECT encounters.id FROM encounters WHERE encounters.cost > 10', tables: ['encounters'], enc: 1, contains: ['AS encounters'] },
  { sql: 'SELECT x.a FROM encounters AS x(a, b)', tables: ['encounters'], enc: 1, contains: ['AS x(a, b)'] },
  { sql: 'SELECT * FROM ONLY encounters', tables: ['encounters'], enc: 1, contains: ['FROM ONLY demo_healthcare.encounters'] },
  { sql: 'SELECT * FROM encounters TABLESAMPLE BERNOULLI (10) REPEATABLE (42)', tables: ['encounters'], enc: 1, contains: ['TABLESAMPLE bernoulli (10) REPEATABLE (42) WHERE'] },
  { sql: 'SELECT * FROM patients TABLESAMPLE SYSTEM (50)', tables: ['patients'] },
  // a CTE named like the forbidden table shadows it and is not the table
  { sql: 'WITH claims AS (SELECT * FROM encounters) SELECT count(*) FROM claims', tables: ['encounters'], enc: 1, notContains: ['demo_healthcare.claims'] },
  // a CTE named like an allowed table shadows it: not rewritten, reads nothing
  { sql: 'WITH patients AS (SELECT 1 AS id) SELECT * FROM patients', tables: [], notContains: ['demo_healthcare'] },
  // CTE in a subquery, used there
  { sql: 'SELECT * FROM (WITH x AS (SELECT id FROM encounters) SELECT * FROM x) s', tables: ['encounters'], enc: 1 },
  // strings and comments that look like SQL are just strings and comments
  { sql: 'SELECT $$; DELETE FROM claims; $$ AS s, $q$x$q$ AS t FROM encounters', tables: ['encounters'], enc: 1 },
  { sql: "SELECT 'FROM claims' AS s /* FROM claims */ FROM encounters -- , claims", tables: ['encounters'], enc: 1, notContains: ['demo_healthcare.claims'] },
  {
    sql: "SELECT id, status LIKE 'fin%' ESCAPE '#', status SIMILAR TO 'f%', status ILIKE 'F%', EXTRACT(year FROM period_start), date_trunc('month', period_start), period_start AT TIME ZONE 'UTC', age(period_start), SUBSTRING(status FROM 1 FOR 3), TRIM(BOTH ' ' FROM status), POSITION('a' IN status), lower(status) || upper(class) FROM encounters",
    tables: ['encounters'],
    enc: 1,
  },
  {
    sql: "SELECT cost::numeric(10, 2), id::text, CAST(period_start AS date), date '2024-01-01', interval '1 day', '2024-01-01'::timestamptz, '{1,2}'::int[], true::boolean, 1.5::double precision, '00000000-0000-0000-0000-000000000000'::uuid, '{}'::jsonb FROM encounters",
    tables: ['encounters'],
    enc: 1,
  },
  {
    sql: "SELECT COALESCE(cost, 0), GREATEST(cost, 1), LEAST(cost, 2), NULLIF(status, ''), CASE WHEN cost > 10 THEN 'high' ELSE 'low' END, CASE status WHEN 'a' THEN 1 END, cost BETWEEN 1 AND 2, status IN ('a', 'b'), status IS DISTINCT FROM 'x', cost IS NULL, (cost > 1) IS TRUE FROM encounters",
    tables: ['encounters'],
    enc: 1,
  },
  {
    sql: "SELECT data->>'code', data #>> '{a,b}', data @> '{\"a\":1}', jsonb_build_object('id', id), to_jsonb(e), row_to_json(e), jsonb_array_length(data->'x'), json_object('a': 1 RETURNING jsonb) FROM encounters e",
    tables: ['encounters'],
    enc: 1,
  },
  { sql: "SELECT status, array_agg(id ORDER BY id), string_agg(class, ','), jsonb_agg(data), json_object_agg(id, cost) FROM encounters GROUP BY status", tables: ['encounters'], enc: 1 },
  { sql: 'SELECT p.id, p.name, count(e.id) FROM patients p LEFT JOIN encounters e ON e.patient_id = p.id GROUP BY p.id', tables: ['encounters', 'patients'], enc: 1 },
  { sql: 'SELECT * FROM patients TABLESAMPLE SYSTEM (50) REPEATABLE (1)', tables: ['patients'], contains: ['FROM demo_healthcare.patients AS patients TABLESAMPLE system (50)'] },
  { sql: 'SELECT unnest(tags), generate_series(1, 3) FROM encounters', tables: ['encounters'], enc: 1 },
  { sql: 'SELECT current_date, current_timestamp, localtimestamp, now(), clock_timestamp()', tables: [] },
  { sql: 'SELECT (SELECT count(*) FROM patients) AS n, EXISTS (SELECT 1 FROM encounters e WHERE e.patient_id = p.id) FROM patients p', tables: ['encounters', 'patients'], enc: 1 },
  { sql: 'SELECT id FROM patients WHERE id IN (SELECT patient_id FROM encounters) AND id = ANY (ARRAY(SELECT patient_id FROM encounters))', tables: ['encounters', 'patients'], enc: 2 },
  { sql: 'SELECT DISTINCT ON (patient_id) patient_id, period_start FROM encounters ORDER BY patient_id, period_start DESC NULLS LAST', tables: ['encounters'], enc: 1 },
  { sql: 'SELECT * FROM encounters NATURAL JOIN patients', tables: ['encounters', 'patients'], enc: 1 },
  { sql: 'SELECT * FROM encounters JOIN patients USING (id)', tables: ['encounters', 'patients'], enc: 1 },
  { sql: 'SELECT pg_catalog.count(*), pg_catalog.lower(status) FROM encounters GROUP BY status', tables: ['encounters'], enc: 1 },
  { sql: 'SELECT 1 OPERATOR(pg_catalog.+) 1', tables: [] },
  { sql: 'SELECT json_arrayagg(id ORDER BY id), json_objectagg(status : id) FROM encounters', tables: ['encounters'], enc: 1 },
  { sql: 'SELECT status COLLATE "C" FROM encounters ORDER BY 1', tables: ['encounters'], enc: 1 },
  { sql: 'SELECT 1;', tables: [] },
];

// ---------------------------------------------------------------------------------------------
// hostile statements

export interface Hostile {
  sql: string;
  code?: 'invalid_sql' | 'scope_violation';
  reason?: string;
  table?: string;
  function?: string;
  construct?: string;
  message?: RegExp;
}

export const hostile: Hostile[] = [
  // more than one statement
  { sql: 'SELECT 1; SELECT 2', reason: 'multiple_statements', message: /exactly one statement/ },
  { sql: 'SELECT 1; COMMIT', reason: 'multiple_statements', message: /exactly one statement/ },
  { sql: 'COMMIT; SELECT 1', reason: 'multiple_statements' },
  { sql: 'SELECT * FROM encounters; DROP TABLE encounters', reason: 'multiple_statements' },
  { sql: 'SELECT $$x$$; DELETE FROM claims', reason: 'multiple_statements' },
  // not a read
  { sql: '/* harmless */ DELETE FROM encounters', reason: 'not_a_read', construct: 'DELETE' },
  { sql: '-- just a comment\n DROP TABLE encounters', reason: 'not_a_read', construct: 'DROP' },
  { sql: "INSERT INTO patients VALUES (1, 'x')", reason: 'not_a_read', construct: 'INSERT' },
  { sql: "UPDATE patients SET name = 'x'", reason: 'not_a_read', construct: 'UPDATE' },
  { sql: 'MERGE INTO patients p USING encounters e ON p.id = e.patient_id WHEN MATCHED THEN DELETE', reason: 'not_a_read', construct: 'MERGE' },
  { sql: 'CREATE TABLE x AS SELECT * FROM encounters', reason: 'not_a_read', construct: 'CREATE TABLE AS' },
  { sql: 'TRUNCATE encounters', reason: 'not_a_read', construct: 'TRUNCATE' },
  { sql: "COPY encounters TO '/tmp/x'", reason: 'not_a_read', construct: 'COPY' },
  { sql: "COPY (SELECT 1) TO PROGRAM 'id'", reason: 'not_a_read', construct: 'COPY' },
  { sql: 'DO $$ BEGIN PERFORM pg_sleep(1); END $$', reason: 'not_a_read', construct: 'DO' },
  { sql: 'SET statement_timeout = 0', reason: 'not_a_read', construct: 'SET' },
  { sql: 'SET ROLE postgres', reason: 'not_a_read', construct: 'SET ROLE' },
  { sql: 'RESET ALL', reason: 'not_a_read', construct: 'RESET' },
  { sql: 'SHOW search_path', reason: 'not_a_read', construct: 'SHOW' },
  { sql: 'BEGIN', reason: 'not_a_read', construct: 'BEGIN' },
  { sql: 'COMMIT', reason: 'not_a_read', construct: 'COMMIT' },
  { sql: 'ROLLBACK', reason: 'not_a_read', construct: 'ROLLBACK' },
  { sql: 'CALL do_things()', reason: 'not_a_read', construct: 'CALL' },
  { sql: 'LISTEN chan', reason: 'not_a_read', construct: 'LISTEN' },
  { sql: "NOTIFY chan, 'x'", reason: 'not_a_read', construct: 'NOTIFY' },
  { sql: 'PREPARE p AS SELECT * FROM claims', reason: 'not_a_read', construct: 'PREPARE' },
  { sql: 'EXECUTE p', reason: 'not_a_read', construct: 'EXECUTE' },
  { sql: 'VACUUM', reason: 'not_a_read', construct: 'VACUUM' },
  { sql: 'ANALYZE encounters', reason: 'not_a_read', construct: 'ANALYZE' },
  { sql: 'LOCK TABLE encounters IN ACCESS EXCLUSIVE MODE', reason: 'not_a_read', construct: 'LOCK' },
  { sql: 'DECLARE c CURSOR FOR SELECT * FROM encounters', reason: 'not_a_read', construct: 'DECLARE CURSOR' },
  { sql: 'CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$', reason: 'not_a_read', construct: 'CREATE FUNCTION' },
  { sql: 'GRANT SELECT ON claims TO public', reason: 'not_a_read' },
  { sql: 'EXPLAIN INSERT INTO patients VALUES (1)', reason: 'not_a_read' },
  // EXPLAIN ANALYZE in all spellings
  { sql: 'EXPLAIN ANALYZE SELECT * FROM encounters', reason: 'explain_analyze', construct: 'EXPLAIN ANALYZE' },
  { sql: 'EXPLAIN ANALYSE SELECT 1', reason: 'explain_analyze' },
  { sql: 'EXPLAIN (ANALYZE) SELECT * FROM encounters', reason: 'explain_analyze' },
  { sql: 'EXPLAIN (ANALYZE true) SELECT * FROM encounters', reason: 'explain_analyze' },
  { sql: 'EXPLAIN (FORMAT JSON, ANALYZE on) SELECT 1', reason: 'explain_analyze' },
  { sql: 'EXPLAIN (ANALYZE) DELETE FROM encounters', reason: 'explain_analyze' },
  { sql: 'EXPLAIN (SETTINGS) SELECT 1', reason: 'construct_not_allowed', construct: 'EXPLAIN SETTINGS' },
  // writable CTEs, SELECT INTO, row locks
  { sql: 'WITH d AS (DELETE FROM encounters RETURNING *) SELECT * FROM d', reason: 'writable_cte', construct: 'DELETE' },
  { sql: "WITH u AS (UPDATE patients SET name = 'x' RETURNING *) SELECT 1", reason: 'writable_cte', construct: 'UPDATE' },
  { sql: 'WITH i AS (INSERT INTO patients VALUES (1) RETURNING *) SELECT * FROM i', reason: 'writable_cte', construct: 'INSERT' },
  { sql: 'SELECT * FROM (WITH d AS (DELETE FROM encounters RETURNING *) SELECT * FROM d) s', reason: 'writable_cte' },
  { sql: 'SELECT * INTO newtable FROM encounters', reason: 'select_into', construct: 'SELECT INTO' },
  { sql: 'SELECT * FROM encounters FOR UPDATE', reason: 'locking_clause', construct: 'FOR UPDATE' },
  { sql: 'SELECT * FROM encounters FOR NO KEY UPDATE', reason: 'locking_clause', construct: 'FOR NO KEY UPDATE' },
  { sql: 'SELECT * FROM encounters FOR SHARE', reason: 'locking_clause', construct: 'FOR SHARE' },
  { sql: 'SELECT * FROM encounters FOR KEY SHARE SKIP LOCKED', reason: 'locking_clause', construct: 'FOR KEY SHARE' },
  { sql: 'SELECT * FROM (SELECT * FROM encounters FOR UPDATE) s', reason: 'locking_clause' },
  // functions
  { sql: 'SELECT pg_sleep(10)', reason: 'function_not_allowed', function: 'pg_sleep', message: /pg_sleep\(\) is not allowed: only allow-listed functions/ },
  { sql: 'SELECT pg_catalog.pg_sleep(1)', reason: 'function_not_allowed', function: 'pg_catalog.pg_sleep' },
  { sql: 'SELECT pg_sleep_for(\'1 minute\')', reason: 'function_not_allowed', function: 'pg_sleep_for' },
  { sql: 'SELECT pg_advisory_lock(1)', reason: 'function_not_allowed', function: 'pg_advisory_lock' },
  { sql: "SELECT pg_read_file('/etc/passwd')", reason: 'function_not_allowed', function: 'pg_read_file' },
  { sql: "SELECT * FROM pg_read_file('/etc/passwd')", reason: 'construct_not_allowed', construct: 'function in FROM' },
  { sql: "SELECT lo_import('/etc/passwd')", reason: 'function_not_allowed', function: 'lo_import' },
  { sql: "SELECT * FROM dblink('host=evil', 'SELECT 1') AS t(a int)", reason: 'construct_not_allowed', construct: 'function in FROM' },
  { sql: "SELECT dblink_exec('host=evil', 'DROP TABLE x')", reason: 'function_not_allowed', function: 'dblink_exec' },
  { sql: "SELECT set_config('role', 'postgres', false)", reason: 'function_not_allowed', function: 'set_config' },
  { sql: "SELECT current_setting('is_superuser')", reason: 'function_not_allowed', function: 'current_setting' },
  { sql: 'SELECT pg_terminate_backend(1)', reason: 'function_not_allowed', function: 'pg_terminate_backend' },
  { sql: 'SELECT txid_current()', reason: 'function_not_allowed', function: 'txid_current' },
  { sql: "SELECT nextval('s')", reason: 'function_not_allowed', function: 'nextval' },
  { sql: 'SELECT version()', reason: 'function_not_allowed', function: 'version' },
  { sql: "SELECT query_to_xml('SELECT * FROM claims', true, true, '')", reason: 'function_not_allowed', function: 'query_to_xml' },
  { sql: "SELECT public.lower('x')", reason: 'function_not_allowed', function: 'public.lower' },
  { sql: 'SELECT "COUNT"(*) FROM encounters', reason: 'function_not_allowed', function: 'COUNT' },
  { sql: 'SELECT current_user', reason: 'function_not_allowed', function: 'current_user' },
  { sql: 'SELECT session_user', reason: 'function_not_allowed' },
  { sql: 'SELECT current_schema', reason: 'function_not_allowed' },
  { sql: 'SELECT count(*) FROM encounters WHERE status = pg_typeof(1)::text', reason: 'function_not_allowed', function: 'pg_typeof' },
  { sql: 'SELECT COLLATION FOR (status) FROM encounters', reason: 'function_not_allowed', function: 'pg_catalog.pg_collation_for' },
  { sql: 'SELECT * FROM generate_series(1, 10)', reason: 'construct_not_allowed', construct: 'function in FROM' },
  { sql: 'SELECT * FROM encounters, LATERAL jsonb_array_elements(data) x', reason: 'construct_not_allowed', construct: 'function in FROM' },
  { sql: 'SELECT * FROM ROWS FROM (generate_series(1, 2), unnest(ARRAY[1]))', reason: 'construct_not_allowed', construct: 'function in FROM' },
  { sql: "SELECT * FROM json_to_recordset('[]') AS x(a int)", reason: 'construct_not_allowed', construct: 'function in FROM' },
  { sql: "SELECT xmlelement(name a, 'x')", reason: 'construct_not_allowed', construct: 'XML function' },
  { sql: "SELECT * FROM XMLTABLE('/a' PASSING '<a/>' COLUMNS x int)", reason: 'construct_not_allowed', construct: 'XMLTABLE' },
  { sql: "SELECT * FROM JSON_TABLE('[]'::jsonb, '$[*]' COLUMNS (a int PATH '$.a')) jt", reason: 'construct_not_allowed', construct: 'JSON_TABLE' },
  { sql: "SELECT JSON_VALUE(data, '$.a') FROM encounters", reason: 'construct_not_allowed', construct: 'JSON_VALUE/JSON_QUERY/JSON_EXISTS' },
  // deparser quirk: EXTRACT's field is printed raw; a crafted field must not become SQL
  { sql: "SELECT EXTRACT('year FROM d) FROM claims --' FROM period_start) FROM encounters", reason: 'construct_not_allowed', construct: 'EXTRACT' },
  { sql: 'SELECT 1 OPERATOR(public.+) 1', reason: 'operator_not_allowed', construct: 'OPERATOR(public.+)' },
  { sql: 'SELECT id FROM encounters ORDER BY id USING OPERATOR(evil.<)', reason: 'operator_not_allowed' },
  { sql: 'SELECT $1', reason: 'construct_not_allowed', construct: 'parameter' },
  { sql: 'SELECT * FROM encounters WHERE id = $1', reason: 'construct_not_allowed', construct: 'parameter' },
  { sql: "SELECT * FROM encounters TABLESAMPLE system_rows(10)", reason: 'tablesample_method' },
  // casts
  { sql: "SELECT 'pg_class'::regclass", reason: 'type_not_allowed', construct: 'regclass', message: /reg\* types/ },
  { sql: "SELECT 'pg_class'::regclass::oid", reason: 'type_not_allowed', construct: 'regclass' },
  { sql: "SELECT CAST('now' AS regprocedure)", reason: 'type_not_allowed' },
  { sql: "SELECT 'x'::pg_catalog.regnamespace", reason: 'type_not_allowed', construct: 'pg_catalog.regnamespace' },
  { sql: 'SELECT 1::oid', reason: 'type_not_allowed', construct: 'oid' },
  { sql: 'SELECT row(1)::claims', reason: 'type_not_allowed', construct: 'claims' },
  { sql: "SELECT 'x'::public.mytype", reason: 'type_not_allowed', construct: 'public.mytype' },
  { sql: "SELECT regclass 'pg_class'", reason: 'type_not_allowed' },
  { sql: 'SELECT json_object(\'a\': 1 RETURNING regclass)', reason: 'type_not_allowed' },
  // tables
  { sql: 'SELECT * FROM claims', reason: 'table_not_in_scope', table: 'claims', message: /^table "claims" is not in this connection's scopes; readable tables: encounters, patients$/ },
  { sql: 'SELECT * FROM nope', reason: 'unknown_table', table: 'nope', message: /does not exist in this target; readable tables: encounters, patients/ },
  { sql: 'SELECT * FROM pg_catalog.pg_class', reason: 'system_catalog', table: 'pg_catalog.pg_class' },
  { sql: 'SELECT * FROM pg_catalog.pg_authid', reason: 'system_catalog' },
  { sql: 'SELECT * FROM information_schema.tables', reason: 'system_catalog', table: 'information_schema.tables' },
  { sql: 'SELECT * FROM pg_stats', reason: 'system_catalog', table: 'pg_stats' },
  { sql: 'SELECT * FROM pg_user', reason: 'system_catalog', table: 'pg_user' },
  { sql: 'SELECT * FROM pg_toast.pg_toast_1234', reason: 'system_catalog' },
  // system schemas in any letter case or quoting, and the temp schemas (#12)
  { sql: 'SELECT * FROM "PG_CATALOG".Pg_Authid', reason: 'system_catalog', table: 'PG_CATALOG.pg_authid' },
  { sql: 'SELECT * FROM "Pg_Catalog"."pg_shadow"', reason: 'system_catalog' },
  { sql: 'SELECT * FROM "INFORMATION_SCHEMA"."TABLES"', reason: 'system_catalog' },
  { sql: 'SELECT * FROM "PG_TOAST".pg_toast_1234', reason: 'system_catalog' },
  { sql: 'SELECT * FROM pg_temp_3.encounters', reason: 'system_catalog' },
  { sql: 'SELECT * FROM pg_toast_temp_3.x', reason: 'system_catalog' },
  { sql: 'SELECT * FROM "PG_TEMP".encounters', reason: 'system_catalog' },
  { sql: 'SELECT * FROM "demo_healthcare"."PG_AUTHID"', reason: 'unknown_table' },
  { sql: 'SELECT * FROM "Encounters"', reason: 'unknown_table', table: 'Encounters' },
  { sql: 'SELECT * FROM "ENCOUNTERS"', reason: 'unknown_table', table: 'ENCOUNTERS' },
  { sql: 'SELECT * FROM U&"\\0063laims"', reason: 'table_not_in_scope', table: 'claims' },
  { sql: 'SELECT * FROM U&"!0063laims" UESCAPE \'!\'', reason: 'table_not_in_scope', table: 'claims' },
  { sql: 'SELECT * FROM ONLY claims', reason: 'table_not_in_scope', table: 'claims' },
  { sql: 'TABLE claims', reason: 'table_not_in_scope', table: 'claims' },
  { sql: 'SELECT * FROM public.claims', reason: 'table_not_in_scope', table: 'public.claims' },
  { sql: 'SELECT * FROM demo_healthcare.claims', reason: 'table_not_in_scope', table: 'demo_healthcare.claims' },
  { sql: 'SELECT * FROM otherdb.demo_healthcare.encounters', reason: 'qualified_name', table: 'otherdb.demo_healthcare.encounters' },
  { sql: 'SELECT * FROM other.encounters', reason: 'schema_not_allowed', table: 'other.encounters' },
  { sql: 'SELECT * FROM encounters e JOIN claims c ON c.encounter_id = e.id', table: 'claims' },
  { sql: 'SELECT * FROM encounters, claims', table: 'claims' },
  { sql: 'SELECT * FROM encounters WHERE id IN (SELECT encounter_id FROM claims)', table: 'claims' },
  { sql: 'SELECT * FROM encounters WHERE EXISTS (SELECT 1 FROM claims WHERE claims.encounter_id = encounters.id)', table: 'claims' },
  { sql: 'SELECT (SELECT count(*) FROM claims) FROM encounters', table: 'claims' },
  { sql: 'SELECT patient_id FROM encounters GROUP BY patient_id HAVING count(*) > (SELECT count(*) FROM claims)', table: 'claims' },
  { sql: 'SELECT * FROM encounters ORDER BY (SELECT max(amount) FROM claims)', table: 'claims' },
  { sql: 'SELECT * FROM encounters GROUP BY (SELECT 1 FROM claims)', table: 'claims' },
  { sql: 'SELECT * FROM encounters LIMIT (SELECT count(*) FROM claims)', table: 'claims' },
  { sql: 'SELECT * FROM encounters e JOIN patients p ON p.id = (SELECT patient_id FROM claims LIMIT 1)', table: 'claims' },
  { sql: 'SELECT * FROM encounters e, LATERAL (SELECT * FROM claims c WHERE c.encounter_id = e.id) x', table: 'claims' },
  { sql: 'SELECT id FROM encounters UNION SELECT id FROM claims', table: 'claims' },
  { sql: 'SELECT id FROM encounters UNION ALL (SELECT id FROM patients EXCEPT SELECT id FROM claims)', table: 'claims' },
  { sql: 'WITH c AS (SELECT * FROM claims) SELECT * FROM c', table: 'claims' },
  { sql: 'WITH a AS (SELECT 1), b AS (SELECT * FROM a JOIN claims ON true) SELECT * FROM b', table: 'claims' },
  { sql: "SELECT coalesce((SELECT string_agg(x::text, ',') FROM claims x), '') FROM encounters", table: 'claims' },
  { sql: 'SELECT CASE WHEN (SELECT count(*) FROM claims) > 0 THEN 1 END', table: 'claims' },
  { sql: 'SELECT count(*) FILTER (WHERE id IN (SELECT id FROM claims)) FROM encounters', table: 'claims' },
  { sql: 'SELECT row_number() OVER (PARTITION BY (SELECT 1 FROM claims)) FROM encounters', table: 'claims' },
  { sql: 'SELECT 1 FROM encounters WINDOW w AS (ORDER BY (SELECT 1 FROM claims))', table: 'claims' },
  { sql: 'VALUES ((SELECT count(*) FROM claims))', table: 'claims' },
  { sql: 'SELECT ARRAY(SELECT id FROM claims)', table: 'claims' },
  { sql: 'SELECT json_array(SELECT id FROM claims)', table: 'claims' },
  { sql: 'SELECT json_arrayagg(x) FROM (SELECT id AS x FROM claims) s', table: 'claims' },
  { sql: 'SELECT * FROM encounters TABLESAMPLE BERNOULLI ((SELECT count(*)::float8 FROM claims))', table: 'claims' },
  { sql: 'EXPLAIN SELECT * FROM claims', table: 'claims' },
  { sql: 'SELECT (SELECT count(*) FROM pg_catalog.pg_authid)', reason: 'system_catalog' },
  // CTE scoping
  { sql: 'WITH encounters AS (SELECT * FROM claims) SELECT * FROM encounters', table: 'claims' },
  { sql: 'WITH claims AS (SELECT * FROM claims) SELECT * FROM claims', table: 'claims' }, // not recursive: inner "claims" is the table
  { sql: 'WITH a AS (SELECT * FROM claims), claims AS (SELECT 1) SELECT * FROM a', table: 'claims' }, // no forward references without RECURSIVE
  { sql: 'SELECT * FROM (WITH claims AS (SELECT * FROM encounters) SELECT * FROM claims) s, claims', table: 'claims' },
  { sql: 'SELECT (WITH claims AS (SELECT 1) SELECT 1), * FROM claims', table: 'claims' },
  { sql: 'WITH x AS (SELECT 1) SELECT * FROM (WITH claims AS (SELECT 1) SELECT 1) s, (SELECT * FROM claims) t', table: 'claims' },
  { sql: 'SELECT * FROM (SELECT 1) s UNION SELECT * FROM (WITH claims AS (SELECT 1) SELECT 2) t UNION SELECT id FROM claims', table: 'claims' },
];


// ---------------------------------------------------------------------------------------------
// the text splice (splice.ts): which statements it takes, which it leaves to the deparsed tree

export interface SpliceCase {
  sql: string;
  /** 'splice': the agent's text with the table names replaced; 'tree': the deparsed rewrite */
  path: 'splice' | 'tree';
  /** the spliced text, `ENC`/`PAT` standing for the encounters subquery / the patients reference */
  out?: string;
}

/** what the splice writes for encounters (with its predicate) and for patients (no predicate) */
export const SPLICED_ENC = `(SELECT * FROM demo_healthcare.encounters WHERE ${ENC_PRED_OUT} OFFSET 0)`;
export const SPLICED_PAT = '"demo_healthcare"."patients"';

export const spliceCases: SpliceCase[] = [
  { sql: 'SELECT e.id, p.name FROM encounters e JOIN patients p ON p.id = e.patient_id', path: 'splice', out: 'SELECT e.id, p.name FROM ENC e JOIN PAT p ON p.id = e.patient_id' },
  // doubtful text: the deparsed tree
  { sql: "SELECT e.id, 'é' AS x FROM encounters e", path: 'tree' },
  { sql: 'SELECT e.id FROM encounters e -- a comment', path: 'tree' },
  { sql: 'SELECT e.id /* a comment */ FROM encounters e', path: 'tree' },
  { sql: 'SELECT count(*) FROM demo_healthcare./* between the parts */encounters', path: 'tree' },
  { sql: "SELECT E'a\\\\b' AS s, count(*) FROM encounters", path: 'tree' },
  { sql: "SELECT count(*) FROM U&\"!0065ncounters\" UESCAPE '!'", path: 'tree' },
  { sql: 'SELECT p.id FROM patients"p"', path: 'tree' },
  // numbers and spacing PostgreSQL 15 and older read otherwise (a customer's server may be older than the parser)
  { sql: 'SELECT 0x1F AS n, e.id FROM encounters e', path: 'tree' },
  { sql: 'SELECT 0o17, 0b101, e.id FROM encounters e', path: 'tree' },
  { sql: 'SELECT 1_000 AS n, 1.5_0 AS m FROM encounters e', path: 'tree' },
  { sql: 'SELECT e.id,\vstatus FROM encounters e', path: 'tree' },
  { sql: "SELECT e.id, ' 0x1' AS s FROM encounters e", path: 'tree' }, // in a string too: the text is not lexed here
  { sql: 'SELECT e.id AS id_1, 0.5e3 AS x, 10 AS n0x FROM encounters e', path: 'splice', out: 'SELECT e.id AS id_1, 0.5e3 AS x, 10 AS n0x FROM ENC e' },
  // rewrites the splice does not make
  { sql: 'EXPLAIN SELECT * FROM encounters', path: 'tree' },
  { sql: 'SELECT count(*) FROM encounters TABLESAMPLE BERNOULLI (100)', path: 'tree' },
  { sql: 'SELECT count(*) FROM ONLY encounters', path: 'tree' },
  { sql: 'SELECT count(*) FROM encounters *', path: 'tree' },
  { sql: 'SELECT count(*) FROM patients * p', path: 'tree' },
  { sql: 'TABLE patients', path: 'tree' },
  { sql: 'SELECT 1 UNION TABLE patients', path: 'tree' },
  // names however written
  { sql: 'SELECT id FROM "encounters" WHERE id < 5', path: 'splice', out: 'SELECT id FROM ENC AS "encounters" WHERE id < 5' },
  { sql: 'select count(*) from ENCOUNTERS', path: 'splice', out: 'select count(*) from ENC AS "encounters"' },
  { sql: 'SELECT count(*) FROM demo_healthcare.encounters', path: 'splice', out: 'SELECT count(*) FROM ENC AS "encounters"' },
  { sql: 'SELECT count(*) FROM demo_healthcare . encounters', path: 'splice', out: 'SELECT count(*) FROM ENC AS "encounters"' },
  { sql: 'SELECT count(*) FROM "demo_healthcare"."encounters" e', path: 'splice', out: 'SELECT count(*) FROM ENC e' },
  { sql: 'SELECT count(*) FROM Demo_Healthcare.Patients AS p', path: 'splice', out: 'SELECT count(*) FROM PAT AS p' },
  { sql: 'SELECT patients.name FROM public.patients', path: 'splice', out: 'SELECT patients.name FROM PAT AS "patients"' },
  { sql: 'SELECT p.id FROM "patients"p', path: 'splice', out: 'SELECT p.id FROM PAT p' },
  // aliases, joins, subqueries, CTEs, set operations
  { sql: 'SELECT x.a FROM encounters AS x(a, b)', path: 'splice', out: 'SELECT x.a FROM ENC AS x(a, b)' },
  { sql: 'SELECT p.id, p.nm, n.gender FROM patients AS p(id, nm) JOIN patients n ON n.id = p.id', path: 'splice', out: 'SELECT p.id, p.nm, n.gender FROM PAT AS p(id, nm) JOIN PAT n ON n.id = p.id' },
  {
    sql: 'SELECT p.id, l.period_start FROM patients p CROSS JOIN LATERAL (SELECT e.period_start FROM encounters e WHERE e.patient_id = p.id ORDER BY e.period_start DESC LIMIT 1) AS l',
    path: 'splice',
    out: 'SELECT p.id, l.period_start FROM PAT p CROSS JOIN LATERAL (SELECT e.period_start FROM ENC e WHERE e.patient_id = p.id ORDER BY e.period_start DESC LIMIT 1) AS l',
  },
  { sql: 'WITH patients AS (SELECT id FROM encounters) SELECT count(*) FROM patients', path: 'splice', out: 'WITH patients AS (SELECT id FROM ENC AS "encounters") SELECT count(*) FROM patients' },
  { sql: 'WITH claims AS (SELECT * FROM encounters) SELECT count(*) FROM claims', path: 'splice', out: 'WITH claims AS (SELECT * FROM ENC AS "encounters") SELECT count(*) FROM claims' },
  { sql: 'SELECT count(*) FROM encounters a JOIN encounters b ON a.previous_id = b.id', path: 'splice', out: 'SELECT count(*) FROM ENC a JOIN ENC b ON a.previous_id = b.id' },
  { sql: 'SELECT count(*) FROM patients WHERE id IN (SELECT patient_id FROM encounters)', path: 'splice', out: 'SELECT count(*) FROM PAT AS "patients" WHERE id IN (SELECT patient_id FROM ENC AS "encounters")' },
  { sql: 'SELECT id FROM encounters UNION SELECT id FROM patients', path: 'splice', out: 'SELECT id FROM ENC AS "encounters" UNION SELECT id FROM PAT AS "patients"' },
  { sql: 'SELECT id FROM encounters INTERSECT SELECT id FROM patients EXCEPT ALL SELECT 1', path: 'splice', out: 'SELECT id FROM ENC AS "encounters" INTERSECT SELECT id FROM PAT AS "patients" EXCEPT ALL SELECT 1' },
  { sql: 'SELECT count(*) FROM (encounters e CROSS JOIN patients) WHERE e.id < 3', path: 'splice', out: 'SELECT count(*) FROM (ENC e CROSS JOIN PAT AS "patients") WHERE e.id < 3' },
  // the statement's own span: no trailing semicolon, no surrounding space
  { sql: 'SELECT count(*) FROM encounters ;  ', path: 'splice', out: 'SELECT count(*) FROM ENC AS "encounters"' },
  { sql: '\n  SELECT count(*)\n  FROM encounters e\n', path: 'splice', out: 'SELECT count(*)\n  FROM ENC e' },
  // no table at all: the agent's text as it is
  { sql: "select  1 AS one, 'x' AS s", path: 'splice', out: "select  1 AS one, 'x' AS s" },
];

/** a case's expected spliced text */
export const splicedOut = (c: SpliceCase): string | undefined => c.out?.replaceAll('ENC', SPLICED_ENC).replaceAll('PAT', SPLICED_PAT);
