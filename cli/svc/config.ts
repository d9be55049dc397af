/**
 * Where `svc` keeps the agent key: SVC_CONFIG, else $XDG_CONFIG_HOME/svc/config.json, else
 * ~/.config/svc/config.json. Written by `svc signup` with mode 0600 (directory 0700).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface StoredConfig {
  readonly api_key?: string;
  readonly org_id?: string;
  readonly base_url?: string;
}

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';

export function configPath(env: NodeJS.ProcessEnv): string {
  if (env['SVC_CONFIG']) return path.resolve(env['SVC_CONFIG']);
  const xdg = env['XDG_CONFIG_HOME'];
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(env['HOME'] ?? os.homedir(), '.config');
  return path.join(base, 'svc', 'config.json');
}

export class ConfigFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigFileError';
  }
}

/** The stored configuration, or {} when there is none. A file that is not ours is an error. */
export function readConfig(file: string): StoredConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new ConfigFileError(`cannot read ${file}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ConfigFileError(`${file} is not valid JSON; fix or delete it, then run svc signup again`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new ConfigFileError(`${file} is not a JSON object; fix or delete it`);
  const o = parsed as Record<string, unknown>;
  const out: { api_key?: string; org_id?: string; base_url?: string } = {};
  for (const k of ['api_key', 'org_id', 'base_url'] as const) if (typeof o[k] === 'string') out[k] = o[k];
  return out;
}

/** Write the configuration atomically, readable by the owner only. */
export function writeConfig(file: string, cfg: StoredConfig): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(tmp, `${JSON.stringify(cfg, null, 2)}\n`, { mode: 0o600 });
    fs.chmodSync(tmp, 0o600);
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true }); // it holds the key
    throw err;
  }
}

/**
 * Throws unless `file` can be written (its directory made, a file created there and removed):
 * checked before an account is made, whose key could otherwise only be shown once.
 */
export function checkWritable(file: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const probe = `${file}.${process.pid}.probe`;
  fs.writeFileSync(probe, '', { mode: 0o600, flag: 'wx' });
  fs.rmSync(probe, { force: true });
  if (fs.existsSync(file)) fs.accessSync(file, fs.constants.W_OK);
}
