/**
 * The `svc` program: global options, help and exit statuses, and its command groups, one module
 * each under commands/. Every command is a thin layer over one HTTP API call (the same call the
 * MCP tool of that operation makes), with readable output by default and --json for programs.
 */
import { Command, CommanderError } from 'commander';
import { DEFAULT_BASE_URL } from './config.js';
import { EXIT, localError } from './http.js';
import type { Io } from './output.js';
import { registerAccountCommands } from './commands/accounts.js';
import { registerAuditCommands } from './commands/audit.js';
import { registerCatalogueCommands } from './commands/catalogue.js';
import { registerConnectionCommands } from './commands/connections.js';
import { registerCredentialCommands } from './commands/credentials.js';
import { CommandKit } from './commands/kit.js';
import { registerMcpCommand } from './commands/mcp.js';
import { registerRelayCommands } from './commands/relays.js';
import { registerWebhookCommands } from './commands/webhooks.js';

export const SVC_CLI_VERSION = '0.1.0';

export async function main(argv: string[], io: Io, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const kit = new CommandKit(io, env);
  // --json (before any `--`): stdout holds only JSON, so the help and the version go there as JSON
  // (and the help's text to stderr, to be read)
  const end = argv.indexOf('--');
  const json = (end === -1 ? argv : argv.slice(0, end)).includes('--json');
  let helpText = '';
  const program = new Command()
    .name('svc')
    .description('svc: scoped, metered, audited data access for software agents (the HTTP API at --base-url, default ' + DEFAULT_BASE_URL + ')')
    .version(SVC_CLI_VERSION)
    .option('--json', 'machine-readable JSON on stdout (nothing else there)')
    .option('--base-url <url>', 'API base URL (default: SVC_BASE_URL, the stored config, or ' + DEFAULT_BASE_URL + ')')
    .exitOverride()
    .configureOutput({
      writeOut: json
        ? (s) => {
            helpText += s;
            io.err(s);
          }
        : io.out,
      writeErr: io.err,
    })
    .showHelpAfterError()
    .addHelpText(
      'after',
      `\nThe agent key is read from SVC_API_KEY, else from the config file svc signup writes (SVC_CONFIG, else $XDG_CONFIG_HOME/svc/config.json, else ~/.config/svc/config.json).\nExit status: 0 ok, 1 audit verification failed, 2 usage error, 3 authentication error (401), 4 other request error (4xx), 5 server or network error.`,
    );

  // in this order in --help
  registerAccountCommands(program, kit);
  registerCatalogueCommands(program, kit);
  registerConnectionCommands(program, kit);
  registerAuditCommands(program, kit);
  registerWebhookCommands(program, kit);
  registerRelayCommands(program, kit);
  registerCredentialCommands(program, kit);
  registerMcpCommand(program, kit);

  if (argv.length === 0) {
    io.err(program.helpInformation());
    return EXIT.usage;
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.version') {
        if (json) io.out(`${JSON.stringify({ version: SVC_CLI_VERSION })}\n`);
        return EXIT.ok;
      }
      // the help asked for (svc --help, svc help); without a command (svc --json, svc audit)
      // commander shows it on stderr as an error: a usage error, as `svc` alone is
      if (err.code === 'commander.helpDisplayed' || (err.code === 'commander.help' && err.exitCode === 0)) {
        if (json) io.out(`${JSON.stringify({ help: helpText })}\n`);
        return EXIT.ok;
      }
      const message = err.code === 'commander.help' ? 'no command given: the help on stderr lists the commands' : err.message.replace(/^error: /, '');
      // commander has said it on stderr; --json gets it on stdout too
      if (json) io.out(`${JSON.stringify(localError('usage_error', message))}\n`);
      return EXIT.usage;
    }
    throw err;
  }
  return kit.status;
}
