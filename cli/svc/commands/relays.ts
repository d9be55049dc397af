/** `svc relay …`: enrollment tokens, list, show, certificate renewal and rotation, delete. */
import fs from 'node:fs';
import type { Command } from 'commander';
import { CliFailure, EXIT } from '../http.js';
import { keyValues } from '../output.js';
import { type CommandKit, positiveInt, tableOf, tool } from './kit.js';

export function registerRelayCommands(program: Command, kit: CommandKit): void {
  const relay = program.command('relay').description('relays: enrollment tokens, list, certificate renewal and rotation, delete (enroll with svc-relay)');
  relay
    .command('token')
    .description('a single-use enrollment token for svc-relay enroll')
    .option('--ttl <seconds>', 'validity 60…86400 (default 3600)', positiveInt('--ttl', 60, 86_400))
    .option('--name <name>', 'a name for the relay')
    .action(
      kit.action(async (c, o: { ttl?: number; name?: string }) =>
        kit.show(c, await kit.call(c, 'creating token', tool('create_relay_enroll_token')({ ttl_seconds: o.ttl, name: o.name })), (b) =>
          `${keyValues(b)}Next, on the database host: svc-relay enroll --control-plane ${c.client.baseUrl} --token ${String(b['token'])} --config-dir /etc/svc-relay\n`,
        ),
      ),
    );
  relay
    .command('list')
    .description('relays with status, last seen and certificate expiry')
    .action(kit.action(async (c) => kit.show(c, await kit.call(c, 'loading relays', tool('list_relays')({})), tableOf('relays', ['relay_id', 'name', 'status', 'upgrade_required', 'last_seen_at', 'certificate_expires_at', 'version'], 'no relays'))));
  relay
    .command('show')
    .description('one relay with its certificates and events')
    .argument('<relay_id>')
    .action(kit.action(async (c, id: string) => kit.show(c, await kit.call(c, 'loading relay', tool('describe_relay')({ relay_id: id })))));
  for (const [name, toolName, what] of [
    ['renew', 'renew_relay', 'renew the certificate from a CSR (the key may stay)'],
    ['rotate', 'rotate_relay_certificate', 'rotate to a new key pair (CSR of a key this relay never used)'],
  ] as const) {
    relay
      .command(name)
      .description(what)
      .argument('<relay_id>')
      .requiredOption('--csr <file>', 'PEM certificate signing request made on the relay host')
      .action(
        kit.action(async (c, id: string, o: { csr: string }) => {
          let pem: string;
          try {
            pem = fs.readFileSync(o.csr, 'utf8');
          } catch (err) {
            throw new CliFailure(EXIT.usage, `cannot read --csr ${o.csr}: ${(err as Error).message}`);
          }
          kit.show(c, await kit.call(c, `${name}ing`, tool(toolName)({ relay_id: id, csr_pem: pem })), (b) => `${keyValues({ relay_id: b['relay_id'], serial: b['serial'], expires_at: b['expires_at'] })}certificate_pem:\n${String(b['certificate_pem'])}`);
        }),
      );
  }
  relay
    .command('delete')
    .description('delete a relay: its certificates are revoked and its tunnel closes at once')
    .argument('<relay_id>')
    .action(kit.action(async (c, id: string) => kit.show(c, await kit.call(c, 'deleting relay', tool('delete_relay')({ relay_id: id })), (b) => `Relay ${String(b['relay_id'])} is ${String(b['status'])}.\n`)));
}
