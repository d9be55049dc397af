/**
 * An operator's renew or rotate-cert (control-plane/relays/index.ts operatorReissuesAllowed) locks
 * the relay's row so requests sent at once are counted in turn. That lock must not conflict with
 * the FOR KEY SHARE lock a relay's own renewal takes on the same row when it inserts its new
 * certificate (the foreign key relay_certificates.relay_id): the relay's renewal supersedes the
 * current certificate first (locking its row), the operator's request then locks the relay and
 * waits for that certificate row, and the relay's insert waits for the relay's row: with FOR
 * UPDATE, PostgreSQL found a deadlock and failed one of them (a 500). On PostgreSQL only (the
 * embedded store runs one transaction at a time).
 *
 * The relay's renewal is played by a client of its own, step by step: its UPDATE of the current
 * certificate, then (once the operator's request waits for it) the foreign key's lock.
 */
import pg from 'pg';
import t from 'tap';
import { createCa, generateKeyAndCsr } from '../../pki/index.js';
import { relayCa } from '../../control-plane/relays/ca.js';
import { createEnrollToken, register, reissue, RELAY_DEFAULTS, type RelayOptions } from '../../control-plane/relays/index.js';
import { MIGRATIONS } from '../../control-plane/store/index.js';
import { realPostgresAvailable, TEST_DATABASE_URL } from '../helpers/server.js';
import { migratedStore } from '../helpers/store-kinds.js';
import { orgAndConnection } from '../helpers/store-rows.js';

const skip = (await realPostgresAvailable()) ? false : 'no PostgreSQL answers at TEST_DATABASE_URL';

t.test("an operator's renewal and a relay's own renewal at once do not deadlock", { skip }, async (t) => {
  const store = await migratedStore(t, 'postgres', MIGRATIONS, 'h96_relaylock');
  const url = (await store.query<{ db: string }>('SELECT current_database() AS db'))[0]?.db as string;
  const ca = relayCa(createCa({ keyBits: 2048 }));
  const o: RelayOptions = { tunnelUrl: 'wss://tunnel.example/v1/tunnel', certValidityDays: RELAY_DEFAULTS.certValidityDays, overlapMs: RELAY_DEFAULTS.overlapMs, tokenTtlSeconds: 3600 };
  const { orgId } = await orgAndConnection(store);
  const key = generateKeyAndCsr();
  const { token } = await createEnrollToken(store, orgId, { ttlSeconds: 3600 });
  const { relay_id: relayId } = await register(store, ca, o, { enroll_token: token, csr_pem: key.csrPem });

  const base = new URL(TEST_DATABASE_URL);
  base.pathname = `/${url}`;
  const relay = new pg.Client({ connectionString: base.toString() });
  const watcher = new pg.Client({ connectionString: base.toString() });
  await relay.connect();
  await watcher.connect();

  // the relay's renewal: its current certificate superseded, in a transaction still open
  await relay.query('BEGIN');
  await relay.query('UPDATE relay_certificates SET superseded_at = now() WHERE relay_id = $1 AND revoked_at IS NULL AND superseded_at IS NULL', [relayId]);

  // the operator's renewal, which locks the relay's row, then waits for the certificate's row
  const operator = reissue(store, ca, o, orgId, relayId, key.csrPem, 'renew').then(
    (r) => ({ ok: true as const, serial: r.serial }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  for (;;) {
    const { rows: [w] } = await watcher.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE relay_certificates SET superseded_at = $2%'",
    );
    if ((w?.n ?? 0) > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }

  // the relay's new certificate refers to its relay: the foreign key's lock on the relay's row
  const relayFinished = relay.query('SELECT 1 FROM relays WHERE id = $1 FOR KEY SHARE', [relayId]).then(
    async () => {
      await relay.query('COMMIT');
      return { ok: true as const };
    },
    async (err: unknown) => {
      await relay.query('ROLLBACK').catch(() => undefined);
      return { ok: false as const, err };
    },
  );
  const [r, op] = await Promise.all([relayFinished, operator]);
  await relay.end();
  await watcher.end();
  t.same({ relay: r.ok, operator: op.ok }, { relay: true, operator: true }, `neither failed (${String(!r.ok ? r.err : !op.ok ? op.err : 'none')})`);
});
