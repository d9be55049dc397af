/**
 * Every `svc` command: a thin layer over one HTTP API call each (the same call the MCP tool of
 * that operation makes), with readable output by default and --json for programs.
 */
import fs from 'node:fs';
import { Argument, Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { ChainVerifier, type VerifyResult } from '../../control-plane/audit/index.js';
// the tool definitions only: the MCP server SDK is loaded by `svc mcp` alone (start-up time)
import type { ApiCall } from '../../control-plane/mcp/api.js';
import { TOOLS } from '../../control-plane/mcp/tools.js';
import { configPath, ConfigFileError, DEFAULT_BASE_URL, readConfig, writeConfig } from './config.js';
import { CliFailure, EXIT, httpCaller, request, type ClientOptions } from './http.js';
import { csv, jsonl, keyValues, table, withSpinner, type Io } from './output.js';

export const SVC_CLI_VERSION = '0.1.0';

interface Globals {
  json?: boolean;
  baseUrl?: string;
}

interface Context {
  readonly client: ClientOptions;
  readonly json: boolean;
  readonly configFile: string;
}

type Obj = Record<string, unknown>;

function positiveInt(name: string, min: number, max: number): (v: string) => number {
  return (v: string) => {
    if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`${name} must be a whole number`);
    const n = Number(v);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be between ${min} and ${max}`);
    return n;
  };
}

const collect = (v: string, prev: string[] = []): string[] => [...prev, v];

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

/**
 * Verify an export offline with the published algorithm (README; control-plane/audit/chain.ts):
 * the first event links to `genesis` (default: its own prev_hash), each next one to the previous.
 */
export function verifyExport(text: string, genesis?: string): VerifyResult & { head: string | null } {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  let first: Obj | undefined;
  const events: Obj[] = [];
  for (const [i, line] of lines.entries()) {
    try {
      const e = JSON.parse(line) as unknown;
      if (!e || typeof e !== 'object' || Array.isArray(e)) throw new Error('not an object');
      events.push(e as Obj);
      first ??= e as Obj;
    } catch {
      return { verified: false, events_checked: i + 1, broken_at: i + 1, reason: `line ${i + 1} is not a JSON event`, head: null };
    }
  }
  const start = genesis ?? (typeof first?.['prev_hash'] === 'string' ? first['prev_hash'] : '');
  const v = new ChainVerifier(start);
  let head: string | null = genesis ?? null;
  for (const e of events) {
    const { hash, ...body } = e;
    if (!v.push({ seq: typeof body['seq'] === 'number' ? body['seq'] : -1, body, hash: typeof hash === 'string' ? hash : '' })) break;
    head = typeof hash === 'string' ? hash : null;
  }
  const r = v.finish();
  return { ...r, head: r.verified ? head : null };
}

export async function main(argv: string[], io: Io, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let status = EXIT.ok as number;
  const program = new Command()
    .name('svc')
    .description('svc: scoped, metered, audited data access for software agents (the HTTP API at --base-url, default ' + DEFAULT_BASE_URL + ')')
    .version(SVC_CLI_VERSION)
    .option('--json', 'machine-readable JSON on stdout (nothing else there)')
    .option('--base-url <url>', 'API base URL (default: SVC_BASE_URL, the stored config, or ' + DEFAULT_BASE_URL + ')')
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showHelpAfterError()
    .addHelpText(
      'after',
      `\nThe agent key is read from SVC_API_KEY, else from the config file svc signup writes (SVC_CONFIG, else $XDG_CONFIG_HOME/svc/config.json, else ~/.config/svc/config.json).\nExit status: 0 ok, 1 audit verification failed, 2 usage error, 3 authentication error (401), 4 other request error (4xx), 5 server or network error.`,
    );

  const context = (cmd: Command): Context => {
    const g = cmd.optsWithGlobals<Globals>();
    const configFile = configPath(env);
    const stored = readConfig(configFile);
    const baseUrl = g.baseUrl ?? env['SVC_BASE_URL'] ?? stored.base_url ?? DEFAULT_BASE_URL;
    try {
      const u = new URL(baseUrl);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not http');
    } catch {
      throw new CliFailure(EXIT.usage, `--base-url / SVC_BASE_URL must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
    }
    const apiKey = env['SVC_API_KEY'] || stored.api_key;
    return { client: { baseUrl, apiKey, keySource: env['SVC_API_KEY'] ? 'SVC_API_KEY' : configFile }, json: g.json === true, configFile };
  };

  /** Wrap an action: resolve the context, run, print failures with their exit status. */
  const action =
    <A extends unknown[]>(fn: (c: Context, ...args: A) => Promise<void>) =>
    async (...args: unknown[]): Promise<void> => {
      const cmd = args[args.length - 1] as Command;
      let json = false;
      try {
        const c = context(cmd);
        json = c.json;
        await fn(c, ...(args.slice(0, -1) as A));
      } catch (err) {
        if (err instanceof CliFailure) {
          if (json && err.body !== undefined) io.out(`${JSON.stringify(err.body)}\n`);
          io.err(`svc: ${err.message}\n`);
          status = err.exitCode;
          return;
        }
        if (err instanceof ConfigFileError) {
          io.err(`svc: ${err.message}\n`);
          status = EXIT.usage;
          return;
        }
        throw err;
      }
    };

  const call = async (c: Context, label: string, req: ApiCall): Promise<Obj> => {
    const r = await withSpinner(io, label, () => request(c.client, req));
    return (r.body && typeof r.body === 'object' ? r.body : {}) as Obj;
  };

  /** print the body as JSON (--json) or with the human renderer */
  const show = (c: Context, body: Obj, human: (b: Obj) => string = keyValues): void => io.out(c.json ? `${JSON.stringify(body)}\n` : human(body));

  const listOf = (b: Obj, field: string): Obj[] => (Array.isArray(b[field]) ? (b[field] as Obj[]) : []);
  const tableOf = (field: string, columns: string[], empty: string) => (b: Obj) => {
    const rows = listOf(b, field);
    return rows.length ? table(columns, rows) : `${empty}\n`;
  };

  /** The request of the MCP tool of the same operation: one definition of each call. */
  const tool = (name: string): ((args: Obj) => ApiCall) => {
    const t = TOOLS.find((x) => x.name === name);
    if (!t) throw new Error(`no tool ${name}`);
    return t.request;
  };

  // --- accounts and billing -------------------------------------------------------------------

  program
    .command('signup')
    .description('create an account headlessly and store its agent key (mode 0600)')
    .requiredOption('--org <name>', 'organization name')
    .requiredOption('--agent <name>', 'agent name')
    .option('--force', 'replace a key already stored in the config file (it cannot be recovered)')
    .option('--no-save', 'print the key without storing it')
    .action(
      action(async (c, o: { org: string; agent: string; force?: boolean; save: boolean }) => {
        const existing = readConfig(c.configFile);
        if (o.save && existing.api_key && !o.force) {
          throw new CliFailure(EXIT.usage, `a key is already stored in ${c.configFile}; pass --force to replace it (the old key cannot be recovered), --no-save, or set SVC_CONFIG to another file`);
        }
        const b = await call(c, 'signing up', tool('create_account')({ org_name: o.org, agent_name: o.agent }));
        if (o.save) writeConfig(c.configFile, { api_key: String(b['apiKey']), org_id: String(b['orgId']), base_url: c.client.baseUrl });
        show(c, o.save ? { ...b, config_file: c.configFile } : b, (x) => {
          const trial = (x['trial'] ?? {}) as Obj;
          return (
            `Account created: org ${String(x['orgId'])}\n` +
            (o.save ? `Agent key stored in ${c.configFile} (mode 0600).\n` : `Agent key (shown once, store it now): ${String(x['apiKey'])}\n`) +
            `Trial: ${String(trial['queries'])} queries, ${String(trial['egressBytes'])} bytes of egress, until ${String(x['expiresAt'])}.\n` +
            'Next: svc targets\n'
          );
        });
      }),
    );

  program
    .command('usage')
    .description('usage, spend, wallet balance and the trial left')
    .action(action(async (c) => show(c, await call(c, 'loading usage', tool('get_usage')({})))));

  program
    .command('billing')
    .description('prices, trial limits and top-up bounds')
    .action(action(async (c) => show(c, await call(c, 'loading prices', tool('get_billing_config')({})))));

  program
    .command('topup')
    .description('credit the wallet at once (sandbox), optionally set or clear auto-reload')
    .argument('<amount_cents>', 'cents to add (100…1000000, or 0 with --auto-reload options)', positiveInt('amount_cents', 0, 1_000_000))
    .option('--auto-reload-threshold <cents>', 'reload when the balance falls below this', positiveInt('--auto-reload-threshold', 1, 1_000_000))
    .option('--auto-reload-amount <cents>', 'amount added by each reload', positiveInt('--auto-reload-amount', 1, 1_000_000))
    .option('--no-auto-reload', 'turn auto-reload off')
    .action(
      action(async (c, amount: number, o: { autoReloadThreshold?: number; autoReloadAmount?: number; autoReload: boolean }) => {
        if ((o.autoReloadThreshold === undefined) !== (o.autoReloadAmount === undefined)) {
          throw new CliFailure(EXIT.usage, 'give both --auto-reload-threshold and --auto-reload-amount');
        }
        const autoReload = o.autoReload === false ? null : o.autoReloadThreshold !== undefined ? { threshold_cents: o.autoReloadThreshold, amount_cents: o.autoReloadAmount } : undefined;
        show(c, await call(c, 'topping up', tool('top_up_wallet')({ amount_cents: amount, ...(autoReload !== undefined ? { auto_reload: autoReload } : {}) })));
      }),
    );

  // --- catalogue ------------------------------------------------------------------------------

  program
    .command('targets')
    .description('list the targets (data sources) with their kind and pack')
    .addOption(new Option('--kind <kind>', 'only demo or live targets').choices(['demo', 'live']))
    .option('--pack <id>', 'only the targets of a pack')
    .action(
      action(async (c, o: { kind?: string; pack?: string }) =>
        show(c, await call(c, 'loading targets', tool('list_targets')({ kind: o.kind, pack: o.pack })), tableOf('targets', ['id', 'kind', 'pack', 'queryable', 'tiers', 'name'], 'no targets')),
      ),
    );

  program
    .command('target')
    .description('one target: its scope grammar, tables and tiers')
    .argument('<target_id>')
    .action(
      action(async (c, id: string) =>
        show(c, await call(c, 'loading target', tool('describe_target')({ target_id: id })), (t) => {
          const tables = listOf(t, 'tables');
          const scopes = t['scopes'];
          return (
            keyValues({ id: t['id'], kind: t['kind'], name: t['name'], pack: t['pack'], tiers: t['tiers'], credential_kind: t['credential_kind'], queryable: t['queryable'] }) +
            `scopes: ${JSON.stringify(scopes, null, 2)}\n` +
            tablesText(tables)
          );
        }),
      ),
    );

  program
    .command('packs')
    .description('list the packs (sandbox bundles of demo targets)')
    .action(action(async (c) => show(c, await call(c, 'loading packs', tool('list_packs')({})), tableOf('packs', ['id', 'name', 'targets'], 'no packs'))));

  // --- connections and queries ----------------------------------------------------------------

  program
    .command('connect')
    .description('open a scoped, time-limited connection to a target')
    .argument('<target_id>')
    .requiredOption('--scope <scope>', 'a scope of the target grammar, e.g. read:encounters or period:2024-Q1 (repeat for more)', collect)
    .option('--tier <tier>', 'a tier the target lists (default: its first)')
    .option('--ttl <seconds>', 'lifetime in seconds, 1…604800 (default 3600)', positiveInt('--ttl', 1, 604_800))
    .action(
      action(async (c, target: string, o: { scope: string[]; tier?: string; ttl?: number }) =>
        show(c, await call(c, 'opening connection', tool('open_connection')({ target_id: target, scopes: o.scope, tier: o.tier, ttl_seconds: o.ttl })), (b) =>
          `${keyValues({ connectionId: b['connectionId'], target_id: b['target_id'], scopes: b['scopes'], tier: b['tier'], expires_at: b['expires_at'], audit_genesis_hash: b['audit_genesis_hash'] })}Next: svc query ${String(b['connectionId'])} "SELECT …"\n`,
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
      action(async (c, o: { status?: string; limit?: number; cursor?: string }) =>
        show(c, await call(c, 'loading connections', tool('list_connections')(o as Obj)), (b) => {
          const out = tableOf('connections', ['connectionId', 'target_id', 'status', 'scopes', 'expires_at', 'queries'], 'no connections')(b);
          return b['next_cursor'] ? `${out}more: svc connections --cursor ${String(b['next_cursor'])}\n` : out;
        }),
      ),
    );

  program
    .command('connection')
    .description('one connection: scopes, status, expiry, audit head, counters')
    .argument('<connection_id>')
    .action(action(async (c, id: string) => show(c, await call(c, 'loading connection', tool('describe_connection')({ connection_id: id })))));

  program
    .command('schema')
    .description('the tables and columns a connection may read, listed from the source (audited, not billed)')
    .argument('<connection_id>')
    .action(
      action(async (c, id: string) =>
        show(c, await call(c, 'listing tables', tool('describe_schema')({ connection_id: id })), (b) => {
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
            (first ? `Next: svc query ${id} "SELECT * FROM ${first} LIMIT 10"\n` : '')
          );
        }),
      ),
    );

  program
    .command('revoke')
    .description('revoke a connection now')
    .argument('<connection_id>')
    .action(action(async (c, id: string) => show(c, await call(c, 'revoking', tool('revoke_connection')({ connection_id: id })), (b) => `Connection ${String(b['connectionId'])} is ${String(b['status'])}.\n`)));

  program
    .command('query')
    .description('run one read statement on a connection (a table by default)')
    .argument('<connection_id>')
    .argument('<sql>', 'one read statement (quote it)')
    .addOption(new Option('--jsonl', 'one JSON object per row').conflicts(['csv']))
    .addOption(new Option('--csv', 'CSV with a header line (RFC 4180)').conflicts(['jsonl']))
    .action(
      action(async (c, id: string, sql: string, o: { jsonl?: boolean; csv?: boolean }) => {
        const b = await call(c, 'running query', tool('query')({ connection_id: id, sql }));
        const rows = listOf(b, 'rows');
        const cols = Array.isArray(b['columns']) ? (b['columns'] as Obj[]).map((x) => String(x['name'])) : Object.keys(rows[0] ?? {});
        if (c.json) return io.out(`${JSON.stringify(b)}\n`);
        if (o.jsonl) return io.out(jsonl(rows));
        if (o.csv) return io.out(csv(cols, rows));
        io.out(
          `${table(cols, rows)}(${rows.length} row${rows.length === 1 ? '' : 's'}${b['truncated'] === true ? ', truncated at the response cap' : ''}) ` +
            `cost ${String(b['cost_cents'])}¢ (${String(b['billed_to'])}), ${String(b['bytes_egressed'])} bytes, audit event ${String(b['audit_event_id'])}\n`,
        );
      }),
    );

  // --- audit ----------------------------------------------------------------------------------

  const audit = program.command('audit').description('verify or export a connection’s audit chain');
  audit
    .command('verify')
    .description('verify a chain on the server, or an exported JSONL file offline (--offline)')
    .argument('[connection_id]')
    .option('--offline <file>', 'verify an export (svc audit export) with the published algorithm, without the server')
    .option('--genesis <hash>', 'with --offline: the connection’s audit_genesis_hash, to pin the first event')
    .action(
      action(async (c, id: string | undefined, o: { offline?: string; genesis?: string }) => {
        let r: Obj;
        if (o.offline !== undefined) {
          if (id !== undefined) throw new CliFailure(EXIT.usage, 'give either a connection id or --offline <file>, not both');
          let text: string;
          try {
            text = fs.readFileSync(o.offline, 'utf8');
          } catch (err) {
            throw new CliFailure(EXIT.usage, `cannot read ${o.offline}: ${(err as Error).message}`);
          }
          r = { file: o.offline, ...verifyExport(text, o.genesis) };
        } else {
          if (id === undefined) throw new CliFailure(EXIT.usage, 'give a connection id (svc audit verify <connection_id>) or --offline <file>');
          r = await call(c, 'verifying', tool('verify_audit')({ connection_id: id }));
        }
        show(c, r, (x) =>
          x['verified'] === true
            ? `verified: ${String(x['events_checked'])} event(s) intact; head ${String(x['head'] ?? x['head_hash'])}\n`
            : `BROKEN at seq ${String(x['broken_at'])} (${String(x['events_checked'])} event(s) checked)${x['reason'] ? `: ${String(x['reason'])}` : ''}\n`,
        );
        if (r['verified'] !== true) status = EXIT.verifyFailed;
      }),
    );
  audit
    .command('export')
    .description('export the chain as JSONL (one canonical event per line, oldest first)')
    .argument('<connection_id>')
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .action(
      action(async (c, id: string, o: { output?: string }) => {
        const r = await withSpinner(io, 'exporting', () => request(c.client, tool('export_audit')({ connection_id: id })));
        const count = r.text.split('\n').filter(Boolean).length;
        if (o.output !== undefined) {
          fs.writeFileSync(o.output, r.text);
          show(c, { connection_id: id, events: count, file: o.output }, () => `${count} event(s) written to ${o.output}\nverify offline: svc audit verify --offline ${o.output}\n`);
        } else io.out(r.text);
      }),
    );

  // --- webhooks -------------------------------------------------------------------------------

  const webhook = program.command('webhook').description('signed webhook deliveries: receiver, tests, history, replay, fault injection');
  webhook
    .command('set')
    .description('set the receiver URL (organization default, or a connection override with --connection)')
    .argument('<url>')
    .option('--secret <secret>', 'signing secret (default: one is generated, svcsec_…, shown once)')
    .option('--connection <connection_id>', 'set this connection’s override instead')
    .action(action(async (c, url: string, o: { secret?: string; connection?: string }) => show(c, await call(c, 'saving webhook', tool('set_webhook')({ url, secret: o.secret, connection_id: o.connection })))));
  webhook
    .command('test')
    .description('send a mock event through the signed pipeline')
    .option('--scenario <scenario_id>', 'mock scenario')
    .option('--connection <connection_id>', 'for this connection')
    .action(action(async (c, o: { scenario?: string; connection?: string }) => show(c, await call(c, 'sending mock event', tool('trigger_mock_event')({ scenario_id: o.scenario, connection_id: o.connection })))));
  webhook
    .command('deliveries')
    .description('list deliveries with their attempts')
    .option('--connection <connection_id>', 'only this connection’s')
    .action(
      action(async (c, o: { connection?: string }) =>
        show(c, await call(c, 'loading deliveries', tool('list_webhook_deliveries')({ connection_id: o.connection })), (b) => {
          const rows = listOf(b, 'deliveries').map((d) => ({ ...d, attempts: Array.isArray(d['attempts']) ? d['attempts'].length : d['attempts'] }));
          return rows.length ? table(['delivery_id', 'event', 'status', 'attempts', 'connection_id'], rows) : 'no deliveries\n';
        }),
      ),
    );
  webhook
    .command('replay')
    .description('send a delivery again with the same delivery id')
    .argument('<delivery_id>')
    .action(action(async (c, id: string) => show(c, await call(c, 'replaying', tool('replay_webhook_delivery')({ delivery_id: id })))));
  webhook
    .command('chaos')
    .description('inject a fault into your own deliveries (sandbox)')
    .addArgument(new Argument('<mode>', 'the fault profile').choices(['off', 'transient_503', 'slow', 'rate_limit']))
    .action(action(async (c, mode: string) => show(c, await call(c, 'setting fault profile', tool('set_webhook_reliability')({ mode })))));

  // --- relays ---------------------------------------------------------------------------------

  const relay = program.command('relay').description('relays: enrollment tokens, list, certificate renewal and rotation, delete (enroll with svc-relay)');
  relay
    .command('token')
    .description('a single-use enrollment token for svc-relay enroll')
    .option('--ttl <seconds>', 'validity 60…86400 (default 3600)', positiveInt('--ttl', 60, 86_400))
    .option('--name <name>', 'a name for the relay')
    .action(
      action(async (c, o: { ttl?: number; name?: string }) =>
        show(c, await call(c, 'creating token', tool('create_relay_enroll_token')({ ttl_seconds: o.ttl, name: o.name })), (b) =>
          `${keyValues(b)}Next, on the database host: svc-relay enroll --control-plane ${c.client.baseUrl} --token ${String(b['token'])} --config-dir /etc/svc-relay\n`,
        ),
      ),
    );
  relay
    .command('list')
    .description('relays with status, last seen and certificate expiry')
    .action(action(async (c) => show(c, await call(c, 'loading relays', tool('list_relays')({})), tableOf('relays', ['relay_id', 'name', 'status', 'last_seen_at', 'certificate_expires_at', 'version'], 'no relays'))));
  relay
    .command('show')
    .description('one relay with its certificates and events')
    .argument('<relay_id>')
    .action(action(async (c, id: string) => show(c, await call(c, 'loading relay', tool('describe_relay')({ relay_id: id })))));
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
        action(async (c, id: string, o: { csr: string }) => {
          let pem: string;
          try {
            pem = fs.readFileSync(o.csr, 'utf8');
          } catch (err) {
            throw new CliFailure(EXIT.usage, `cannot read --csr ${o.csr}: ${(err as Error).message}`);
          }
          show(c, await call(c, `${name}ing`, tool(toolName)({ relay_id: id, csr_pem: pem })), (b) => `${keyValues({ relay_id: b['relay_id'], serial: b['serial'], expires_at: b['expires_at'] })}certificate_pem:\n${String(b['certificate_pem'])}`);
        }),
      );
  }
  relay
    .command('delete')
    .description('delete a relay: its certificates are revoked and its tunnel closes at once')
    .argument('<relay_id>')
    .action(action(async (c, id: string) => show(c, await call(c, 'deleting relay', tool('delete_relay')({ relay_id: id })), (b) => `Relay ${String(b['relay_id'])} is ${String(b['status'])}.\n`)));

  // --- credentials ----------------------------------------------------------------------------

  const creds = program.command('credentials').description('bring-your-own data-source credentials (stored encrypted; never shown again)');
  creds
    .command('kinds')
    .description('the credential kinds that can be registered')
    .action(
      action(async (c) =>
        show(c, await call(c, 'loading kinds', tool('list_credential_kinds')({})), (b) => {
          const kinds = listOf(b, 'kinds');
          return kinds.length ? table(Object.keys(kinds[0] ?? {}).slice(0, 4), kinds) : keyValues(b);
        }),
      ),
    );
  creds
    .command('list')
    .description('registered credentials (metadata only)')
    .action(action(async (c) => show(c, await call(c, 'loading credentials', tool('list_credentials')({})), tableOf('credentials', ['connector_kind', 'hint', 'created_at', 'last_used_at'], 'no credentials'))));
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
      action(async (c, kind: string, o: { secret?: string; secretStdin?: boolean; option?: Record<string, string>; optionsJson?: string; optionsFile?: string }) => {
        const secret = o.secretStdin ? (await io.readStdin()).replace(/\r?\n$/, '') : o.secret;
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
        show(c, await call(c, 'storing credential', tool('add_credential')({ connector_kind: kind, secret, ...(options !== undefined ? { options } : {}) })));
      }),
    );
  creds
    .command('delete')
    .description('remove the credential of a connector kind')
    .argument('<connector_kind>')
    .action(action(async (c, kind: string) => show(c, await call(c, 'deleting credential', tool('delete_credential')({ connector_kind: kind })), () => `Credential ${kind} deleted.\n`)));

  // --- MCP over stdio -------------------------------------------------------------------------

  program
    .command('mcp')
    .description('run the MCP tool server over stdio for a local client (it calls the API with your key)')
    .action(
      action(async (c) => {
        if (!c.client.apiKey) io.err(`svc mcp: no agent key (SVC_API_KEY or ${c.configFile}); tools other than create_account will answer unauthorized\n`);
        const [{ createMcpServer }, { StdioServerTransport }] = await Promise.all([import('../../control-plane/mcp/server.js'), import('@modelcontextprotocol/sdk/server/stdio.js')]);
        const server = createMcpServer(httpCaller(c.client));
        const transport = new StdioServerTransport();
        const closed = new Promise<void>((resolve) => {
          transport.onclose = () => resolve();
          process.stdin.once('end', () => resolve());
        });
        await server.connect(transport);
        io.err(`svc mcp: serving ${TOOLS.length} tools over stdio for ${c.client.baseUrl}\n`);
        await closed;
        await server.close();
      }),
    );

  if (argv.length === 0) {
    io.err(program.helpInformation());
    return EXIT.usage;
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return EXIT.ok;
      return EXIT.usage;
    }
    throw err;
  }
  return status;
}
