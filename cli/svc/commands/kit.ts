/**
 * What every `svc` command group is built with: the context of a run (API client, --json, config
 * file), the action wrapper that prints failures with their exit status, the API call of the MCP
 * tool of the same operation, the output (JSON or the human renderer), and option parsers.
 */
import { type Command, InvalidArgumentError } from 'commander';
import type { ApiCall } from '../../../control-plane/mcp/api.js';
// the tool definitions only: the MCP server SDK is loaded by `svc mcp` alone (start-up time)
import { TOOLS } from '../../../control-plane/mcp/tools.js';
import { configPath, ConfigFileError, DEFAULT_BASE_URL, readConfig } from '../config.js';
import { CliFailure, EXIT, localError, request, type ClientOptions } from '../http.js';
import { keyValues, printable, table, withSpinner, type Io } from '../output.js';

export type Obj = Record<string, unknown>;

interface Globals {
  json?: boolean;
  baseUrl?: string;
}

export interface Context {
  readonly client: ClientOptions;
  readonly json: boolean;
  readonly configFile: string;
}

/** The code of a failure the CLI finds itself, by its exit status: no key is what the API would answer 401 for. */
const LOCAL_CODE: Readonly<Record<number, string>> = { [EXIT.usage]: 'usage_error', [EXIT.auth]: 'unauthorized', [EXIT.server]: 'unreachable' };

export class CommandKit {
  /** the exit status of the run so far (a failed command or a broken audit chain sets it) */
  status: number = EXIT.ok;

  constructor(
    readonly io: Io,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  private context(cmd: Command): Context {
    const env = this.env;
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
  }

  /** Wrap an action: resolve the context, run, print failures with their exit status. */
  action<A extends unknown[]>(fn: (c: Context, ...args: A) => Promise<void>): (...args: unknown[]) => Promise<void> {
    return async (...args: unknown[]): Promise<void> => {
      const cmd = args[args.length - 1] as Command;
      // read before the context: a context that cannot be made (config file, base URL) still answers in JSON
      // (never for `svc mcp`: its stdout is the MCP channel, where only JSON-RPC may go)
      const json = cmd.optsWithGlobals<Globals>().json === true && cmd.name() !== 'mcp';
      try {
        await fn(this.context(cmd), ...(args.slice(0, -1) as A));
      } catch (err) {
        if (err instanceof CliFailure) {
          // the API's error body, or one of the same shape for a failure found here (docs/cli-and-mcp.md)
          if (json) this.io.out(`${JSON.stringify(err.body ?? localError(LOCAL_CODE[err.exitCode] ?? 'usage_error', err.message))}\n`);
          this.io.err(`svc: ${printable(err.message, true)}\n`);
          this.status = err.exitCode;
          return;
        }
        if (err instanceof ConfigFileError) {
          if (json) this.io.out(`${JSON.stringify(localError('config_unreadable', err.message))}\n`);
          this.io.err(`svc: ${err.message}\n`);
          this.status = EXIT.usage;
          return;
        }
        throw err;
      }
    };
  }

  async call(c: Context, label: string, req: ApiCall): Promise<Obj> {
    const r = await withSpinner(this.io, label, () => request(c.client, req));
    return (r.body && typeof r.body === 'object' ? r.body : {}) as Obj;
  }

  /** print the body as JSON (--json) or with the human renderer */
  show(c: Context, body: Obj, human: (b: Obj) => string = keyValues): void {
    this.io.out(c.json ? `${JSON.stringify(body)}\n` : human(body));
  }
}

export const listOf = (b: Obj, field: string): Obj[] => (Array.isArray(b[field]) ? (b[field] as Obj[]) : []);

export const tableOf = (field: string, columns: string[], empty: string) => (b: Obj) => {
  const rows = listOf(b, field);
  return rows.length ? table(columns, rows) : `${empty}\n`;
};

/** The request of the MCP tool of the same operation: one definition of each call. */
export const tool = (name: string): ((args: Obj) => ApiCall) => {
  const t = TOOLS.find((x) => x.name === name);
  if (!t) throw new Error(`no tool ${name}`);
  return t.request;
};

export function positiveInt(name: string, min: number, max: number): (v: string) => number {
  return (v: string) => {
    if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`${name} must be a whole number`);
    const n = Number(v);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be between ${min} and ${max}`);
    return n;
  };
}
