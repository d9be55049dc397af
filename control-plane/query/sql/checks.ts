/**
 * The SQL policy's checks of single nodes, wherever the walker meets them: function calls,
 * operators, cast types, SQL value functions (CURRENT_USER, …) and TABLESAMPLE methods, each
 * against its allow-list (allowlists.ts).
 */
import {
  ALLOWED_CAST_TYPES,
  ALLOWED_FUNCTION_NAMES,
  ALLOWED_SQL_VALUE_FUNCTIONS,
  ALLOWED_TABLESAMPLE_METHODS,
} from './allowlists.js';
import { unsupported, violation } from './errors.js';
import type { Obj } from './grammar.js';
import { quoteIdent } from './quote.js';

export function checkFunction(fc: Obj): void {
  const names = listStrings(fc['funcname'], 'FuncCall.funcname');
  const name = names[names.length - 1];
  const written = names.join('.');
  const qualifiedOk = names.length === 1 || (names.length === 2 && names[0] === 'pg_catalog');
  if (!name || !qualifiedOk || !ALLOWED_FUNCTION_NAMES.has(name)) {
    throw violation(`function ${written}() is not allowed: only allow-listed functions (aggregates, window, math, string, date/time, JSON and array functions) can be used`, {
      reason: 'function_not_allowed',
      function: written,
    });
  }
  if (name === 'extract') {
    // EXTRACT(field FROM x): the field must be a plain word (the deparser prints it raw)
    const args = fc['args'];
    const first = Array.isArray(args) ? (args[0] as Obj | undefined) : undefined;
    const field = ((first?.['A_Const'] as Obj | undefined)?.['sval'] as Obj | undefined)?.['sval'];
    if (fc['funcformat'] === 'COERCE_SQL_SYNTAX' && (typeof field !== 'string' || !/^[A-Za-z_]+$/.test(field))) {
      throw violation('EXTRACT needs a plain field name such as YEAR, MONTH, DAY, EPOCH', {
        reason: 'construct_not_allowed',
        construct: 'EXTRACT',
        function: written,
      });
    }
  }
}

/** the allow-listed functions whose result is a record, with its fields */
const RECORD_FIELDS: ReadonlyMap<string, ReadonlySet<string>> = new Map(
  ['json_each', 'json_each_text', 'jsonb_each', 'jsonb_each_text'].map((f) => [f, new Set(['key', 'value'])]),
);

/**
 * `(x).name`, `(x)[1].name`: a field of x when x is a composite value, else PostgreSQL's
 * function-call notation `name(x)`, a function the FuncCall check never sees (`(q).ts_stat` runs
 * the query text q; search_path = pg_catalog does not stop it, the catalog is where it lives).
 * Svc does not know x's type, so a name after a value is allowed only where either reading is
 * allowed: a field of the record an allow-listed `*_each` function returns (`key`, `value`), or
 * the name of an allowed function.
 */
export function checkIndirection(ind: Obj): void {
  const list = ind['indirection'];
  if (!Array.isArray(list)) return; // (the walk refuses the malformed field)
  let fields = recordFields(ind['arg']);
  for (const el of list) {
    const s = (el as Obj | undefined)?.['String'] as Obj | undefined;
    if (s === undefined) {
      fields = undefined; // a subscript or `.*`: what follows is on another value
      continue;
    }
    const name = s['sval'];
    if (typeof name !== 'string') throw unsupported('A_Indirection.indirection');
    if (!fields?.has(name) && !ALLOWED_FUNCTION_NAMES.has(name)) {
      throw violation(`(…).${quoteIdent(name)} is not allowed: after a value that is not composite PostgreSQL reads it as the function ${name}(…), outside the allow-list; select a table's column as alias.column, and a field of json_each/jsonb_each(_text) as (…).key or (…).value`, {
        reason: 'function_not_allowed',
        function: name,
        construct: `(…).${name}`,
      });
    }
    fields = undefined;
  }
}

function recordFields(arg: unknown): ReadonlySet<string> | undefined {
  const fc = (arg as Obj | undefined)?.['FuncCall'] as Obj | undefined;
  const names = Array.isArray(fc?.['funcname']) ? (fc['funcname'] as unknown[]).map(stringValue) : [];
  const qualifiedOk = names.length === 1 || (names.length === 2 && names[0] === 'pg_catalog');
  return qualifiedOk ? RECORD_FIELDS.get(names[names.length - 1] ?? '') : undefined;
}

export function checkSampleMethod(ts: Obj): void {
  const method = ts['method'];
  const names = Array.isArray(method) ? method.map(stringValue) : [];
  const name = names.join('.');
  if (names.length !== 1 || !ALLOWED_TABLESAMPLE_METHODS.has(names[0] ?? '')) {
    throw violation(`TABLESAMPLE method ${quoteIdent(name || '?')} is not allowed; use BERNOULLI or SYSTEM`, {
      reason: 'tablesample_method',
      construct: `TABLESAMPLE ${name}`,
    });
  }
}

function stringValue(n: unknown): string {
  const s = (n as Obj | undefined)?.['String'] as Obj | undefined;
  const v = s?.['sval'];
  return typeof v === 'string' ? v : '';
}

function listStrings(list: unknown, where: string): string[] {
  if (!Array.isArray(list)) throw unsupported(where);
  return list.map((n) => {
    const s = (n as Obj | undefined)?.['String'] as Obj | undefined;
    const v = s?.['sval'];
    if (typeof v !== 'string') throw unsupported(where);
    return v;
  });
}

export function checkOperator(name: unknown): void {
  if (name === undefined) return;
  const names = listStrings(name, 'operator');
  if (names.length === 1) return;
  if (names.length === 2 && names[0] === 'pg_catalog') return;
  const written = `OPERATOR(${names.join('.')})`;
  throw violation(`${written} is not allowed: operators may only be qualified with pg_catalog`, {
    reason: 'operator_not_allowed',
    construct: written,
  });
}

export function checkType(tn: Obj): void {
  const names = listStrings(tn['names'], 'TypeName.names');
  const name = names[names.length - 1] ?? '';
  const written = names.join('.') + (tn['pct_type'] ? '%TYPE' : '');
  const qualifiedOk = names.length === 1 || (names.length === 2 && names[0] === 'pg_catalog');
  if (!qualifiedOk || !ALLOWED_CAST_TYPES.has(name) || tn['pct_type'] === true || tn['setof'] === true) {
    const reg = /^reg[a-z]*$/.test(name) ? ' (reg* types look up system catalogs)' : '';
    throw violation(`type ${written} is not allowed${reg}; values can be cast to text, varchar, char, integer types, numeric, real/double precision, boolean, date, time, timestamp, timestamptz, interval, json, jsonb, uuid, bytea and arrays of these`, {
      reason: 'type_not_allowed',
      construct: written,
    });
  }
}

export function checkSqlValueFunction(svf: Obj): void {
  const op = String(svf['op']);
  if (!ALLOWED_SQL_VALUE_FUNCTIONS.has(op)) {
    const name = op.replace(/^SVFOP_/, '').toLowerCase();
    throw violation(`${name.toUpperCase()} is not allowed: only allow-listed functions can be used`, {
      reason: 'function_not_allowed',
      function: name,
    });
  }
}
