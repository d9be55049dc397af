/**
 * Database credential URLs on their own: parsed into explicit settings, the address to connect
 * to checked (private addresses when not allowed, the control plane's own databases never), and
 * driver messages scrubbed of the secret.
 */
import t from 'tap';
import os from 'node:os';
import { databaseAddressAllowed, isThisHost, parseDatabaseUrl, reservedFromUrl, resolveDatabaseAddress, scrub } from '../../control-plane/credentials/database.js';
import { loadConfig } from '../../control-plane/config.js';

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
  // an unencoded # in a password was read as host and port ('u', 1234) and refused as naming no user
  for (const s of ['postgres://u:1234#x@db/app', 'postgres://u:pa#ss@db/app']) {
    t.throws(() => pgUrl(s), { code: 'invalid_request', message: /# before its @: percent-encode # .* as %23/ }, s);
  }
  // an unencoded ? in a password (with an @ before it) starts the query: `reader:S3cr@t?Xy9kq@db…` read as
  // password 'S3cr', host 't' and a parameter named "Xy9kq@db.example.com/app", which the message repeated
  for (const s of ['postgres://reader:S3cr@t?Xy9kq@db.example.com/app', 'postgres://reader:S3cr@t?pass=word@db.example.com/app']) {
    t.throws(() => pgUrl(s), { code: 'invalid_request', message: /\? before its @: percent-encode \? .* as %3F/ }, s);
    try {
      pgUrl(s);
    } catch (err) {
      t.notMatch((err as Error).message, /Xy9|kq|pass=|=word|db\.example/, 'no part of the password in the message');
    }
  }
});

t.test('where to connect: private addresses by configuration, the control plane’s own databases never', async (t) => {
  const url = pgUrl('postgres://u:p@127.0.0.1:5432/svc_state');
  await t.rejects(resolveDatabaseAddress('postgres', url, { allowPrivate: false, reserved: [] }), { code: 'invalid_request', details: { reason: 'address_not_allowed' } });
  t.equal(await resolveDatabaseAddress('postgres', url, { allowPrivate: true, reserved: [] }), '127.0.0.1');
  const reserved = reservedFromUrl('postgres://postgres@localhost:5432/svc_state');
  await t.rejects(resolveDatabaseAddress('postgres', url, { allowPrivate: true, reserved }), { code: 'invalid_request', details: { reason: 'address_not_allowed' } }, 'localhost and 127.0.0.1 are the same server');
  t.equal(await resolveDatabaseAddress('postgres', pgUrl('postgres://u:p@127.0.0.1:5433/customer'), { allowPrivate: true, reserved }), '127.0.0.1', 'another server (port) on this host is fine');
  await t.rejects(resolveDatabaseAddress('postgres', pgUrl('postgres://u:p@no-such-host.invalid/app'), { allowPrivate: true, reserved: [] }), { code: 'service_unavailable' });
});

t.test('SVC_LIVE_ALLOW_PRIVATE defaults to 0', async (t) => {
  t.equal(loadConfig({ SVC_DATA_DIR: '/tmp/x' }).liveAllowPrivate, false);
  t.equal(loadConfig({ SVC_DATA_DIR: '/tmp/x', SVC_LIVE_ALLOW_PRIVATE: '1' }).liveAllowPrivate, true);
  t.equal(loadConfig({ SVC_DATA_DIR: '/tmp/x', SVC_LIVE_ALLOW_PRIVATE: '0' }).liveAllowPrivate, false);
});

t.test('address classes: private only when allowed; unspecified, link-local and metadata never', async (t) => {
  const privateUse = ['127.0.0.1', '127.1.2.3', '10.0.0.5', '172.16.4.4', '192.168.1.10', '100.64.1.1', '::1', 'fd12:3456::1', '::ffff:127.0.0.1', '::ffff:10.1.2.3'];
  for (const ip of privateUse) {
    t.equal(databaseAddressAllowed(ip, false), false, `${ip} refused by default`);
    t.equal(databaseAddressAllowed(ip, true), true, `${ip} allowed with SVC_LIVE_ALLOW_PRIVATE=1`);
  }
  const never = [
    '0.0.0.0', '0.1.2.3', '::', '[::]', '::ffff:0.0.0.0', '169.254.169.254', '169.254.170.2', '169.254.1.1', '::ffff:169.254.169.254',
    'fe80::1', 'fe80::1%eth0', 'fd00:ec2::254', '100.100.100.200', '168.63.129.16', '224.0.0.1', '255.255.255.255', '240.0.0.1',
    '::ffff:0:7f00:1', '2002:7f00:1::', '64:ff9b::7f00:1', '192.0.2.1',
  ];
  for (const ip of never) t.equal(databaseAddressAllowed(ip, true), false, `${ip} refused even with SVC_LIVE_ALLOW_PRIVATE=1`);
  for (const ip of ['8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) t.equal(databaseAddressAllowed(ip, false), true, `${ip} (public) allowed`);
  const refusedFor = async (secret: string, allowPrivate: boolean) =>
    resolveDatabaseAddress('postgres', pgUrl(secret), { allowPrivate, reserved: [] }).then(
      () => 'allowed',
      (err: { details?: { reason?: string } }) => err.details?.reason,
    );
  t.equal(await refusedFor('postgres://u:p@169.254.169.254:5432/x', true), 'address_not_allowed');
  t.equal(await refusedFor('postgres://u:p@[fe80::1]:5432/x', true), 'address_not_allowed');
  t.equal(await refusedFor('postgres://u:p@localhost:5432/x', false), 'address_not_allowed', 'a name resolving to loopback is refused by default');
});

t.test('the control plane’s own database server: any database on it, by any address of this host, is refused', async (t) => {
  const reserved = reservedFromUrl('postgres://postgres@127.0.0.1:5432/svc');
  const refused = async (secret: string) =>
    resolveDatabaseAddress('postgres', pgUrl(secret), { allowPrivate: true, reserved }).then(
      () => 'allowed',
      (err: { message: string; details?: { reason?: string } }) => `${err.details?.reason ?? '?'}: ${err.message}`,
    );
  for (const secret of [
    'postgres://postgres@0.0.0.0:5432/svc',
    'postgres://postgres@[::]:5432/svc',
    'postgres://postgres@[::1]:5432/svc',
    'postgres://postgres@127.0.0.2:5432/svc',
    'postgres://postgres@[::ffff:127.0.0.1]:5432/svc',
    'postgres://postgres@localhost:5432/svc',
    'postgres://postgres@127.0.0.1:5432/other_database',
    'postgres://postgres@127.0.0.1/postgres',
  ]) {
    t.match(await refused(secret), /^address_not_allowed/, secret);
  }
  t.match(await refused('postgres://postgres@127.0.0.1:5432/other_database'), /database server of the control plane itself/, 'refused as the control plane’s server, not as a private address');
  const lan = Object.values(os.networkInterfaces())
    .flat()
    .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal);
  if (!lan) t.skip('this machine has no non-loopback IPv4 interface address', () => undefined);
  else {
    t.equal(isThisHost(lan.address), true, `${lan.address} is this host`);
    const r = await refused(`postgres://postgres@${lan.address}:5432/x`);
    // (an interface address in a reserved range, e.g. TEST-NET in a sandbox, is refused before the server check)
    t.match(r, databaseAddressAllowed(lan.address, true) ? /database server of the control plane itself/ : /^address_not_allowed/, `this host’s LAN address ${lan.address} is refused too`);
    const viaLan = reservedFromUrl(`postgres://postgres@${lan.address}:5432/svc`);
    await t.rejects(
      resolveDatabaseAddress('postgres', pgUrl('postgres://postgres@127.0.0.1:5432/x'), { allowPrivate: true, reserved: viaLan }),
      { message: /database server of the control plane itself/ },
      'and when the control plane’s DATABASE_URL names the LAN address, loopback is that server',
    );
  }
  t.equal(await refused('postgres://postgres@127.0.0.1:6543/svc'), 'allowed', 'another port is another server');
  // a reserved server elsewhere: every spelling of its address
  const remote = reservedFromUrl('postgres://svc@10.9.8.7:5432/state');
  await t.rejects(resolveDatabaseAddress('postgres', pgUrl('postgres://u@[::ffff:10.9.8.7]:5432/x'), { allowPrivate: true, reserved: remote }), { code: 'invalid_request', details: { reason: 'address_not_allowed' } });
  t.equal(await resolveDatabaseAddress('postgres', pgUrl('postgres://u@10.9.8.6:5432/x'), { allowPrivate: true, reserved: remote }), '10.9.8.6');
  t.equal(isThisHost('10.9.8.7'), Object.values(os.networkInterfaces()).flat().some((i) => i?.address === '10.9.8.7'));
});

t.test('scrub removes the secret and the password from driver messages', async (t) => {
  const secret = 'postgres://u:S3cret%2Fpw@h/db';
  const url = pgUrl(secret);
  t.equal(scrub(`could not connect with ${secret} (password S3cret/pw)`, secret, url), 'could not connect with [redacted] (password [redacted])');
});
