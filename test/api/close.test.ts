/**
 * Closing the app closes every part it owns, even when one of them fails to close: the failure is
 * the close's answer, and the parts after it (the SQL check worker, the store) are closed all the same.
 */
import t from 'tap';
import { startServer } from '../helpers/server.js';

t.test('a part that fails to close does not leave the later parts open', async (t) => {
  const srv = await startServer();
  srv.svc.restEngines.close = async () => {
    throw new Error('boom: the live API engines would not close');
  };
  await t.rejects(srv.svc.app.close(), /boom/, 'the close answers the failure');
  await t.rejects(srv.svc.services.sqlChecker.check(`SELECT ${'1+'.repeat(3000)}1`, { allowed: new Map(), known: [], schemas: [] }), { code: 'service_unavailable' }, 'the SQL check worker was closed after it');
  await t.rejects(srv.svc.store.query('SELECT 1'), 'and the store too');
});
