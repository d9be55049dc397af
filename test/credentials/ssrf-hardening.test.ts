/**
 * The outbound guard's answers (control-plane/net) as a customer sees them: an internal host
 * name's resolved address never appears in a message (it reaches webhook deliveries and REST
 * connector errors), an address the customer typed may; and the IPv4-translated IPv6 form is
 * classified by the IPv4 address it embeds.
 */
import net from 'node:net';
import t from 'tap';
import { assertPublicUrl, canonicalAddress, guardedLookup, guardedRequest, isForbiddenAddress, isPrivateUseAddress, NetError } from '../../control-plane/net/index.js';

async function failure(p: Promise<unknown>): Promise<NetError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof NetError) return err;
    throw err;
  }
  throw new Error('expected a NetError');
}

t.test('a host name that resolves to a non-public address: the address stays out of the message', async (t) => {
  const internal = ['10.0.3.7', '169.254.169.254', 'fd00:ec2::254'];
  for (const address of internal) {
    const lookup = guardedLookup({}, async () => [{ address, family: net.isIP(address) }]);
    const err = await new Promise<NodeJS.ErrnoException | null>((resolve) => lookup('db.corp.internal', {}, (e) => resolve(e)));
    t.ok(err instanceof NetError && err.code === 'NET_ERR_FORBIDDEN_ADDRESS', `${address}: refused`);
    t.match(err?.message, /db\.corp\.internal resolves to a non-public address/);
    t.notOk(err?.message.includes(address), `${address} is not in the message`);
  }
  const viaDns = await failure(assertPublicUrl('http://localhost:8080/hook'));
  t.equal(viaDns.code, 'NET_ERR_FORBIDDEN_ADDRESS');
  t.notMatch(viaDns.message, /127\.0\.0\.1|::1/, 'localhost: neither loopback address is named');
  const typed = await failure(assertPublicUrl('http://10.0.3.7/hook'));
  t.match(typed.message, /10\.0\.3\.7/, 'an address the customer typed may be repeated back');
});

t.test('a refused connection to a host name does not name the address it resolved to', async (t) => {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const err = await failure(guardedRequest(`http://localhost:${port}/`, { allowPrivate: true, timeoutMs: 3000 }));
  t.equal(err.code, 'NET_ERR_CONNECT');
  t.match(err.message, /ECONNREFUSED/);
  t.notMatch(err.message, /127\.0\.0\.1|::1/, err.message);
});

t.test('IPv4-translated addresses (::ffff:0:a.b.c.d) are classified by the IPv4 address inside', async (t) => {
  for (const ip of ['::ffff:0:7f00:1', '::ffff:0:127.0.0.1', '::ffff:0:a9fe:a9fe', '::ffff:0:10.0.0.1', '::ffff:0:0.0.0.0']) {
    t.equal(isForbiddenAddress(ip), true, `${ip} forbidden`);
    t.equal(isPrivateUseAddress(ip), false, `${ip} is never an opt-in private address`);
  }
  t.equal(isForbiddenAddress('::ffff:0:8.8.8.8'), false, 'a public IPv4 address inside is public');
});

t.test('canonical addresses: one spelling per address', async (t) => {
  t.equal(canonicalAddress('::ffff:127.0.0.1'), '127.0.0.1');
  t.equal(canonicalAddress('[::ffff:7f00:1]'), '127.0.0.1');
  t.equal(canonicalAddress('::'), '0:0:0:0:0:0:0:0');
  t.equal(canonicalAddress('FE80::1%eth0'), 'fe80:0:0:0:0:0:0:1');
  t.equal(canonicalAddress('db.example.com'), undefined);
});
