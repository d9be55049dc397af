/** `svc mcp`: the MCP tool server over stdio, calling the API with the user's key. */
import type { Command } from 'commander';
import { TOOLS } from '../../../control-plane/mcp/tools.js';
import type { ApiCaller, ApiResult } from '../../../control-plane/mcp/api.js';
import { httpCaller, localError, type ClientOptions } from '../http.js';
import type { CommandKit } from './kit.js';

/** The 401 a call needing a key gets in a session without one: the API's code, in the words of a stdio session. */
function noKey(configFile: string): ApiResult {
  const body = localError(
    'unauthorized',
    `this svc mcp session has no agent key: set SVC_API_KEY (or store one in ${configFile} with svc signup) and start svc mcp again, or create an account with the create_account tool, whose key this session then uses`,
  );
  return { status: 401, body, text: JSON.stringify(body) };
}

export function registerMcpCommand(program: Command, kit: CommandKit): void {
  program
    .command('mcp')
    .description('run the MCP tool server over stdio for a local client (it calls the API with your key)')
    .action(
      kit.action(async (c) => {
        if (!c.client.apiKey) {
          kit.io.err(`svc mcp: no agent key (SVC_API_KEY or ${c.configFile}); tools other than create_account will answer unauthorized until create_account creates an account, whose key this session then uses\n`);
        }
        const [{ createMcpServer }, { StdioServerTransport }] = await Promise.all([import('../../../control-plane/mcp/server.js'), import('@modelcontextprotocol/sdk/server/stdio.js')]);
        // the key the calls are made with: a session started without one takes the first account create_account makes
        const session: { -readonly [K in keyof ClientOptions]: ClientOptions[K] } = { ...c.client };
        const http = httpCaller(session);
        // no header to send over stdio: a call needing a key is answered here, saying where svc reads one
        const api: ApiCaller = async (call) => (call.anonymous || session.apiKey ? http(call) : noKey(c.configFile));
        const server = createMcpServer(api, {
          onAccountCreated: (apiKey) => {
            if (session.apiKey) return undefined; // a session with a key keeps it: the new account is a separate one
            session.apiKey = apiKey;
            // never the key itself: stderr may be kept in a client's log
            kit.io.err('svc mcp: create_account created an account; this session now calls the API with its key\n');
            return 'This svc mcp session now makes its other tool calls with this apiKey (it had none). The key is not stored anywhere: keep it and set it as SVC_API_KEY to use this account after this session.';
          },
        });
        const transport = new StdioServerTransport();
        const closed = new Promise<void>((resolve) => {
          transport.onclose = () => resolve();
          process.stdin.once('end', () => resolve());
        });
        await server.connect(transport);
        kit.io.err(`svc mcp: serving ${TOOLS.length} tools over stdio for ${c.client.baseUrl}\n`);
        await closed;
        await server.close();
      }),
    );
}
