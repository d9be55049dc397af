/**
 * The lease decisions a replica's heartbeat makes about the tunnels it holds (tunnel/leases.ts),
 * on a real store (the embedded engine runs the same SQL as PostgreSQL): the newest claim holds
 * the lease; a tunnel is drained only for a newer, live lease elsewhere; a lapsed, released or
 * older lease elsewhere, or a claim of its own that failed, makes the live tunnel take the lease;
 * a certificate replaced by a renewal is not a revocation; a deleted relay or a revoked
 * certificate closes the tunnel for good. Found by review: a slow claim made the new holder drain
 * its only tunnel, and a renewal through another replica closed the old tunnel as revoked (the
 * relay then exited for good).
 */
import t from 'tap';
import { checkCertificate } from '../../control-plane/relays/index.js';
import { TunnelLeases } from '../../control-plane/tunnel/leases.js';
import { TunnelRegistry, type LiveTunnel } from '../../control-plane/tunnel/index.js';
import type { Session } from '../../protocol/index.js';
import { TunnelDrain } from '../../protocol/relay-contract.js';
import { signupAgent, startServer } from '../helpers/server.js';

interface Spy {
  drained?: string;
  /** the GOAWAY's code: why (TunnelDrain) */
  drainCode?: string;
  closed?: string;
}

function tunnel(relayId: string, orgId: string, serial: string): { t: LiveTunnel; spy: Spy } {
  const spy: Spy = {};
  const session = {
    closed: new Promise<void>(() => undefined),
    drain: async (o: { message?: string; code?: string }) => {
      spy.drained = o.message ?? 'drained';
      if (o.code !== undefined) spy.drainCode = o.code;
    },
    close: (_code: number, reason: string) => void (spy.closed = reason),
  } as unknown as Session;
  return { t: { relayId, orgId, serial, session, connectedAt: new Date(), version: 'test/1', terminate: () => undefined }, spy };
}

t.test('what the heartbeat does with a tunnel, by what the store says', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.close());
  const store = srv.svc.store;
  const { orgId } = await signupAgent(srv.url, 'Leases Org');
  let n = 0;
  const relay = async (): Promise<{ relayId: string; serial: string }> => {
    const relayId = `rly_lease_${++n}`;
    const serial = `serial_${n}`;
    await store.query('INSERT INTO relays (id, org_id, name, created_at) VALUES ($1, $2, $3, now())', [relayId, orgId, relayId]);
    await store.query("INSERT INTO relay_certificates (serial, fingerprint, key_fingerprint, relay_id, not_before, not_after, issued_at) VALUES ($1, $1, $1, $2, now(), now() + interval '1 day', now())", [serial, relayId]);
    return { relayId, serial };
  };
  const replica = (id: string): { registry: TunnelRegistry; leases: TunnelLeases } => {
    const registry = new TunnelRegistry();
    return { registry, leases: new TunnelLeases(store, id, `127.0.0.1:${id.length}`, registry) };
  };
  /** a tunnel of `r` held by a replica of id `id`, claimed */
  const held = async (r: { relayId: string; serial: string }, id: string): Promise<{ leases: TunnelLeases; spy: Spy }> => {
    const rep = replica(id);
    const tn = tunnel(r.relayId, orgId, r.serial);
    rep.registry.add(tn.t);
    await rep.leases.claim(tn.t);
    return { leases: rep.leases, spy: tn.spy };
  };
  const holderOf = async (relayId: string): Promise<string | null> => (await store.query<{ h: string | null }>('SELECT tunnel_replica AS h FROM relays WHERE id = $1', [relayId]))[0]?.h ?? null;

  // a newer claim elsewhere, live: the older tunnel drains
  {
    const r = await relay();
    const a = replica('rep_a');
    const b = replica('rep_b');
    const ta = tunnel(r.relayId, orgId, r.serial);
    const tb = tunnel(r.relayId, orgId, r.serial);
    a.registry.add(ta.t);
    await a.leases.claim(ta.t);
    b.registry.add(tb.t);
    await b.leases.claim(tb.t);
    await a.leases.beat();
    await b.leases.beat();
    t.match(ta.spy.drained, /another replica/, 'the older tunnel drains');
    t.equal(ta.spy.drainCode, TunnelDrain.REPLACED, 'as replaced by a newer connection');
    t.equal(ta.spy.closed, undefined, 'and is not closed for good');
    t.equal(tb.spy.drained, undefined, 'the newer one stays');
    t.equal(await holderOf(r.relayId), 'rep_b');
  }

  // the other replica's claim never landed (or failed): the lease it names is older and lapsed, so the live tunnel takes it
  {
    const r = await relay();
    const a = replica('rep_a');
    const b = replica('rep_b');
    const ta = tunnel(r.relayId, orgId, r.serial);
    a.registry.add(ta.t);
    await a.leases.claim(ta.t);
    const tb = tunnel(r.relayId, orgId, r.serial);
    b.registry.add(tb.t); // b's claim is slow: not yet in the store
    await b.leases.beat();
    t.equal(tb.spy.drained, undefined, "a tunnel whose claim has not landed is not given up to an older lease (it claims)");
    t.equal(await holderOf(r.relayId), 'rep_b', 'it holds the lease now');
    await a.leases.beat();
    t.match(ta.spy.drained, /another replica/, 'and the older tunnel drains');
  }

  // a lapsed or given-up lease elsewhere: the live tunnel takes it, never drains for it
  for (const lapse of ["tunnel_until = now() - interval '1 second'", 'tunnel_until = NULL']) {
    const r = await relay();
    const b = await held(r, 'rep_b');
    const tb = b;
    await store.query(`UPDATE relays SET tunnel_replica = 'rep_dead', tunnel_since = now() + interval '1 hour', ${lapse} WHERE id = $1`, [r.relayId]);
    await b.leases.beat();
    t.equal(tb.spy.drained, undefined, `a dead lease elsewhere (${lapse}) does not drain a live tunnel`);
    t.equal(await holderOf(r.relayId), 'rep_b', 'the live tunnel took the lease');
  }

  // a certificate replaced by a renewal is not a revocation; one revoked otherwise closes the tunnel for good
  {
    const r = await relay();
    const b = await held(r, 'rep_b');
    const tb = b;
    await store.query("UPDATE relay_certificates SET revoked_at = now(), revoked_reason = 'replaced' WHERE serial = $1", [r.serial]);
    await b.leases.beat();
    t.same(tb.spy, {}, 'replaced by a renewal: the tunnel keeps serving until the new one holds the lease');
    await store.query("UPDATE relay_certificates SET revoked_reason = 'revoked by the operator' WHERE serial = $1", [r.serial]);
    await b.leases.beat();
    t.equal(tb.spy.closed, 'certificate_revoked', 'revoked: closed for good');
  }

  // walk-through: a tunnel outlived its certificate (expired, or replaced and past its overlap
  // window) and kept serving queries; the handshake would refuse that certificate, so it drains
  for (const [what, lapse] of [
    ['expired', "not_after = now() - interval '1 second'"],
    ['replaced (superseded) and past its overlap window', "superseded_at = now() - interval '1 minute', overlap_until = now() - interval '1 second'"],
    // found by review: once its successor was seen on a tunnel (certificateInUse revokes it as
    // 'replaced'), a replaced certificate never lapsed here, so a tunnel that took the lease back
    // (the successor's tunnel closed before this replica's beat saw its lease) served on for good
    [
      'replaced, its successor seen on a tunnel (revoked as replaced), and past its overlap window',
      "superseded_at = now() - interval '1 minute', overlap_until = now() - interval '1 second', revoked_at = now() - interval '30 seconds', revoked_reason = 'replaced'",
    ],
  ] as const) {
    const r = await relay();
    const b = await held(r, 'rep_b');
    await store.query(`UPDATE relay_certificates SET ${lapse} WHERE serial = $1`, [r.serial]);
    await b.leases.beat();
    t.match(b.spy.drained, /overlap window ended|expired/, `${what}: the tunnel drains`);
    t.equal(b.spy.drainCode, TunnelDrain.CERTIFICATE_LAPSED, `${what}: and tells the relay why (not a takeover)`);
    t.equal(b.spy.closed, undefined, `${what}: not closed for good (a relay that renewed comes back with its new certificate)`);
  }
  {
    const r = await relay();
    const b = await held(r, 'rep_b');
    await store.query("UPDATE relay_certificates SET superseded_at = now(), overlap_until = now() + interval '1 hour' WHERE serial = $1", [r.serial]);
    await b.leases.beat();
    t.same(b.spy, {}, 'replaced but inside its overlap window: the tunnel keeps serving');
  }

  // found by review: the beat read a certificate's lapse on the store's clock, the handshake on
  // this process's (checkCertificate, verifyClientCertificate). With the store's clock ahead, a
  // tunnel was drained while the handshake still let the relay straight back in, and again at every
  // beat until the clocks agreed (the relay backing off as if another relay took it over); behind,
  // it served on past the handshake's refusal. The beat follows the handshake's clock.
  const skewed = async (r: { relayId: string; serial: string }, offsetMs: number): Promise<{ leases: TunnelLeases; spy: Spy }> => {
    const registry = new TunnelRegistry();
    const leases = new TunnelLeases(store, 'rep_c', '127.0.0.1:5', registry, undefined, () => new Date(Date.now() + offsetMs));
    const tn = tunnel(r.relayId, orgId, r.serial);
    registry.add(tn.t);
    await leases.claim(tn.t);
    return { leases, spy: tn.spy };
  };
  for (const [what, lapse] of [
    ['expired on the store’s clock', "not_after = now() - interval '1 second'"],
    ['past its overlap window on the store’s clock', "superseded_at = now() - interval '1 minute', overlap_until = now() - interval '1 second'"],
  ] as const) {
    const r = await relay();
    const behind = await skewed(r, -3_600_000);
    await store.query(`UPDATE relay_certificates SET ${lapse} WHERE serial = $1`, [r.serial]);
    t.match(await checkCertificate(store, r.serial, r.serial, new Date(Date.now() - 3_600_000)), { ok: true }, `${what}: the handshake, an hour behind, accepts it`);
    await behind.leases.beat();
    t.same(behind.spy, {}, `${what}, not on this process’s: the tunnel keeps serving`);
  }
  {
    const r = await relay();
    const ahead = await skewed(r, 3_600_000);
    await store.query("UPDATE relay_certificates SET not_after = now() + interval '1 minute' WHERE serial = $1", [r.serial]);
    await ahead.leases.beat();
    t.match(ahead.spy.drained, /expired/, 'expired on this process’s clock, an hour ahead, only: the tunnel drains');
  }

  // the relay deleted through another replica
  {
    const r = await relay();
    const b = await held(r, 'rep_b');
    const tb = b;
    await store.query('UPDATE relays SET revoked_at = now() WHERE id = $1', [r.relayId]);
    await b.leases.beat();
    t.equal(tb.spy.closed, 'relay_revoked');
  }
});
