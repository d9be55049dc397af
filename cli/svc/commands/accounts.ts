/** `svc signup`, `usage`, `billing`, `topup`: the account, its usage and its wallet. */
import type { Command } from 'commander';
import { checkWritable, readConfig, writeConfig } from '../config.js';
import { CliFailure, EXIT, localError, request } from '../http.js';
import { keyValues, withSpinner } from '../output.js';
import { type CommandKit, type Obj, positiveInt, tool } from './kit.js';

export function registerAccountCommands(program: Command, kit: CommandKit): void {
  program
    .command('signup')
    .description('create an account headlessly and store its agent key (mode 0600)')
    .requiredOption('--org <name>', 'organization name')
    .requiredOption('--agent <name>', 'agent name')
    .option('--force', 'replace a key already stored in the config file (it cannot be recovered)')
    .option('--no-save', 'print the key without storing it')
    .action(
      kit.action(async (c, o: { org: string; agent: string; force?: boolean; save: boolean }) => {
        const existing = readConfig(c.configFile);
        if (o.save && existing.api_key && !o.force) {
          throw new CliFailure(EXIT.usage, `a key is already stored in ${c.configFile}; pass --force to replace it (the old key cannot be recovered), --no-save, or set SVC_CONFIG to another file`);
        }
        if (o.save) {
          try {
            checkWritable(c.configFile);
          } catch (err) {
            const why = `cannot write ${c.configFile} (${(err as Error).message}); no account was made: set SVC_CONFIG to a file you can write, or pass --no-save to print the key instead`;
            throw new CliFailure(EXIT.usage, why, localError('config_unwritable', why));
          }
        }
        const b = await kit.call(c, 'signing up', tool('create_account')({ org_name: o.org, agent_name: o.agent }));
        let saved = o.save;
        if (o.save) {
          try {
            writeConfig(c.configFile, { api_key: String(b['apiKey']), org_id: String(b['orgId']), base_url: c.client.baseUrl });
          } catch (err) {
            // the account exists: its key is shown (once) rather than lost, and the status says it was not stored
            saved = false;
            const why = `the account was made but its key could not be stored in ${c.configFile} (${(err as Error).message}): store the key shown now, it is not shown again`;
            kit.io.err(`svc: ${why}\n`);
            kit.status = EXIT.usage;
            if (c.json) {
              kit.show(c, { ...b, ...localError('config_unwritable', why) });
              return;
            }
          }
        }
        kit.show(c, saved ? { ...b, config_file: c.configFile } : b, (x) => {
          const trial = (x['trial'] ?? {}) as Obj;
          return (
            `Account created: org ${String(x['orgId'])}\n` +
            (saved ? `Agent key stored in ${c.configFile} (mode 0600).\n` : `Agent key (shown once, store it now): ${String(x['apiKey'])}\n`) +
            `Trial: ${String(trial['queries'])} queries, ${String(trial['egressBytes'])} bytes of egress, until ${String(x['expiresAt'])}.\n` +
            'Next: svc targets\n'
          );
        });
      }),
    );

  program
    .command('usage')
    .description('usage, spend, wallet balance and the trial left')
    .action(kit.action(async (c) => kit.show(c, await kit.call(c, 'loading usage', tool('get_usage')({})))));

  program
    .command('billing')
    .description('prices, trial limits and top-up bounds')
    .action(kit.action(async (c) => kit.show(c, await kit.call(c, 'loading prices', tool('get_billing_config')({})))));

  program
    .command('topup')
    .description('credit the wallet at once (sandbox), optionally set or clear auto-reload')
    .argument('<amount_cents>', 'cents to add (100…1000000, or 0 with --auto-reload options)', positiveInt('amount_cents', 0, 1_000_000))
    .option('--auto-reload-threshold <cents>', 'reload when the balance falls below this', positiveInt('--auto-reload-threshold', 1, 1_000_000))
    .option('--auto-reload-amount <cents>', 'amount added by each reload', positiveInt('--auto-reload-amount', 1, 1_000_000))
    .option('--no-auto-reload', 'turn auto-reload off')
    .option('--idempotency-key <key>', 'a key of yours: the same top-up sent again with it within 24 hours credits once')
    .action(
      kit.action(async (c, amount: number, o: { autoReloadThreshold?: number; autoReloadAmount?: number; autoReload: boolean; idempotencyKey?: string }) => {
        if ((o.autoReloadThreshold === undefined) !== (o.autoReloadAmount === undefined)) {
          throw new CliFailure(EXIT.usage, 'give both --auto-reload-threshold and --auto-reload-amount');
        }
        const autoReload = o.autoReload === false ? null : o.autoReloadThreshold !== undefined ? { threshold_cents: o.autoReloadThreshold, amount_cents: o.autoReloadAmount } : undefined;
        const call = tool('top_up_wallet')({ amount_cents: amount, ...(autoReload !== undefined ? { auto_reload: autoReload } : {}), ...(o.idempotencyKey !== undefined ? { idempotency_key: o.idempotencyKey } : {}) });
        const r = await withSpinner(kit.io, 'topping up', () => request(c.client, call));
        const body = (r.body && typeof r.body === 'object' ? r.body : {}) as Obj;
        // the same top-up sent again with its key: the API answers the first answer, and says so in a header
        if (r.headers?.get('idempotent-replayed') !== 'true') return kit.show(c, body);
        kit.show(c, { ...body, idempotent_replayed: true }, ({ idempotent_replayed: _, ...b }) => `${keyValues(b)}replayed: the first answer to this Idempotency-Key; nothing was credited again\n`);
      }),
    );
}
