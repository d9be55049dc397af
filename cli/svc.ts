#!/usr/bin/env node
/**
 * `svc` — the command-line client of the svc HTTP API (and `svc mcp`, the MCP server over stdio).
 * The program is cli/svc/commands.ts, its command groups cli/svc/commands/*.ts; `svc --help` lists them.
 *
 * Exit status: 0 ok, 1 audit verification failed, 2 usage error, 3 authentication error (401),
 * 4 other request error (4xx), 5 server or network error.
 */
import { main } from './svc/commands.js';
import { isEntryPoint } from './svc/entry.js';
import type { Io } from './svc/output.js';

export { main } from './svc/commands.js';

const defaultIo: Io = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
  errIsTTY: process.stderr.isTTY === true,
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  },
};

if (isEntryPoint(import.meta.url)) {
  // exit once stdout is flushed: idle keep-alive sockets of fetch must not hold the process open
  const exit = (code: number): void => {
    process.stdout.write('', () => process.exit(code));
  };
  main(process.argv.slice(2), defaultIo).then(exit, (err: unknown) => {
    process.stderr.write(`svc: internal error: ${(err as Error).message ?? String(err)}\n`);
    exit(5);
  });
}
