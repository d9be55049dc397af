/**
 * A real server and the compiled `svc` run against it, with a fresh HOME and config path: the
 * setup of the CLI test files.
 */
import fs from 'node:fs';
import path from 'node:path';
import { startServer, tempDir, type TestServer } from '../helpers/server.js';
import { ensureDist, runSvc, type RunResult } from './dist.js';

export interface CliSession {
  readonly srv: TestServer;
  /** HOME of the runs (the config file is `conf/config.json` under it) */
  readonly dir: string;
  readonly env: Record<string, string>;
  /** runs `svc args` with the session's environment, plus `extra` */
  svc(args: readonly string[], extra?: Record<string, string | undefined>, stdin?: string): Promise<RunResult>;
  close(): Promise<void>;
}

export async function cliSession(prefix = 'svc-cli-'): Promise<CliSession> {
  ensureDist();
  const srv = await startServer();
  const dir = await tempDir(prefix);
  const env = { PATH: process.env['PATH'] ?? '', HOME: dir, SVC_BASE_URL: srv.url, SVC_CONFIG: path.join(dir, 'conf', 'config.json') };
  return {
    srv,
    dir,
    env,
    svc: (args, extra = {}, stdin) => runSvc(args, { ...env, ...extra }, stdin),
    close: async () => {
      await srv.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
