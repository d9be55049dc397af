/**
 * Every catalogue target declares where its statements run, and that backend exists: demo
 * targets on the demo engines, postgres-relay on the relay tunnel, every other live target on its
 * own connector (with the credential kind the catalogue names). A live statement stopped by the
 * connector backend's backstop deadline or by the shutdown is answered as such.
 */
import t from 'tap';
import { Catalogue, parseScopes } from '../../control-plane/catalogue/index.js';
import type { CredentialStore } from '../../control-plane/credentials/index.js';
import { ApiError } from '../../control-plane/errors.js';
import { loadConfig } from '../../control-plane/config.js';
import { LiveRegistry, liveRegistry } from '../../control-plane/live/index.js';
import type { LiveConnector } from '../../control-plane/live/types.js';
import { EnginePool } from '../../control-plane/live/rest/index.js';
import { ConnectorBackend, type RunContext } from '../../control-plane/query/backends.js';
import { abortAnswer, shutdownStop } from '../../control-plane/query/errors.js';
import { SqlChecker } from '../../control-plane/query/sql/offload.js';

t.test('each target names its backend, and the backend is there', async (t) => {
  const catalogue = new Catalogue();
  const config = loadConfig({ SVC_DATA_DIR: '/tmp/unused', LOG_LEVEL: 'silent' });
  const engines = new EnginePool(config.restApis.maxEngines);
  const checker = new SqlChecker();
  const live = liveRegistry(config, engines, checker);
  t.equal(catalogue.targets.length, 20);
  for (const target of catalogue.targets) {
    if (target.kind === 'demo') {
      t.equal(target.backend, 'demo', target.id);
      t.ok(target.dataset, `${target.id} has its dataset`);
    } else if (target.id === 'postgres-relay') t.equal(target.backend, 'relay');
    else {
      t.equal(target.backend, 'connector', target.id);
      const connector = live.connector(target.id);
      t.ok(connector, `${target.id} has a connector`);
      t.equal(connector?.credentialKind, target.credential_kind, `${target.id} needs the credential kind the catalogue names`);
    }
  }
  live.close();
  await engines.close();
  await checker.close();
});

t.test("a live statement stopped by the backstop deadline is query_timeout, by the shutdown the shutdown's 503", async (t) => {
  const catalogue = new Catalogue();
  const target = catalogue.target('postgres');
  if (!target) throw new Error('no postgres target');
  const scopes = parseScopes(target, ['read:orders']);
  // a connector stuck past its own deadline: it answers only when its signal aborts, as the real ones do
  const stuck: LiveConnector = {
    targetId: 'postgres',
    credentialKind: 'postgres',
    prepare: () => ({ sql: 'SELECT 1', tables: [], rowFilters: {}, tablesAllowed: [] }),
    run: (_q, ctx) =>
      new Promise((_resolve, reject) => {
        const stop = (): void => reject(abortAnswer(ctx.signal, () => new ApiError('internal_error', 'not an answer of ours')));
        if (ctx.signal.aborted) stop();
        else ctx.signal.addEventListener('abort', stop, { once: true });
      }),
    forget: () => undefined,
    close: () => undefined,
  };
  const live = new LiveRegistry([stuck], []);
  const credentials = { resolve: async () => ({ kind: 'postgres', secret: 'postgres://u:p@db.example/x', options: {} }) } as unknown as CredentialStore;
  const ctx = (signal: AbortSignal): RunContext => ({ orgId: 'org', connectionId: 'conn', scopes, limits: { timeoutMs: 100, maxRows: 10, maxBytes: 1000 }, signal, trial: true });

  const shutdown = new AbortController();
  const backend = new ConnectorBackend(live, credentials, shutdown.signal);
  const q = await backend.prepare('SELECT 1', scopes, target, { tenant: 'org' });
  await t.rejects(backend.run(q, ctx(new AbortController().signal)), { code: 'query_timeout', status: 504 }, 'the backstop past the deadline: query_timeout, not a plain Error the query path answered 500');

  // the organization's credential replaced or deleted while it runs: stopped, 503 credential_changed;
  // another organization's, or another kind, leaves it running
  const changed = backend.run(q, ctx(new AbortController().signal));
  let ended = false;
  changed.then(
    () => (ended = true),
    () => (ended = true),
  );
  await new Promise((r) => setImmediate(r)); // it runs: its credential was read
  live.forget('org_other', 'postgres');
  live.forget('org', 'mysql');
  await new Promise((r) => setImmediate(r));
  t.notOk(ended, "another organization's credential, or another kind, changed: still running");
  live.forget('org', 'postgres');
  await t.rejects(changed, { code: 'service_unavailable', status: 503, details: { reason: 'credential_changed', connector_kind: 'postgres' } }, 'the credential changed: its 503');

  const running = backend.run(q, ctx(new AbortController().signal));
  shutdown.abort(shutdownStop());
  await t.rejects(running, { code: 'service_unavailable', status: 503, headers: { 'Retry-After': '1' } }, 'the shutdown: its 503');
});
