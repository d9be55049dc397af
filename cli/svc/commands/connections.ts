/** `svc connect`, `connections`, `connection`, `schema`, `revoke`, `query`: connections and queries. */
import { type Command, Option } from 'commander';
import { csv, jsonl, keyValues, table } from '../output.js';
import { type CommandKit, listOf, type Obj, positiveInt, tableOf, tool } from './kit.js';

const collect = (v: string, prev: string[] = []): string[] => [...prev, v];

/** The next step once a connection is open or its tables are listed: a statement on it. */
const nextQuery = (connectionId: string, sql: string): string => `Next: svc query ${connectionId} "${sql}"\n`;

export function registerConnectionCommands(program: Command, kit: CommandKit): void {
  program
    .command('connect')
    .description('open a scoped, time-limited connection to a target')
    .argument('<target_id>')
    .requiredOption('--scope <scope>', 'a scope of the target grammar, e.g. read:encounters or period:2024-Q1 (repeat for more)', collect)
    .option('--tier <tier>', 'a tier the target lists (default: its first)')
    .option('--ttl <seconds>', 'lifetime in seconds, 1…604800 (default 3600)', positiveInt('--ttl', 1, 604_800))
    .action(
      kit.action(async (c, target: string, o: { scope: string[]; tier?: string; ttl?: number }) =>
        kit.show(c, await kit.call(c, 'opening connection', tool('open_connection')({ target_id: target, scopes: o.scope, tier: o.tier, ttl_seconds: o.ttl })), (b) =>
          `${keyValues({ connectionId: b['connectionId'], target_id: b['target_id'], scopes: b['scopes'], tier: b['tier'], expires_at: b['expires_at'], audit_genesis_hash: b['audit_genesis_hash'] })}${nextQuery(String(b['connectionId']), 'SELECT …')}`,
        ),
      ),
    );

  program
    .command('connections')
    .description('list connections, newest first')
    .addOption(new Option('--status <status>', 'only this status').choices(['active', 'expired', 'revoked']))
    .option('--limit <n>', 'page size 1…500', positiveInt('--limit', 1, 500))
    .option('--cursor <cursor>', 'next_cursor of the previous page')
    .action(
      kit.action(async (c, o: { status?: string; limit?: number; cursor?: string }) =>
        kit.show(c, await kit.call(c, 'loading connections', tool('list_connections')(o as Obj)), (b) => {
          const out = tableOf('connections', ['connectionId', 'target_id', 'status', 'scopes', 'expires_at', 'queries'], 'no connections')(b);
          return b['next_cursor'] ? `${out}more: svc connections --cursor ${String(b['next_cursor'])}\n` : out;
        }),
      ),
    );

  program
    .command('connection')
    .description('one connection: scopes, status, expiry, audit head, counters')
    .argument('<connection_id>')
    .action(kit.action(async (c, id: string) => kit.show(c, await kit.call(c, 'loading connection', tool('describe_connection')({ connection_id: id })))));

  program
    .command('schema')
    .description('the tables and columns a connection may read, listed from the source (audited, not billed)')
    .argument('<connection_id>')
    .action(
      kit.action(async (c, id: string) =>
        kit.show(c, await kit.call(c, 'listing tables', tool('describe_schema')({ connection_id: id })), (b) => {
          const tables = listOf(b, 'tables');
          const missing = Array.isArray(b['missing_tables']) ? (b['missing_tables'] as unknown[]).map(String) : [];
          const parts = tables.map((x) => {
            const columns = listOf(x, 'columns').map((col) => ({ column: col['name'], type: col['type'], nullable: col['nullable'] === true ? 'yes' : 'no' }));
            const estimate = typeof x['row_estimate'] === 'number' ? `  (about ${x['row_estimate']} rows)` : '';
            return `${String(x['name'])}${estimate}\n${table(['column', 'type', 'nullable'], columns)}`;
          });
          const first = tables[0] ? String(tables[0]['name']) : undefined;
          return (
            (parts.length ? parts.join('\n') : 'no tables the connection may read were found at the source\n') +
            (missing.length ? `not found at the source (scoped, but absent or unreadable with the credential): ${missing.join(', ')}\n` : '') +
            (b['truncated'] === true ? 'the listing was cut short: the source holds more columns than one listing reads\n' : '') +
            (first ? nextQuery(id, `SELECT * FROM ${first} LIMIT 10`) : '')
          );
        }),
      ),
    );

  program
    .command('revoke')
    .description('revoke a connection now')
    .argument('<connection_id>')
    .action(kit.action(async (c, id: string) => kit.show(c, await kit.call(c, 'revoking', tool('revoke_connection')({ connection_id: id })), (b) => `Connection ${String(b['connectionId'])} is ${String(b['status'])}.\n`)));

  program
    .command('query')
    .description('run one read statement on a connection (a table by default)')
    .argument('<connection_id>')
    .argument('<sql>', 'one read statement (quote it)')
    .addOption(new Option('--jsonl', 'one JSON object per row').conflicts(['csv']))
    .addOption(new Option('--csv', 'CSV with a header line (RFC 4180)').conflicts(['jsonl']))
    .action(
      kit.action(async (c, id: string, sql: string, o: { jsonl?: boolean; csv?: boolean }) => {
        const b = await kit.call(c, 'running query', tool('query')({ connection_id: id, sql }));
        const rows = listOf(b, 'rows');
        const cols = Array.isArray(b['columns']) ? (b['columns'] as Obj[]).map((x) => String(x['name'])) : Object.keys(rows[0] ?? {});
        if (c.json) return kit.io.out(`${JSON.stringify(b)}\n`);
        if (o.jsonl) return kit.io.out(jsonl(rows));
        if (o.csv) return kit.io.out(csv(cols, rows));
        kit.io.out(
          `${table(cols, rows, 'NULL')}(${rows.length} row${rows.length === 1 ? '' : 's'}${b['truncated'] === true ? ', truncated at the response cap' : ''}) ` +
            `cost ${String(b['cost_cents'])}¢ (${String(b['billed_to'])}), ${String(b['bytes_egressed'])} bytes, audit event ${String(b['audit_event_id'])}\n`,
        );
      }),
    );
}
