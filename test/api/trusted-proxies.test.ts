/**
 * Behind a balancer that forwards the client's address (X-Forwarded-For), SVC_TRUSTED_PROXIES
 * makes that address the client's: the signup limit and the demo engines' free-trial share (one
 * budget across replicas on a PostgreSQL store) count callers, not the balancer. From a peer not
 * in the list, the header is ignored (a caller cannot pick its own address).
 */
import t from 'tap';
import { loadConfig, ConfigError } from '../../control-plane/config.js';
import { api, startServer } from '../helpers/server.js';

const signup = (url: string, name: string, forwardedFor?: string) =>
  api(url, 'POST', '/v1/agent/account', { body: { orgName: name, agentName: 'a', headless: true }, ...(forwardedFor ? { headers: { 'x-forwarded-for': forwardedFor } } : {}) });

// (before SVC_TRUSTED_PROXIES every caller behind an HTTP balancer was the balancer: one signup
// budget, and one free-trial sender for every free organization on every replica)
t.test('behind a trusted balancer, each forwarded client has its own signup budget', async (t) => {
  const srv = await startServer({ env: { SVC_SIGNUP_RATE_LIMIT: '1', SVC_TRUSTED_PROXIES: '127.0.0.1, ::1' } });
  t.teardown(() => srv.close());
  t.equal((await signup(srv.url, 'One', '203.0.113.1')).status, 201, 'a first client signs up');
  t.equal((await signup(srv.url, 'Two', '203.0.113.2')).status, 201, 'another client through the same balancer signs up too');
  t.equal((await signup(srv.url, 'Three', '203.0.113.1')).status, 429, 'the first client is over its own budget');
});

t.test('from a peer that is not a trusted balancer, X-Forwarded-For is ignored', async (t) => {
  const srv = await startServer({ env: { SVC_SIGNUP_RATE_LIMIT: '1' } });
  t.teardown(() => srv.close());
  t.equal((await signup(srv.url, 'One', '203.0.113.1')).status, 201);
  t.equal((await signup(srv.url, 'Two', '203.0.113.2')).status, 429, 'a forged address does not buy another signup');
});

t.test('SVC_TRUSTED_PROXIES takes addresses and CIDR ranges only', async (t) => {
  t.same(loadConfig({ SVC_TRUSTED_PROXIES: '10.0.0.0/8, fd00::/8,192.0.2.7' }).trustedProxies, ['10.0.0.0/8', 'fd00::/8', '192.0.2.7']);
  t.same(loadConfig({}).trustedProxies, [], 'none by default');
  for (const bad of ['balancer.internal', '10.0.0.0/33', '10.0.0.1/8/1', 'fd00::/129']) {
    t.throws(() => loadConfig({ SVC_TRUSTED_PROXIES: bad }), ConfigError, bad);
  }
});
