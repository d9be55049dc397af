/** `svc mcp`: the MCP tool server over stdio, calling the API with the user's key. */
import type { Command } from 'commander';
import { TOOLS } from '../../../control-plane/mcp/tools.js';
import { httpCaller } from '../http.js';
import type { CommandKit } from './kit.js';

export function registerMcpCommand(program: Command, kit: CommandKit): void {
  program
    .command('mcp')
    .description('run the MCP tool server over stdio for a local client (it calls the API with your key)')
    .action(
      kit.action(async (c) => {
        if (!c.client.apiKey) kit.io.err(`svc mcp: no agent key (SVC_API_KEY or ${c.configFile}); tools other than create_account will answer unauthorized\n`);
        const [{ createMcpServer }, { StdioServerTransport }] = await Promise.all([import('../../../control-plane/mcp/server.js'), import('@modelcontextprotocol/sdk/server/stdio.js')]);
        const server = createMcpServer(httpCaller(c.client));
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
