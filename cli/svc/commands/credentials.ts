/** `svc credentials …`: bring-your-own data-source credentials. */
import fs from 'node:fs';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { CliFailure, EXIT } from '../http.js';
import { keyValues, table } from '../output.js';
import { type CommandKit, listOf, type Obj, tableOf, tool } from './kit.js';

function keyValueOption(v: string, prev: Record<string, string> = {}): Record<string, string> {
  const i = v.indexOf('=');
  if (i <= 0) throw new InvalidArgumentError('expected key=value');
  return { ...prev, [v.slice(0, i)]: v.slice(i + 1) };
}

/** A JSON text that must be an object (`--options-json`, `--options-file`). */
function jsonObject(text: string, what: string): Obj {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new CliFailure(EXIT.usage, `${what} is not valid JSON`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new CliFailure(EXIT.usage, `${what} must be a JSON object like {"files": [...]}`);
  return v as Obj;
}

/**
 * `--option key=value`: a value starting with [ { or " is JSON (an array, object or quoted
 * string, e.g. files=[{"table":"t","url":"https://…"}]); any other value is taken as text.
 */
function optionValue(key: string, value: string): unknown {
  if (!/^\s*[[{"]/.test(value)) return value;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    throw new CliFailure(EXIT.usage, `--option ${key}=…: a value starting with [, { or " must be valid JSON`);
  }
}

export function registerCredentialCommands(program: Command, kit: CommandKit): void {
  const creds = program.command('credentials').description('bring-your-own data-source credentials (stored encrypted; never shown again)');
  creds
    .command('kinds')
    .description('the credential kinds that can be registered')
    .action(
      kit.action(async (c) =>
        kit.show(c, await kit.call(c, 'loading kinds', tool('list_credential_kinds')({})), (b) => {
          const kinds = listOf(b, 'kinds');
          return kinds.length ? table(Object.keys(kinds[0] ?? {}).slice(0, 4), kinds) : keyValues(b);
        }),
      ),
    );
  creds
    .command('list')
    .description('registered credentials (metadata only)')
    .action(kit.action(async (c) => kit.show(c, await kit.call(c, 'loading credentials', tool('list_credentials')({})), tableOf('credentials', ['connector_kind', 'hint', 'created_at', 'last_used_at'], 'no credentials'))));
  creds
    .command('add')
    .description('register (or replace) the credential of a connector kind')
    .argument('<connector_kind>')
    .addOption(new Option('--secret <secret>', 'the connection URL, API key or token (visible in your shell history: prefer --secret-stdin)').conflicts(['secretStdin']))
    .option('--secret-stdin', 'read the secret from standard input')
    .option('--option <key=value>', 'a kind-specific option (repeat for more); a value starting with [ { or " is JSON, e.g. files=[{"table":"t","url":"https://…"}]', keyValueOption)
    .addOption(new Option('--options-json <json>', 'all options as one JSON object, e.g. {"files":[…]} (--option entries are added on top)').conflicts(['optionsFile']))
    .option('--options-file <path>', 'read the options JSON object from a file')
    .action(
      kit.action(async (c, kind: string, o: { secret?: string; secretStdin?: boolean; option?: Record<string, string>; optionsJson?: string; optionsFile?: string }) => {
        const secret = o.secretStdin ? (await kit.io.readStdin()).replace(/\r?\n$/, '') : o.secret;
        // an explicit empty secret is sent as it is: http-files with public files takes none
        if (secret === undefined) throw new CliFailure(EXIT.usage, "give the secret with --secret-stdin (recommended) or --secret <secret> (--secret '' for public http-files)");
        let options: Obj | undefined;
        if (o.optionsJson !== undefined) options = jsonObject(o.optionsJson, '--options-json');
        if (o.optionsFile !== undefined) {
          let text: string;
          try {
            text = fs.readFileSync(o.optionsFile, 'utf8');
          } catch (err) {
            throw new CliFailure(EXIT.usage, `cannot read --options-file ${o.optionsFile}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
          }
          options = jsonObject(text, `--options-file ${o.optionsFile}`);
        }
        for (const [k, v] of Object.entries(o.option ?? {})) options = { ...(options ?? {}), [k]: optionValue(k, v) };
        kit.show(c, await kit.call(c, 'storing credential', tool('add_credential')({ connector_kind: kind, secret, ...(options !== undefined ? { options } : {}) })));
      }),
    );
  creds
    .command('delete')
    .description('remove the credential of a connector kind')
    .argument('<connector_kind>')
    .action(kit.action(async (c, kind: string) => kit.show(c, await kit.call(c, 'deleting credential', tool('delete_credential')({ connector_kind: kind })), () => `Credential ${kind} deleted.\n`)));
}
