/**
 * The MySQL checker's allow-lists: the clauses and options of a SELECT, set operations, expression
 * node types, operators and functions; and the node types refused outright, with their names.
 */

export const SELECT_KEYS = new Set(['with', 'type', 'options', 'distinct', 'columns', 'into', 'from', 'where', 'groupby', 'having', 'orderby', 'collate', 'limit', 'locking_read', 'window', '_next', 'set_op', 'parentheses_symbol', '_parentheses']);
export const SELECT_OPTIONS = new Set(['SQL_NO_CACHE', 'SQL_SMALL_RESULT', 'SQL_BIG_RESULT', 'SQL_BUFFER_RESULT', 'STRAIGHT_JOIN', 'ALL', 'DISTINCT', 'DISTINCTROW']);
export const SET_OPS = new Set(['union', 'union all', 'union distinct', 'intersect', 'except', 'intersect all', 'except all', 'minus']);

export const EXPR_TYPES = new Set([
  'column_ref', 'number', 'single_quote_string', 'double_quote_string', 'natural_string', 'hex_string', 'full_hex_string', 'bit_string', 'bool', 'null',
  'star', 'binary_expr', 'unary_expr', 'function', 'aggr_func', 'case', 'when', 'else', 'cast', 'interval', 'expr_list', 'extract', 'datatype', 'collate',
  'window', 'default', 'ASC', 'DESC', 'window_frame', 'date', 'datetime', 'time', 'timestamp', 'bigint', 'backticks_quote_string',
]);
export const REFUSED_TYPES: Readonly<Record<string, string>> = {
  var: 'user and system variables (@x, @@x)',
  assign: 'assignments (:=)',
  param: 'placeholders',
  into: 'INTO',
};

export const OPERATORS = new Set([
  '=', '<>', '!=', '<', '<=', '>', '>=', '<=>', 'AND', 'OR', 'XOR', '&&', '||', 'NOT', '!', '+', '-', '*', '/', '%', 'DIV', 'MOD', '&', '|', '^', '<<', '>>', '~',
  'IS', 'IS NOT', 'IN', 'NOT IN', 'LIKE', 'NOT LIKE', 'REGEXP', 'NOT REGEXP', 'RLIKE', 'NOT RLIKE', 'BETWEEN', 'NOT BETWEEN', 'EXISTS', 'NOT EXISTS', 'ESCAPE', 'SOUNDS LIKE',
]);

export const MYSQL_ALLOWED_FUNCTIONS: ReadonlySet<string> = new Set([
  // aggregates and windows
  'COUNT', 'SUM', 'AVG', 'MIN', 'MAX', 'GROUP_CONCAT', 'STD', 'STDDEV', 'STDDEV_POP', 'STDDEV_SAMP', 'VARIANCE', 'VAR_POP', 'VAR_SAMP', 'BIT_AND', 'BIT_OR', 'BIT_XOR',
  'JSON_ARRAYAGG', 'JSON_OBJECTAGG', 'ROW_NUMBER', 'RANK', 'DENSE_RANK', 'NTILE', 'LAG', 'LEAD', 'FIRST_VALUE', 'LAST_VALUE', 'NTH_VALUE', 'PERCENT_RANK', 'CUME_DIST',
  // control flow
  'IF', 'IFNULL', 'NULLIF', 'COALESCE', 'ISNULL', 'GREATEST', 'LEAST', 'EXISTS', 'NOT EXISTS',
  // strings
  'CONCAT', 'CONCAT_WS', 'LOWER', 'UPPER', 'LCASE', 'UCASE', 'LENGTH', 'CHAR_LENGTH', 'CHARACTER_LENGTH', 'OCTET_LENGTH', 'BIT_LENGTH', 'SUBSTRING', 'SUBSTR', 'MID',
  'SUBSTRING_INDEX', 'LEFT', 'RIGHT', 'TRIM', 'LTRIM', 'RTRIM', 'REPLACE', 'REVERSE', 'LPAD', 'RPAD', 'LOCATE', 'INSTR', 'POSITION', 'FORMAT', 'HEX', 'UNHEX', 'STRCMP',
  'FIELD', 'FIND_IN_SET', 'ELT', 'ASCII', 'ORD', 'CHAR', 'SOUNDEX', 'QUOTE', 'INSERT', 'REGEXP_REPLACE', 'REGEXP_SUBSTR', 'REGEXP_INSTR', 'MD5', 'SHA1', 'SHA2', 'CRC32',
  'TO_BASE64', 'FROM_BASE64', 'CONVERT',
  // numbers
  'ABS', 'CEIL', 'CEILING', 'FLOOR', 'ROUND', 'TRUNCATE', 'MOD', 'POW', 'POWER', 'SQRT', 'EXP', 'LN', 'LOG', 'LOG10', 'LOG2', 'SIGN', 'PI', 'DEGREES', 'RADIANS',
  'SIN', 'COS', 'TAN', 'ASIN', 'ACOS', 'ATAN', 'ATAN2', 'COT', 'CONV', 'BIN', 'OCT',
  // dates
  'NOW', 'CURDATE', 'CURRENT_DATE', 'CURTIME', 'CURRENT_TIME', 'CURRENT_TIMESTAMP', 'UTC_DATE', 'UTC_TIME', 'UTC_TIMESTAMP', 'LOCALTIME', 'LOCALTIMESTAMP', 'SYSDATE',
  'DATE', 'TIME', 'YEAR', 'MONTH', 'DAY', 'DAYOFMONTH', 'DAYOFWEEK', 'DAYOFYEAR', 'WEEK', 'WEEKDAY', 'WEEKOFYEAR', 'YEARWEEK', 'QUARTER', 'HOUR', 'MINUTE', 'SECOND',
  'MICROSECOND', 'MONTHNAME', 'DAYNAME', 'DATE_FORMAT', 'TIME_FORMAT', 'DATE_ADD', 'DATE_SUB', 'ADDDATE', 'SUBDATE', 'ADDTIME', 'SUBTIME', 'DATEDIFF', 'TIMEDIFF',
  'TIMESTAMPDIFF', 'TIMESTAMPADD', 'STR_TO_DATE', 'UNIX_TIMESTAMP', 'FROM_UNIXTIME', 'LAST_DAY', 'MAKEDATE', 'MAKETIME', 'TO_DAYS', 'FROM_DAYS', 'PERIOD_ADD',
  'PERIOD_DIFF', 'SEC_TO_TIME', 'TIME_TO_SEC', 'TIMESTAMP', 'EXTRACT',
  // JSON
  'JSON_EXTRACT', 'JSON_UNQUOTE', 'JSON_LENGTH', 'JSON_CONTAINS', 'JSON_CONTAINS_PATH', 'JSON_KEYS', 'JSON_OBJECT', 'JSON_ARRAY', 'JSON_VALUE', 'JSON_TYPE', 'JSON_VALID',
  'JSON_QUOTE', 'JSON_SEARCH', 'JSON_DEPTH',
]);
