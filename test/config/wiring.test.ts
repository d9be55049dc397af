/**
 * The app takes its limits from the settings: the relay tunnel drain (SVC_TUNNEL_DRAIN_MS) and the
 * size of its own pool of live API query engines (SVC_LIVE_REST_ENGINES), which it closes with
 * itself (two apps in one process hold two pools).
 */
import t from 'tap';
import { ApiError } from '../../control-plane/errors.js';
import { startServer } from '../helpers/server.js';

t.test('the tunnel drain and the query-engine pool follow the settings; each app owns its pool', async (t) => {
  const a = await startServer({ env: { SVC_TUNNEL_DRAIN_MS: '1500', SVC_LIVE_REST_ENGINES: '3' } });
  const b = await startServer();
  t.teardown(() => b.close());
  t.equal(a.svc.services.tunnels.drainTimeoutMs, 1500);
  t.equal(a.svc.restEngines.max, 3);
  t.equal(b.svc.services.tunnels.drainTimeoutMs, 60_000, 'default 60 s');
  t.equal(b.svc.restEngines.max, 4, 'default 4');
  t.not(a.svc.restEngines, b.svc.restEngines, 'one pool per app');
  await a.close();
  const refused = await a.svc.restEngines.take(AbortSignal.timeout(1000)).catch((e: unknown) => e);
  t.ok(refused instanceof ApiError && refused.code === 'service_unavailable', 'the closed app’s pool starts no engine');
  t.equal(b.svc.restEngines.idleCount, 0, 'the other app’s pool is its own');
});
