/**
 * Every catalogue target declares where its statements run, and that backend exists: demo
 * targets on the demo engines, postgres-relay on the relay tunnel, every other live target on its
 * own connector (with the credential kind the catalogue names).
 */
import t from 'tap';
import { Catalogue } from '../../control-plane/catalogue/index.js';
import { loadConfig } from '../../control-plane/config.js';
import { liveRegistry } from '../../control-plane/live/index.js';
import { EnginePool } from '../../control-plane/live/rest/index.js';
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
