/**
 * Allow-lists of the SQL policy layer. Everything not listed here is refused; these constants
 * are exported so the docs / OpenAPI description can publish them verbatim.
 */

/**
 * Functions an agent may call, by lower-case name, unqualified or qualified with `pg_catalog`
 * only. Grouped for documentation; {@link ALLOWED_FUNCTION_NAMES} is the flat set the checker
 * uses.
 *
 * Deliberately absent: anything that touches files, the network, large objects, locks, sleep,
 * configuration, sessions/backends, transaction ids, sequences, statistics or the system
 * catalogs (pg_sleep*, pg_advisory_*, pg_read_file, pg_ls_dir, lo_*, dblink*, set_config,
 * current_setting, pg_terminate_backend, txid_*, nextval, pg_stat_*, version, to_regclass,
 * pg_typeof, query_to_xml, xpath, …), and every XML function.
 *
 * Set-returning functions (the `setReturning` group) are allowed where PostgreSQL accepts them
 * outside FROM, i.e. in the select list (`SELECT unnest(tags) FROM …`); a function in FROM
 * (`FROM generate_series(…)`, `FROM jsonb_array_elements(…)`) is refused as a construct,
 * whatever the function. Wrap the select-list form in a subquery to join against it.
 */
export const ALLOWED_FUNCTIONS = {
  aggregate: [
    'count', 'sum', 'avg', 'min', 'max', 'any_value',
    'bool_and', 'bool_or', 'every', 'bit_and', 'bit_or', 'bit_xor',
    'string_agg', 'array_agg',
    'json_agg', 'jsonb_agg', 'json_agg_strict', 'jsonb_agg_strict',
    'json_object_agg', 'jsonb_object_agg', 'json_object_agg_strict', 'jsonb_object_agg_strict',
    'json_object_agg_unique', 'jsonb_object_agg_unique',
    'json_object_agg_unique_strict', 'jsonb_object_agg_unique_strict',
    'stddev', 'stddev_pop', 'stddev_samp', 'variance', 'var_pop', 'var_samp',
    'corr', 'covar_pop', 'covar_samp',
    'regr_avgx', 'regr_avgy', 'regr_count', 'regr_intercept', 'regr_r2', 'regr_slope',
    'regr_sxx', 'regr_sxy', 'regr_syy',
    'percentile_cont', 'percentile_disc', 'mode',
  ],
  window: [
    'row_number', 'rank', 'dense_rank', 'percent_rank', 'cume_dist', 'ntile',
    'lag', 'lead', 'first_value', 'last_value', 'nth_value',
  ],
  math: [
    'abs', 'ceil', 'ceiling', 'floor', 'round', 'trunc', 'sign', 'sqrt', 'cbrt',
    'power', 'pow', 'exp', 'ln', 'log', 'log10', 'mod', 'div', 'width_bucket', 'pi',
    'degrees', 'radians', 'gcd', 'lcm', 'factorial', 'scale', 'min_scale', 'trim_scale',
    'sin', 'cos', 'tan', 'cot', 'asin', 'acos', 'atan', 'atan2',
    'sind', 'cosd', 'tand', 'cotd', 'asind', 'acosd', 'atand', 'atan2d',
    'sinh', 'cosh', 'tanh', 'asinh', 'acosh', 'atanh',
    'random', 'num_nulls', 'num_nonnulls',
  ],
  string: [
    'length', 'char_length', 'character_length', 'octet_length', 'bit_length',
    'lower', 'upper', 'initcap', 'casefold', 'btrim', 'ltrim', 'rtrim', 'lpad', 'rpad',
    'substr', 'substring', 'position', 'strpos', 'overlay', 'replace', 'split_part',
    'concat', 'concat_ws', 'left', 'right', 'reverse', 'repeat', 'format',
    'md5', 'sha224', 'sha256', 'sha384', 'sha512', 'encode', 'decode', 'to_hex',
    'starts_with', 'translate', 'ascii', 'chr',
    'quote_ident', 'quote_literal', 'quote_nullable',
    'regexp_replace', 'regexp_match', 'regexp_like', 'regexp_count', 'regexp_instr',
    'regexp_substr', 'regexp_split_to_array',
    'string_to_array', 'array_to_string',
    'to_char', 'to_number', 'normalize', 'is_normalized',
    // targets of SQL syntax: x LIKE y ESCAPE z, x SIMILAR TO y
    'like_escape', 'similar_to_escape', 'similar_escape',
    'gen_random_uuid',
  ],
  datetime: [
    'now', 'clock_timestamp', 'statement_timestamp', 'transaction_timestamp',
    'date_trunc', 'date_part', 'extract', 'age', 'date_bin', 'date_add', 'date_subtract',
    'make_date', 'make_time', 'make_timestamp', 'make_timestamptz', 'make_interval',
    'to_date', 'to_timestamp', 'justify_days', 'justify_hours', 'justify_interval',
    'isfinite', 'timezone', 'overlaps',
  ],
  json: [
    'json_build_object', 'jsonb_build_object', 'json_build_array', 'jsonb_build_array',
    'json_object', 'jsonb_object', 'to_json', 'to_jsonb', 'row_to_json', 'array_to_json',
    'json_extract_path', 'json_extract_path_text', 'jsonb_extract_path', 'jsonb_extract_path_text',
    'json_typeof', 'jsonb_typeof', 'json_array_length', 'jsonb_array_length',
    'jsonb_pretty', 'json_strip_nulls', 'jsonb_strip_nulls', 'jsonb_set', 'jsonb_insert',
    'jsonb_path_exists', 'jsonb_path_match', 'jsonb_path_query_first', 'jsonb_path_query_array',
  ],
  array: [
    'array_length', 'cardinality', 'array_position', 'array_positions', 'array_append',
    'array_prepend', 'array_cat', 'array_remove', 'array_replace', 'array_upper',
    'array_lower', 'array_ndims', 'array_dims', 'trim_array',
  ],
  setReturning: [
    'unnest', 'generate_series', 'regexp_matches', 'regexp_split_to_table', 'string_to_table',
    'json_array_elements', 'json_array_elements_text', 'jsonb_array_elements',
    'jsonb_array_elements_text', 'json_object_keys', 'jsonb_object_keys',
    'json_each', 'json_each_text', 'jsonb_each', 'jsonb_each_text', 'jsonb_path_query',
  ],
  /** function-style casts to the allowed types, e.g. `date(ts)`, `text(n)` */
  cast: [
    'text', 'varchar', 'bpchar', 'int2', 'int4', 'int8', 'numeric', 'float4', 'float8',
    'bool', 'date', 'time', 'timetz', 'timestamp', 'timestamptz', 'interval', 'json', 'jsonb',
    'uuid', 'bytea',
  ],
} as const;

export const ALLOWED_FUNCTION_NAMES: ReadonlySet<string> = new Set(
  Object.values(ALLOWED_FUNCTIONS).flat(),
);

/**
 * Types a value may be cast to (`CAST(x AS t)`, `x::t`, `t 'literal'`, RETURNING t), and arrays
 * of them. Unqualified or qualified with `pg_catalog` only. The `reg*` OID alias types
 * (regclass, regproc, …) are not here and so refused: they are catalog lookups.
 */
export const ALLOWED_CAST_TYPES: ReadonlySet<string> = new Set([
  'text', 'varchar', 'char', 'bpchar', 'character', 'character varying',
  'int2', 'int4', 'int8', 'smallint', 'integer', 'int', 'bigint',
  'numeric', 'decimal', 'float4', 'float8', 'real', 'float', 'double precision',
  'bool', 'boolean', 'date', 'time', 'timetz', 'timestamp', 'timestamptz', 'interval',
  'json', 'jsonb', 'uuid', 'bytea',
]);

/** `CURRENT_DATE`, `LOCALTIMESTAMP`, … are allowed; CURRENT_USER, SESSION_USER, USER,
 *  CURRENT_ROLE, CURRENT_CATALOG and CURRENT_SCHEMA are not (they describe the session). */
export const ALLOWED_SQL_VALUE_FUNCTIONS: ReadonlySet<string> = new Set([
  'SVFOP_CURRENT_DATE', 'SVFOP_CURRENT_TIME', 'SVFOP_CURRENT_TIME_N',
  'SVFOP_CURRENT_TIMESTAMP', 'SVFOP_CURRENT_TIMESTAMP_N',
  'SVFOP_LOCALTIME', 'SVFOP_LOCALTIME_N', 'SVFOP_LOCALTIMESTAMP', 'SVFOP_LOCALTIMESTAMP_N',
]);

/** EXPLAIN options allowed (ANALYZE never: it executes the statement). */
export const ALLOWED_EXPLAIN_OPTIONS: ReadonlySet<string> = new Set([
  'verbose', 'costs', 'format', 'summary', 'buffers', 'memory',
]);

/** TABLESAMPLE methods allowed. */
export const ALLOWED_TABLESAMPLE_METHODS: ReadonlySet<string> = new Set(['bernoulli', 'system']);
