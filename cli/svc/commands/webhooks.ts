/** `svc webhook …`: the receiver, mock events, deliveries, replay, fault injection. */
import { Argument, type Command, Option } from 'commander';
import { CliFailure, EXIT } from '../http.js';
import { table } from '../output.js';
import { type CommandKit, listOf, positiveInt, tool } from './kit.js';

export function registerWebhookCommands(program: Command, kit: CommandKit): void {
  const webhook = program.command('webhook').description('signed webhook deliveries: receiver, tests, history, replay, fault injection');
  webhook
    .command('set')
    .description('set the receiver URL (organization default, or a connection override with --connection)')
    .argument('<url>')
    .option('--secret <secret>', 'signing secret (default: one is generated, svcsec_…, shown once)')
    .option('--connection <connection_id>', 'set this connection’s override instead')
    .action(kit.action(async (c, url: string, o: { secret?: string; connection?: string }) => kit.show(c, await kit.call(c, 'saving webhook', tool('set_webhook')({ url, secret: o.secret, connection_id: o.connection })))));
  webhook
    .command('test')
    .description('send a mock event through the signed pipeline')
    .option('--scenario <scenario_id>', 'mock scenario')
    .option('--connection <connection_id>', 'for this connection')
    .action(kit.action(async (c, o: { scenario?: string; connection?: string }) => kit.show(c, await kit.call(c, 'sending mock event', tool('trigger_mock_event')({ scenario_id: o.scenario, connection_id: o.connection })))));
  webhook
    .command('deliveries')
    .description('list deliveries with their attempts')
    .option('--connection <connection_id>', 'only this connection’s')
    .addOption(new Option('--status <status>', 'only deliveries in this status').choices(['pending', 'delivered', 'failed']))
    .option('--event <event>', 'only deliveries of this event')
    .option('--limit <n>', 'at most this many (default 100)', positiveInt('--limit', 1, 500))
    .action(
      kit.action(async (c, o: { connection?: string; status?: string; event?: string; limit?: number }) =>
        kit.show(c, await kit.call(c, 'loading deliveries', tool('list_webhook_deliveries')({ connection_id: o.connection, status: o.status, event: o.event, limit: o.limit })), (b) => {
          const rows = listOf(b, 'deliveries').map((d) => ({ ...d, attempts: Array.isArray(d['attempts']) ? d['attempts'].length : d['attempts'] }));
          return rows.length ? table(['delivery_id', 'event', 'status', 'attempts', 'connection_id'], rows) : 'no deliveries\n';
        }),
      ),
    );
  webhook
    .command('delivery')
    .description('one delivery with its attempts and the envelope as sent')
    .argument('<delivery_id>')
    .action(kit.action(async (c, id: string) => kit.show(c, await kit.call(c, 'loading delivery', tool('describe_webhook_delivery')({ delivery_id: id })))));
  webhook
    .command('replay')
    .description('send a delivery again with the same delivery id')
    .argument('<delivery_id>')
    .action(kit.action(async (c, id: string) => kit.show(c, await kit.call(c, 'replaying', tool('replay_webhook_delivery')({ delivery_id: id })))));
  webhook
    .command('chaos')
    .description('inject a fault into your own deliveries (sandbox); without a mode, show the current profile')
    .addArgument(new Argument('[mode]', 'the fault profile').choices(['off', 'transient_503', 'slow', 'rate_limit']))
    .option('--failures <n>', 'transient_503, rate_limit: attempts of each delivery that fail', positiveInt('--failures', 1, 10))
    .option('--retry-after <seconds>', 'rate_limit: the Retry-After of each 429', positiveInt('--retry-after', 1, 3600))
    .option('--delay-ms <ms>', 'slow: how long each attempt is held', positiveInt('--delay-ms', 1, 60_000))
    .action(
      kit.action(async (c, mode: string | undefined, o: { failures?: number; retryAfter?: number; delayMs?: number }) => {
        if (mode === undefined) {
          if (o.failures !== undefined || o.retryAfter !== undefined || o.delayMs !== undefined) throw new CliFailure(EXIT.usage, 'svc webhook chaos: --failures, --retry-after and --delay-ms need a mode');
          return kit.show(c, await kit.call(c, 'loading fault profile', tool('get_webhook_reliability')({})));
        }
        return kit.show(c, await kit.call(c, 'setting fault profile', tool('set_webhook_reliability')({ mode, failures: o.failures, retry_after_seconds: o.retryAfter, delay_ms: o.delayMs })));
      }),
    );
  webhook
    .command('show')
    .description('the receivers: the organization default and the connection overrides (URLs only)')
    .action(kit.action(async (c) => kit.show(c, await kit.call(c, 'loading webhooks', tool('get_webhook')({})))));
  webhook
    .command('delete')
    .description('remove the organization default receiver, or a connection override with --connection')
    .option('--connection <connection_id>', 'remove this connection’s override instead')
    .action(
      kit.action(async (c, o: { connection?: string }) => {
        await kit.call(c, 'removing webhook', tool('delete_webhook')({ connection_id: o.connection }));
        kit.show(c, { deleted: true, level: o.connection === undefined ? 'organization' : 'connection', connection_id: o.connection ?? null });
      }),
    );
  webhook
    .command('scenarios')
    .description('the mock event scenarios `svc webhook test --scenario` accepts')
    .action(
      kit.action(async (c) =>
        kit.show(c, await kit.call(c, 'loading scenarios', tool('list_webhook_scenarios')({})), (b) => table(['id', 'description'], listOf(b, 'scenarios'))),
      ),
    );
}
