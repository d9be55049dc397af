/**
 * Database credential URLs on their own: parsed into explicit settings, the address to connect
 * to checked (private addresses when not allowed, the control plane's own databases never), and
 * driver messages scrubbed of the secret.
 */
import t from 'tap';
import { parseDatabaseUrl, reservedFromUrl, resolveDatabaseAddress, scrub } from '../../control-plane/credentials/database.js';

const pgUrl = (s: string) => parseDatabaseUrl(s, ['postgres:', 'postgresql:'], 5432, 'postgres://u:p@h/db');

t.test('URLs become explicit settings', async (t) => {
  t.same(pgUrl('postgres://rea%40der:p%2Fw@db.example.com/app%20x?sslmode=require'), {
    host: 'db.example.com',
    port: 5432,
    user: 'rea@der',
    password: 'p/w',
    database: 'app x',
    sslmode: 'require',
  });
  t.equal(pgUrl('postgresql://u@[::1]:6543/app').host, '::1');
  t.throws(() => pgUrl('postgres://u:p@h/app?options=-c%20role%3Dadmin'), { code: 'invalid_request' }, 'no driver options through the URL');
  t.throws(() => pgUrl('postgres://u:p@h/a/b'), { code: 'invalid_request' });
  t.throws(() => pgUrl('postgres://u:p@h/app#x'), { code: 'invalid_request' });
});

t.test('where to connect: private addresses by configuration, the control plane’s own databases never', async (t) => {
  const url = pgUrl('postgres://u:p@127.0.0.1:5432/svc_state');
  await t.rejects(resolveDatabaseAddress('postgres', url, { allowPrivate: false, reserved: [] }), { code: 'invalid_request', details: { reason: 'address_not_allowed' } });
  t.equal(await resolveDatabaseAddress('postgres', url, { allowPrivate: true, reserved: [] }), '127.0.0.1');
  const reserved = reservedFromUrl('postgres://postgres@localhost:5432/svc_state');
  await t.rejects(resolveDatabaseAddress('postgres', url, { allowPrivate: true, reserved }), { details: { reason: 'address_not_allowed' } }, 'localhost and 127.0.0.1 are the same server');
  t.equal(await resolveDatabaseAddress('postgres', pgUrl('postgres://u:p@127.0.0.1:5432/customer'), { allowPrivate: true, reserved }), '127.0.0.1', 'another database on that server is fine');
  await t.rejects(resolveDatabaseAddress('postgres', pgUrl('postgres://u:p@no-such-host.invalid/app'), { allowPrivate: true, reserved: [] }), { code: 'service_unavailable' });
});

t.test('scrub removes the secret and the password from driver messages', async (t) => {
  const secret = 'postgres://u:S3cret%2Fpw@h/db';
  const url = pgUrl(secret);
  t.equal(scrub(`could not connect with ${secret} (password S3cret/pw)`, secret, url), 'could not connect with [redacted] (password [redacted])');
});
