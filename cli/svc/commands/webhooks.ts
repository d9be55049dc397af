/** `svc webhook …`: the receiver, mock events, deliveries, replay, fault injection. */
import { Argument, type Command } from 'commander';
import { table } from '../output.js';
import { type CommandKit, listOf, tool } from './kit.js';

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
    .action(
      kit.action(async (c, o: { connection?: string }) =>
        kit.show(c, await kit.call(c, 'loading deliveries', tool('list_webhook_deliveries')({ connection_id: o.connection })), (b) => {
          const rows = listOf(b, 'deliveries').map((d) => ({ ...d, attempts: Array.isArray(d['attempts']) ? d['attempts'].length : d['attempts'] }));
          return rows.length ? table(['delivery_id', 'event', 'status', 'attempts', 'connection_id'], rows) : 'no deliveries\n';
        }),
      ),
    );
  webhook
    .command('replay')
    .description('send a delivery again with the same delivery id')
    .argument('<delivery_id>')
    .action(kit.action(async (c, id: string) => kit.show(c, await kit.call(c, 'replaying', tool('replay_webhook_delivery')({ delivery_id: id })))));
  webhook
    .command('chaos')
    .description('inject a fault into your own deliveries (sandbox)')
    .addArgument(new Argument('<mode>', 'the fault profile').choices(['off', 'transient_503', 'slow', 'rate_limit']))
    .action(kit.action(async (c, mode: string) => kit.show(c, await kit.call(c, 'setting fault profile', tool('set_webhook_reliability')({ mode })))));
}
