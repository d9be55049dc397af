/**
 * The grammar the SQL policy's walker accepts. It works on the raw parse tree of libpg_query
 * (protobuf-JSON shape: a node is `{Type: {...}}`, fields whose protobuf type is a specific
 * message hold that message bare). Every node type and every field the walker may meet is
 * declared in {@link SPECS}; an unknown node type or an unknown field is refused, so nothing can
 * hide a table reference or a function call from it. {@link REFUSED} lists the node types refused
 * outright, with what the agent is told.
 */

export type Obj = Record<string, unknown>;

/** Field kinds: `v` scalar, `n` one wrapped node, `l` list of wrapped nodes, else a bare struct type. */
export type Kind = 'v' | 'n' | 'l' | string;

function spec(fields: Record<string, Kind>): ReadonlyMap<string, Kind> {
  return new Map(Object.entries(fields));
}

export const V = 'v';
export const N = 'n';
export const L = 'l';

/** Node types the walker accepts, with every field they may carry. */
export const SPECS: ReadonlyMap<string, ReadonlyMap<string, Kind>> = new Map([
  ['String', spec({ sval: V })],
  ['Integer', spec({ ival: V })],
  ['Float', spec({ fval: V })],
  ['Boolean', spec({ boolval: V })],
  ['BitString', spec({ bsval: V })],
  ['List', spec({ items: L })],
  ['A_Const', spec({ ival: 'Integer', fval: 'Float', boolval: 'Boolean', sval: 'String', bsval: 'BitString', isnull: V, location: V })],
  ['Alias', spec({ aliasname: V, colnames: L })],
  ['RangeVar', spec({ catalogname: V, schemaname: V, relname: V, inh: V, relpersistence: V, alias: 'Alias', location: V })],
  ['JoinExpr', spec({ jointype: V, isNatural: V, larg: N, rarg: N, usingClause: L, join_using_alias: 'Alias', quals: N, alias: 'Alias', rtindex: V })],
  ['RangeSubselect', spec({ lateral: V, subquery: N, alias: 'Alias' })],
  ['RangeTableSample', spec({ relation: N, method: L, args: L, repeatable: N, location: V })],
  ['SelectStmt', spec({
    distinctClause: L, targetList: L, fromClause: L, whereClause: N, groupClause: L, groupDistinct: V,
    havingClause: N, windowClause: L, valuesLists: L, sortClause: L, limitOffset: N, limitCount: N,
    limitOption: V, op: V, all: V, larg: 'SelectStmt', rarg: 'SelectStmt',
    // handled before the generic walk (refused when present / scoped):
    intoClause: 'IntoClause', lockingClause: L, withClause: 'WithClause',
  })],
  ['CTESearchClause', spec({ search_col_list: L, search_breadth_first: V, search_seq_column: V, location: V })],
  ['CTECycleClause', spec({
    cycle_col_list: L, cycle_mark_column: V, cycle_mark_value: N, cycle_mark_default: N, cycle_path_column: V,
    location: V, cycle_mark_type: V, cycle_mark_typmod: V, cycle_mark_collation: V, cycle_mark_neop: V,
  })],
  ['ResTarget', spec({ name: V, indirection: L, val: N, location: V })],
  ['ColumnRef', spec({ fields: L, location: V })],
  ['A_Star', spec({})],
  ['A_Indices', spec({ is_slice: V, lidx: N, uidx: N })],
  ['A_Indirection', spec({ arg: N, indirection: L })],
  ['A_ArrayExpr', spec({ elements: L, list_start: V, list_end: V, location: V })],
  ['A_Expr', spec({ kind: V, name: L, lexpr: N, rexpr: N, rexpr_list_start: V, rexpr_list_end: V, location: V })],
  ['TypeCast', spec({ arg: N, typeName: 'TypeName', location: V })],
  ['TypeName', spec({ names: L, typeOid: V, setof: V, pct_type: V, typmods: L, typemod: V, arrayBounds: L, location: V })],
  ['FuncCall', spec({
    funcname: L, args: L, agg_order: L, agg_filter: N, over: 'WindowDef', agg_within_group: V, agg_star: V,
    agg_distinct: V, func_variadic: V, funcformat: V, location: V,
  })],
  ['NamedArgExpr', spec({ xpr: N, arg: N, name: V, argnumber: V, location: V })],
  ['WindowDef', spec({ name: V, refname: V, partitionClause: L, orderClause: L, frameOptions: V, startOffset: N, endOffset: N, location: V })],
  ['SortBy', spec({ node: N, sortby_dir: V, sortby_nulls: V, useOp: L, location: V })],
  ['SubLink', spec({ xpr: N, subLinkType: V, subLinkId: V, testexpr: N, operName: L, subselect: N, location: V })],
  ['CaseExpr', spec({ xpr: N, casetype: V, casecollid: V, arg: N, args: L, defresult: N, location: V })],
  ['CaseWhen', spec({ xpr: N, expr: N, result: N, location: V })],
  ['CoalesceExpr', spec({ xpr: N, coalescetype: V, coalescecollid: V, args: L, location: V })],
  ['MinMaxExpr', spec({ xpr: N, minmaxtype: V, minmaxcollid: V, inputcollid: V, op: V, args: L, location: V })],
  ['NullTest', spec({ xpr: N, arg: N, nulltesttype: V, argisrow: V, location: V })],
  ['BooleanTest', spec({ xpr: N, arg: N, booltesttype: V, location: V })],
  ['BoolExpr', spec({ xpr: N, boolop: V, args: L, location: V })],
  ['SQLValueFunction', spec({ xpr: N, op: V, type: V, typmod: V, location: V })],
  ['GroupingSet', spec({ kind: V, content: L, location: V })],
  ['GroupingFunc', spec({ xpr: N, args: L, refs: L, agglevelsup: V, location: V })],
  ['RowExpr', spec({ xpr: N, args: L, row_typeid: V, row_format: V, colnames: L, location: V })],
  ['CollateClause', spec({ arg: N, collname: L, location: V })],
  ['JsonValueExpr', spec({ raw_expr: N, formatted_expr: N, format: 'JsonFormat' })],
  ['JsonFormat', spec({ format_type: V, encoding: V, location: V })],
  ['JsonReturning', spec({ format: 'JsonFormat', typid: V, typmod: V })],
  ['JsonOutput', spec({ typeName: 'TypeName', returning: 'JsonReturning' })],
  ['JsonObjectConstructor', spec({ exprs: L, output: 'JsonOutput', absent_on_null: V, unique: V, location: V })],
  ['JsonArrayConstructor', spec({ exprs: L, output: 'JsonOutput', absent_on_null: V, location: V })],
  ['JsonArrayQueryConstructor', spec({ query: N, output: 'JsonOutput', format: 'JsonFormat', absent_on_null: V, location: V })],
  ['JsonAggConstructor', spec({ output: 'JsonOutput', agg_filter: N, agg_order: L, over: 'WindowDef', location: V })],
  ['JsonObjectAgg', spec({ constructor: 'JsonAggConstructor', arg: 'JsonKeyValue', absent_on_null: V, unique: V })],
  ['JsonArrayAgg', spec({ constructor: 'JsonAggConstructor', arg: 'JsonValueExpr', absent_on_null: V })],
  ['JsonKeyValue', spec({ key: N, value: 'JsonValueExpr' })],
  ['JsonIsPredicate', spec({ expr: N, format: 'JsonFormat', item_type: V, unique_keys: V, location: V })],
  ['JsonParseExpr', spec({ expr: 'JsonValueExpr', output: 'JsonOutput', unique_keys: V, location: V })],
  ['JsonScalarExpr', spec({ expr: N, output: 'JsonOutput', location: V })],
  ['JsonSerializeExpr', spec({ expr: 'JsonValueExpr', output: 'JsonOutput', location: V })],
]);

/** Node types refused outright, with the construct name and a message. */
export const REFUSED: ReadonlyMap<string, { construct: string; message: string; reason?: string }> = new Map([
  ['ParamRef', { construct: 'parameter', message: 'parameters ($1, $2, …) are not supported; write the values inline' }],
  ['CurrentOfExpr', { construct: 'WHERE CURRENT OF', message: 'WHERE CURRENT OF is not allowed' }],
  ['RangeFunction', {
    construct: 'function in FROM',
    message: 'functions in FROM (generate_series, unnest, json_to_recordset, …) are not allowed; call an allowed set-returning function in the select list instead, e.g. FROM (SELECT unnest(x) AS v) s',
  }],
  ['RangeTableFunc', { construct: 'XMLTABLE', message: 'XMLTABLE is not allowed' }],
  ['JsonTable', { construct: 'JSON_TABLE', message: 'JSON_TABLE is not allowed' }],
  ['XmlExpr', { construct: 'XML function', message: 'XML functions are not allowed' }],
  ['XmlSerialize', { construct: 'XMLSERIALIZE', message: 'XML functions are not allowed' }],
  ['JsonFuncExpr', {
    construct: 'JSON_VALUE/JSON_QUERY/JSON_EXISTS',
    message: 'JSON_VALUE, JSON_QUERY and JSON_EXISTS are not supported; use the ->, ->> and #>> operators or jsonb_path_query_first / jsonb_path_exists',
  }],
  ['IntoClause', { construct: 'SELECT INTO', reason: 'select_into', message: 'SELECT … INTO creates a table and is not allowed; only reads can run' }],
  ['LockingClause', { construct: 'FOR UPDATE/SHARE', reason: 'locking_clause', message: 'row locking clauses (FOR UPDATE, FOR SHARE, …) are not allowed; only plain reads can run' }],
  ['MultiAssignRef', { construct: 'MultiAssignRef', message: 'this construct is not allowed in a read' }],
  ['SetToDefault', { construct: 'DEFAULT', message: 'DEFAULT is not allowed in a read' }],
  ['MergeSupportFunc', { construct: 'MERGE_ACTION', message: 'MERGE_ACTION() is not allowed' }],
]);

export const LOCK_NAMES: Record<string, string> = {
  LCS_FORKEYSHARE: 'FOR KEY SHARE',
  LCS_FORSHARE: 'FOR SHARE',
  LCS_FORNOKEYUPDATE: 'FOR NO KEY UPDATE',
  LCS_FORUPDATE: 'FOR UPDATE',
};
