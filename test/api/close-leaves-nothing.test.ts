/**
 * A closed app holds nothing that keeps the process alive: no timer, socket, server or thread of
 * its own. A timer left running after close (the webhook worker's 5 s grace, raced against the
 * attempts in flight and never cleared) kept every process that closed a server alive 5 s longer:
 * `npm start` after SIGTERM, and each test file of this suite.
 */
import t from 'tap';
import { api, openConnection, signupAgent, startServer } from '../helpers/server.js';

/** what keeps the event loop alive, by kind, counted */
function alive(): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) m.set(r, (m.get(r) ?? 0) + 1);
  return m;
}

t.test('after close, the process holds nothing more than before the app started', async (t) => {
  const before = alive();
  const srv = await startServer();
  const a = await signupAgent(srv.url);
  const conn = await openConnection(srv.url, a.key, 'demo-healthcare', ['read:patients']);
  const r = await api(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql: 'SELECT count(*) AS n FROM patients' } });
  t.equal(r.status, 200, r.text);
  t.ok((alive().get('Timeout') ?? 0) > (before.get('Timeout') ?? 0) || alive().size > before.size, 'the running app holds the loop (the comparison below can fail)');
  await srv.close();
  // a closed socket or thread goes from the list on the next turns of the loop
  await new Promise((res) => setTimeout(res, 50));
  await new Promise((res) => setImmediate(res));
  const after = alive();
  const more = [...after].filter(([kind, n]) => n > (before.get(kind) ?? 0)).map(([kind, n]) => `${kind} ${before.get(kind) ?? 0} → ${n}`);
  t.same(more, [], `nothing left holding the process: ${JSON.stringify([...after])}`);
});
