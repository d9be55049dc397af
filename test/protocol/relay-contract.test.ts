/**
 * The relay ↔ control-plane contract (protocol/relay-contract.ts), checked from both sides: every
 * close the control plane's tunnel registry sends is classified, and the relay stops on exactly
 * the ones the contract calls permanent (it once stopped on close codes and reasons the control
 * plane never sent, and the two sides listed different reasons); every upgrade refusal is
 * permanent; the RELAY_ERR_* codes a relay ends a stream with are one registry, each mapped by the
 * control plane; and neither side spells those values out again.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { CloseCode, PROTO_ERRORS, ProtocolError, Session, memoryTransportPair, type SessionCloseInfo } from '../../protocol/index.js';
import {
  PERMANENT_TUNNEL_CLOSES,
  RELAY_STREAM_ERRORS,
  TUNNEL_CLOSES,
  TunnelCloseCode,
  TunnelRevocation,
  isPermanentClose,
  isPermanentRefusal,
  isRelayStreamErrorCode,
  revocationClose,
  type TunnelRevocationReason,
} from '../../protocol/relay-contract.js';
import { TunnelRegistry } from '../../control-plane/tunnel/index.js';
import { relayFailure } from '../../control-plane/query/relay.js';
import { RELAY_ERRORS, RelayAgent } from '../../relay-agent/index.js';
import { connectionEnd } from '../../relay-agent/connection.js';
import { echo, fakeClock, fakeDialer, srv, until } from '../relay-agent/fakes.js';
import { ROOT } from '../helpers/root.js';

const root = ROOT;
const source = (rel: string): string => fs.readFileSync(path.join(root, rel), 'utf8');

t.test('every close the control plane sends is classified, and permanent only for a revocation', async (t) => {
  const closes = Object.entries(TUNNEL_CLOSES);
  t.ok(closes.length >= 3);
  for (const [name, c] of closes) {
    t.equal(isPermanentClose(c.code, c.reason), c.permanent, `${name} (${c.code} ${c.reason}) is ${c.permanent ? 'permanent' : 'transient'} for the relay`);
    t.ok(Buffer.byteLength(c.reason) <= 123, `${name}'s reason fits a close frame`);
  }
  t.same(
    PERMANENT_TUNNEL_CLOSES.map((c) => c.reason).sort(),
    Object.values(TunnelRevocation).sort(),
    'the permanent closes are exactly the revocations',
  );
  for (const reason of Object.values(TunnelRevocation)) t.same(revocationClose(reason), { code: TunnelCloseCode.REVOKED, reason, permanent: true });
});

t.test('the closes the session itself makes are never permanent', async (t) => {
  for (const [code, spec] of Object.entries(PROTO_ERRORS)) {
    const closeCode = 'closeCode' in spec ? spec.closeCode : CloseCode.PROTOCOL_ERROR;
    t.notOk(isPermanentClose(closeCode, code), `${closeCode} ${code}`);
  }
  for (const reason of ['drained', 'drain timeout', 'closed', 'relay stopping', '']) t.notOk(isPermanentClose(CloseCode.NORMAL, reason), `1000 ${reason}`);
  t.notOk(isPermanentClose(1006, ''), 'a dropped connection');
});

t.test('closes the control plane never sends are not permanent (the drift this contract removed)', async (t) => {
  for (const [code, reason] of [
    [4401, 'unauthorized'],
    [4403, 'forbidden'],
    [4403, 'relay_revoked'],
    [1008, 'relay_deleted'],
    [1008, 'relay_unknown'],
    [1008, 'certificate_expired'],
    [1008, 'certificate_invalid'],
    [1002, 'relay_revoked'],
  ] as const) {
    t.notOk(isPermanentClose(code, reason), `${code} ${reason}`);
  }
});

/** a server session in a TunnelRegistry, with the relay's session on the other end of a memory transport */
async function registered(registry: TunnelRegistry, relayId: string): Promise<{ relay: Session; server: Session }> {
  const [a, b] = memoryTransportPair();
  const server = new Session(a, { role: 'server', pingIntervalMs: 0 });
  const relay = new Session(b, { role: 'client', pingIntervalMs: 0 });
  await Promise.all([server.ready, relay.ready]);
  registry.add({ relayId, orgId: 'org_x', serial: 's', session: server, connectedAt: new Date(), version: null, terminate: () => server.close() });
  return { relay, server };
}

t.test("the registry's closes, as the relay sees them", async (t) => {
  const ends: [string, SessionCloseInfo][] = [];
  for (const reason of Object.values(TunnelRevocation)) {
    const registry = new TunnelRegistry();
    const { relay } = await registered(registry, 'rly_1');
    registry.disconnect('rly_1', reason);
    ends.push([`disconnect ${reason}`, await relay.closed]);
  }
  {
    const registry = new TunnelRegistry();
    const { relay } = await registered(registry, 'rly_1');
    registry.closeAll();
    ends.push(['closeAll', await relay.closed]);
  }
  {
    const registry = new TunnelRegistry({ drainTimeoutMs: 1000 });
    const { relay } = await registered(registry, 'rly_1');
    registry.yieldTunnel('rly_1', 'the relay connected through another replica');
    ends.push(['yieldTunnel', await relay.closed]);
  }
  {
    const registry = new TunnelRegistry({ drainTimeoutMs: 1000 });
    const first = await registered(registry, 'rly_1');
    await registered(registry, 'rly_1'); // a newer tunnel replaces it: the first drains
    ends.push(['replaced', await first.relay.closed]);
  }
  const permanent = ends.filter(([, info]) => connectionEnd(info).permanent).map(([what]) => what);
  t.same(permanent, Object.values(TunnelRevocation).map((r) => `disconnect ${r}`), 'permanent for the relay: exactly the revocations');
  for (const [what, info] of ends) {
    const sent = Object.values(TUNNEL_CLOSES).some((c) => c.code === info.code && c.reason === info.reason);
    const session = info.code === CloseCode.NORMAL && info.reason === 'drained';
    t.ok(sent || session, `${what} (${info.code} ${info.reason}) is a close the contract lists, or the session's drain`);
  }
});

t.test('a relay agent stops on a revocation and reconnects after a shutdown', async (t) => {
  for (const [what, permanent, act] of [
    ['relay deleted', true, (r: TunnelRegistry) => r.disconnect('rly_1', TunnelRevocation.RELAY_REVOKED)],
    ['certificate revoked', true, (r: TunnelRegistry) => r.disconnect('rly_1', TunnelRevocation.CERTIFICATE_REVOKED)],
    ['control plane shutting down', false, (r: TunnelRegistry) => r.closeAll()],
  ] as const) {
    t.test(what, async (t) => {
      const registry = new TunnelRegistry();
      const d = fakeDialer();
      const agent = new RelayAgent({ dial: d.dial, clock: fakeClock(), backoff: { random: () => 0 }, handler: echo, session: { pingIntervalMs: 0 } });
      const run = agent.run();
      await until(() => agent.state === 'connected');
      const server = await srv(d, 0);
      registry.add({ relayId: 'rly_1', orgId: 'org_x', serial: 's', session: server, connectedAt: new Date(), version: null, terminate: () => server.close() });
      act(registry);
      if (permanent) {
        const exit = await run;
        t.equal(exit.reason, 'permanent');
        t.match(exit.message, /for good/);
        t.equal(d.dials, 1, 'not dialed again');
      } else {
        await until(() => d.dials === 2 && agent.state === 'connected');
        t.equal((await agent.drain()).reason, 'stopped');
      }
    });
  }
});

t.test('every refusal of the upgrade is permanent, nothing else is', async (t) => {
  t.ok(isPermanentRefusal(401));
  t.ok(isPermanentRefusal(403));
  for (const status of [400, 404, 408, 426, 429, 500, 502, 503]) t.notOk(isPermanentRefusal(status), `${status}`);
  // the listener refuses with 401 or 403 only
  const listener = source('control-plane/tunnel/index.ts');
  const statuses = [...listener.matchAll(/status: (\d{3})/g)].map((m) => Number(m[1]));
  t.ok(statuses.length >= 3);
  for (const s of statuses) t.ok(isPermanentRefusal(s), `the listener refuses a certificate with ${s}`);
});

t.test('relay stream error codes: one registry, each mapped by the control plane', async (t) => {
  t.ok(RELAY_STREAM_ERRORS.length >= 6);
  for (const code of RELAY_STREAM_ERRORS) {
    t.match(code, /^RELAY_ERR_[A-Z_]+$/);
    t.ok((RELAY_ERRORS as readonly string[]).includes(code), `${code} is a relay error code`);
    const api = relayFailure(new ProtocolError(code, 'm', { remote: true }), 'rly_x', 1000);
    t.notMatch(api.message, /could not run the statement/, `${code} has its own meaning for the control plane (${api.code})`);
  }
  t.notOk(isRelayStreamErrorCode('RELAY_ERR_CONFIG_MISSING'));
  for (const dead of ['RELAY_ERR_ROW_LIMIT', 'RELAY_ERR_BYTE_LIMIT']) t.notOk((RELAY_ERRORS as readonly string[]).includes(dead), `${dead} is gone`);
  // what the executor fails a stream with is in the contract
  const executor = source('relay-agent/executor.ts');
  const sent = new Set([...executor.matchAll(/(?:fail\(|code: )'(RELAY_ERR_[A-Z_]+)'/g)].map((m) => m[1] as string));
  for (const code of sent) t.ok(isRelayStreamErrorCode(code), `the executor's ${code} is a contract code`);
});

t.test('neither side spells the contract out again', async (t) => {
  const revocations = Object.values(TunnelRevocation) as TunnelRevocationReason[];
  for (const rel of ['control-plane/tunnel/index.ts', 'control-plane/tunnel/leases.ts', 'control-plane/query/relay.ts', 'relay-agent/agent.ts', 'relay-agent/supervisor.ts', 'relay-agent/connection.ts']) {
    const text = source(rel);
    t.notMatch(text, /\.close\(\d{4}/, `${rel} closes with no bare close code`);
    t.notMatch(text, /'RELAY_ERR_(QUERY|READ_ONLY|MULTI_STATEMENT|TIMEOUT|DATABASE_UNAVAILABLE|ROW_TOO_LARGE)'/, `${rel} names no relay stream code as a bare string`);
    for (const r of revocations) t.notOk(text.includes(`'${r}'`), `${rel} does not spell '${r}'`);
    t.notMatch(text, /webSocketTransport\(/, `${rel} uses the contract's wsTransport`);
  }
});
