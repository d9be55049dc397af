#!/usr/bin/env node
/**
 * `svc-relay` — the relay daemon customers run beside their PostgreSQL.
 *
 *   svc-relay enroll --control-plane <url> --token <t> --config-dir <dir> [--name <n>] [--force]
 *   svc-relay run --config-dir <dir> [--database-url-file <path> | --database-url <url>] [--health-port <port>]
 *                 (else DATABASE_URL, else the PG* variables: relay-agent/database-url.ts)
 *                 [--max-rows <n>] [--max-bytes <n>] [--statement-timeout-ms <ms>] [--pool-size <n>]
 *
 * Exit status: 0 ok, 2 usage, 1 failure (the coded message on stderr).
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { DEFAULT_EXECUTOR_LIMITS, RelayAgent, RelayCredentials, RelayError, createExecutor, enroll, loadConfig, startHealthServer, wsDialer, RELAY_AGENT_VERSION, type HealthServer } from '../relay-agent/index.js';
import { resolveDatabaseUrl } from '../relay-agent/database-url.js';

export interface CliIo {
  out: (s: string) => void;
  err: (s: string) => void;
  /** registers the stop signal handler (default: SIGTERM and SIGINT) */
  onStop?: (cb: () => void) => void;
}

const defaultIo: CliIo = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
  onStop: (cb) => {
    process.once('SIGTERM', cb);
    process.once('SIGINT', cb);
  },
};

function parsePort(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('must be a port number (0-65535)');
  return n;
}

/** a whole number in [min, max] */
function intOption(min: number, max: number): (v: string) => number {
  return (v) => {
    if (!/^\d+$/.test(v.trim())) throw new InvalidArgumentError(`must be a whole number from ${min} to ${max}`);
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`must be a whole number from ${min} to ${max}`);
    return n;
  };
}

interface RunOptions {
  configDir: string;
  databaseUrl?: string;
  databaseUrlFile?: string;
  healthPort?: number;
  maxRows?: number;
  maxBytes?: number;
  statementTimeoutMs?: number;
  poolSize?: number;
}

function failure(err: unknown): string {
  if (err instanceof RelayError) return err.message;
  const e = err as { code?: unknown; message?: string };
  return typeof e.code === 'string' ? `${e.code}: ${e.message ?? ''}` : `RELAY_ERR_INTERNAL: ${e.message ?? String(err)}`;
}

/** runs the CLI; resolves with the exit status */
export async function main(argv: string[], io: CliIo = defaultIo): Promise<number> {
  let status = 0;
  const program = new Command()
    .name('svc-relay')
    .description('svc relay: holds an outbound mutual-TLS tunnel to the svc control plane and runs its queries read-only on your PostgreSQL')
    .version(RELAY_AGENT_VERSION)
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showHelpAfterError();

  program
    .command('enroll')
    .description('make a key pair here, register it with an enroll token, write the relay configuration')
    .requiredOption('--control-plane <url>', 'control plane base URL')
    .requiredOption('--token <token>', 'single-use enroll token (svc relay token, or POST /v1/relays/enroll-token)')
    .requiredOption('--config-dir <dir>', 'where to write key.pem, cert.pem, ca.pem, relay.json (0600)')
    .option('--name <name>', 'a name for this relay')
    .option('--force', 'replace an existing configuration')
    .action(async (o: { controlPlane: string; token: string; configDir: string; name?: string; force?: boolean }) => {
      try {
        const r = await enroll({ controlPlane: o.controlPlane, token: o.token, configDir: o.configDir, ...(o.name !== undefined ? { name: o.name } : {}), force: o.force === true, log: (line) => io.err(`svc-relay enroll: ${line}\n`) });
        io.out(`enrolled relay ${r.relay_id}; configuration in ${r.configDir}; certificate expires ${r.expires_at}\nnext: svc-relay run --config-dir ${r.configDir} --database-url-file <a 0600 file holding postgres://readonly_role:password@host/db>\n`);
      } catch (err) {
        io.err(`svc-relay enroll: ${failure(err)}\n`);
        status = 1;
      }
    });

  program
    .command('run')
    .description('hold the tunnel and answer queries (SIGTERM drains)')
    .requiredOption('--config-dir <dir>', 'the directory enroll wrote')
    .option('--database-url-file <path>', 'a file (mode 0600) whose first line is the postgres:// URL of the database, with a read-only role')
    .option('--database-url <url>', 'the postgres:// URL itself (its password is then visible in ps; prefer --database-url-file or DATABASE_URL)')
    .option('--health-port <port>', 'serve /healthz and /metrics on 127.0.0.1:<port>', parsePort)
    .option('--max-rows <n>', `most rows one query returns, whatever the control plane asks (default ${DEFAULT_EXECUTOR_LIMITS.maxRows})`, intOption(1, 100_000_000))
    .option('--max-bytes <n>', `most bytes of values one query returns (default ${DEFAULT_EXECUTOR_LIMITS.maxBytes})`, intOption(1024, 1_000_000_000_000))
    .option('--statement-timeout-ms <ms>', `longest a statement may run (default ${DEFAULT_EXECUTOR_LIMITS.maxTimeoutMs})`, intOption(100, 86_400_000))
    .option('--pool-size <n>', 'database connections kept by the relay (default 4)', intOption(1, 200))
    .action(async (o: RunOptions) => {
      let health: HealthServer | null = null;
      let databaseUrl: string;
      try {
        const resolved = resolveDatabaseUrl({ ...(o.databaseUrl !== undefined ? { databaseUrl: o.databaseUrl } : {}), ...(o.databaseUrlFile !== undefined ? { databaseUrlFile: o.databaseUrlFile } : {}), env: process.env });
        if (resolved.warning) io.err(`svc-relay: warning: ${resolved.warning}\n`);
        io.err(`svc-relay: database URL from ${resolved.source}\n`);
        databaseUrl = resolved.url;
      } catch (err) {
        io.err(`svc-relay run: ${failure(err)}\n`);
        status = 2;
        return;
      }
      const exec = (() => {
        try {
          return createExecutor({
            databaseUrl,
            onDatabaseState: (st) =>
              io.err(
                st.reachable
                  ? 'svc-relay: the database answers\n'
                  : `svc-relay: cannot reach the database (${st.message}); queries through this relay are answered relay_unavailable until it answers\n`,
              ),
            ...(o.poolSize !== undefined ? { poolSize: o.poolSize } : {}),
            limits: {
              ...(o.maxRows !== undefined ? { maxRows: o.maxRows } : {}),
              ...(o.maxBytes !== undefined ? { maxBytes: o.maxBytes } : {}),
              ...(o.statementTimeoutMs !== undefined ? { maxTimeoutMs: o.statementTimeoutMs } : {}),
            },
          });
        } catch (err) {
          io.err(`svc-relay run: RELAY_ERR_INVALID_ARGUMENT: bad database URL: ${(err as Error).message}\n`);
          return null;
        }
      })();
      if (!exec) {
        status = 2;
        return;
      }
      try {
        const cfg = loadConfig(o.configDir, (line) => io.err(`svc-relay: ${line}\n`));
        // renewals are written back into the config dir; the dialer presents the newest certificate
        const credentials = new RelayCredentials(cfg, { configDir: o.configDir, log: (line) => io.err(`svc-relay: ${line}\n`) });
        const agent = new RelayAgent({
          dial: wsDialer(() => credentials.current),
          handler: exec.handle,
          renewal: { certificate: credentials.validity, renew: (signal) => credentials.renew(signal) },
          log: (line) => io.err(`svc-relay: ${line}\n`),
        });
        if (o.healthPort !== undefined) {
          try {
            health = await startHealthServer(agent, o.healthPort);
          } catch (err) {
            const code = (err as NodeJS.ErrnoException).code;
            if (code !== 'EADDRINUSE' && code !== 'EACCES') throw err;
            // a bad option (exit 2), not a refusal for good (exit 1: enroll again)
            const why = code === 'EADDRINUSE' ? 'is already in use (another svc-relay, or another service?)' : 'may not be opened by this user';
            io.err(`svc-relay run: RELAY_ERR_INVALID_ARGUMENT: --health-port ${o.healthPort}: 127.0.0.1:${o.healthPort} ${why}; choose another port\n`);
            status = 2;
            return;
          }
        }
        (io.onStop ?? (() => {}))(() => {
          io.err('svc-relay: draining\n');
          void agent.drain();
        });
        io.err(`svc-relay: relay ${cfg.relay_id} dialing ${cfg.tunnel_url}${health ? `; health on 127.0.0.1:${health.port}` : ''}\n`);
        const renewAt = agent.renewAt();
        io.err(`svc-relay: certificate ${credentials.validity.serial} valid until ${credentials.validity.notAfter.toISOString()}${renewAt !== null ? `; renews itself at about ${new Date(renewAt).toISOString()}` : ''}\n`);
        void exec.probe(); // says in the log whether the database answers (never ends the run: it may come up later)
        const exit = await agent.run();
        if (exit.reason === 'permanent') {
          io.err(`svc-relay run: RELAY_ERR_PERMANENT_REFUSAL: ${exit.message}\n`);
          status = 1;
        }
      } catch (err) {
        io.err(`svc-relay run: ${failure(err)}\n`);
        status = 1;
      } finally {
        await health?.close();
        await exec.close().catch(() => {});
      }
    });

  if (argv.length === 0) {
    io.err(program.helpInformation());
    return 2;
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return 0;
      return 2;
    }
    io.err(`svc-relay: ${failure(err)}\n`);
    return 1;
  }
  return status;
}

function isEntryPoint(): boolean {
  const arg = process.argv[1];
  if (!arg) return false;
  try {
    return realpathSync(arg) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`svc-relay: ${failure(err)}\n`);
      process.exit(1);
    },
  );
}
