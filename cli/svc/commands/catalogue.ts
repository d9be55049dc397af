/** `svc targets`, `target`, `packs`: the catalogue. */
import { type Command, Option } from 'commander';
import { keyValues } from '../output.js';
import { type CommandKit, listOf, type Obj, tableOf, tool } from './kit.js';

/** Words joined with ", " into lines of at most `width` characters, each indented by `indent`. */
function wrapList(items: readonly string[], indent: string, width = 100): string {
  const lines: string[] = [];
  let line = '';
  for (const [i, item] of items.entries()) {
    const piece = i < items.length - 1 ? `${item},` : item;
    if (line && indent.length + line.length + 1 + piece.length > width) {
      lines.push(indent + line);
      line = piece;
    } else line = line ? `${line} ${piece}` : piece;
  }
  if (line) lines.push(indent + line);
  return lines.join('\n');
}

/**
 * `svc target`'s tables: each with its time column, then its columns as `name type`, wrapped
 * (--json has the descriptions too).
 */
function tablesText(tables: readonly Obj[]): string {
  if (tables.length === 0) return 'tables: none listed here (the database its credential or relay reaches has them): open a connection, then svc schema <connection_id> lists what it may read\n';
  const blocks = tables.map((x) => {
    const columns = Array.isArray(x['columns']) ? (x['columns'] as Obj[]) : [];
    const head = `  ${String(x['name'])}${x['time_column'] ? ` (time column ${String(x['time_column'])})` : ''}`;
    return columns.length ? `${head}\n${wrapList(columns.map((c) => `${String(c['name'])} ${String(c['type'])}`), '    ')}` : head;
  });
  return `tables:\n${blocks.join('\n')}\n`;
}

/** `svc target`'s scope grammar: each scope's name and pattern, then its description and examples, indented. */
function scopesText(scopes: readonly Obj[]): string {
  const blocks = scopes.map((x) => {
    const examples = Array.isArray(x['examples']) ? (x['examples'] as unknown[]).map(String) : [];
    return [
      `  ${String(x['name'])}${x['required'] === true ? ' (required)' : ''}: ${String(x['pattern'])}`,
      ...(typeof x['description'] === 'string' ? [`    ${x['description']}`] : []),
      ...(examples.length ? [`    e.g. ${examples.join(', ')}`] : []),
    ].join('\n');
  });
  return `scopes:\n${blocks.join('\n')}\n`;
}

export function registerCatalogueCommands(program: Command, kit: CommandKit): void {
  program
    .command('targets')
    .description('list the targets (data sources) with their kind and pack')
    .addOption(new Option('--kind <kind>', 'only demo or live targets').choices(['demo', 'live']))
    .option('--pack <id>', 'only the targets of a pack')
    .action(
      kit.action(async (c, o: { kind?: string; pack?: string }) =>
        kit.show(c, await kit.call(c, 'loading targets', tool('list_targets')({ kind: o.kind, pack: o.pack })), tableOf('targets', ['id', 'kind', 'pack', 'queryable', 'tiers', 'name'], 'no targets')),
      ),
    );

  program
    .command('target')
    .description('one target: its scope grammar, tables and tiers')
    .argument('<target_id>')
    .action(
      kit.action(async (c, id: string) =>
        kit.show(c, await kit.call(c, 'loading target', tool('describe_target')({ target_id: id })), (t) => {
          const tables = listOf(t, 'tables');
          const scopes = t['scopes'];
          return (
            keyValues({ id: t['id'], kind: t['kind'], name: t['name'], pack: t['pack'], tiers: t['tiers'], credential_kind: t['credential_kind'], queryable: t['queryable'] }) +
            scopesText(Array.isArray(scopes) ? (scopes as Obj[]) : []) +
            tablesText(tables)
          );
        }),
      ),
    );

  program
    .command('packs')
    .description('list the packs (sandbox bundles of demo targets)')
    .action(kit.action(async (c) => kit.show(c, await kit.call(c, 'loading packs', tool('list_packs')({})), tableOf('packs', ['id', 'name', 'targets'], 'no packs'))));
}
