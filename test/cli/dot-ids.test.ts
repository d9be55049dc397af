/**
 * An id that is "." or ".." (svc target .., svc revoke .., the describe_target tool of `svc mcp`
 * with target_id "..") is one path segment like any other id: found by an outside review, the
 * CLI's HTTP client (fetch) read it as a path step, so `svc target ..` asked GET /v1/connections/
 * and answered `connection "" not found`, and `svc revoke ..` asked POST /v1/revoke. The answer is
 * now the not_found of that id, and no other route is asked.
 */
import t from 'tap';
import { localMcpClient } from '../helpers/mcp.js';
import { signupAgent, type Agent } from '../helpers/server.js';
import { cliSession, type CliSession } from './session.js';

let session: CliSession;
let agent: Agent;
t.before(async () => {
  session = await cliSession('svc-cli-dots-');
  agent = await signupAgent(session.srv.url, 'Dots Co');
});
t.teardown(() => session.close());

t.test('svc commands: "." and ".." are ids that are not found', async (t) => {
  for (const args of [['target', '..'], ['connection', '.'], ['revoke', '..'], ['schema', '..'], ['relay', 'delete', '.'], ['credentials', 'delete', '..'], ['webhook', 'replay', '..']]) {
    const r = await session.svc([...args, '--json'], { SVC_API_KEY: agent.key });
    t.equal(r.code, 4, `svc ${args.join(' ')}: exit 4`);
    const body = JSON.parse(r.stdout) as { error: { code: string; message: string } };
    t.equal(body.error.code, 'not_found', `svc ${args.join(' ')}: not_found`);
    const id = args[args.length - 1] ?? '';
    t.match(body.error.message, JSON.stringify(id), `svc ${args.join(' ')}: names ${id}`);
    t.notMatch(body.error.message, /no route|""/, `svc ${args.join(' ')}: no other route was asked`);
  }
});

t.test('svc mcp: the same for a tool', async (t) => {
  const { client } = await localMcpClient(session.srv.url, { SVC_API_KEY: agent.key }, 'dots');
  t.teardown(() => client.close());
  const r = (await client.callTool({ name: 'describe_target', arguments: { target_id: '..' } })) as { isError?: boolean; structuredContent?: { error?: { code?: string; message?: string } } };
  t.equal(r.isError, true);
  t.equal(r.structuredContent?.error?.code, 'not_found');
  t.match(r.structuredContent?.error?.message, '".."');
});
