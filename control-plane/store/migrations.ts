/**
 * Versioned migrations, the same SQL for PGlite and PostgreSQL. Applied in order at start-up under
 * an advisory lock, each in its own transaction, so several replicas starting at once are safe.
 * Never edit a released migration: add the next one.
 */
import { StoreError, type Store } from './types.js';
import { QUERY_PATH_FUNCTIONS, SETTLE_ONE_WRITE, SETTLE_STORE_CLOCK } from './functions.js';

export interface Migration {
  readonly version: number;
  readonly name: string;
  /** statements split at `;` + line end, or, for bodies holding semicolons (functions), the statements themselves */
  readonly sql: string | readonly string[];
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'accounts, keys, connections, audit, ledger',
    sql: `
CREATE TABLE orgs (
  id                      text PRIMARY KEY,
  name                    text NOT NULL,
  created_at              timestamptz NOT NULL,
  trial_expires_at        timestamptz NOT NULL,
  trial_queries_used      integer NOT NULL DEFAULT 0,
  trial_egress_used       bigint  NOT NULL DEFAULT 0,
  trial_spent_nc          bigint  NOT NULL DEFAULT 0,
  wallet_nc               bigint  NOT NULL DEFAULT 0 CHECK (wallet_nc >= 0),
  wallet_held_nc          bigint  NOT NULL DEFAULT 0 CHECK (wallet_held_nc >= 0),
  auto_reload_threshold_nc bigint,
  auto_reload_amount_nc   bigint,
  queries_total           bigint  NOT NULL DEFAULT 0,
  egress_total            bigint  NOT NULL DEFAULT 0,
  list_spend_nc           bigint  NOT NULL DEFAULT 0,
  wallet_spend_nc         bigint  NOT NULL DEFAULT 0
);

CREATE TABLE agent_keys (
  id           text PRIMARY KEY,
  org_id       text NOT NULL REFERENCES orgs(id),
  agent_name   text NOT NULL,
  key_hash     text NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL,
  last_used_at timestamptz,
  revoked_at   timestamptz
);

CREATE TABLE connections (
  id            text PRIMARY KEY,
  org_id        text NOT NULL REFERENCES orgs(id),
  target_id     text NOT NULL,
  scopes        jsonb NOT NULL,
  tier          text NOT NULL,
  ttl_seconds   integer NOT NULL,
  created_at    timestamptz NOT NULL,
  expires_at    timestamptz NOT NULL,
  revoked_at    timestamptz,
  genesis_hash  text NOT NULL,
  head_hash     text NOT NULL,
  head_seq      integer NOT NULL DEFAULT 0,
  queries       bigint NOT NULL DEFAULT 0,
  bytes_egressed bigint NOT NULL DEFAULT 0,
  last_query_at timestamptz
);
CREATE INDEX connections_org ON connections (org_id, created_at DESC);

CREATE TABLE audit_events (
  connection_id text NOT NULL REFERENCES connections(id),
  seq           integer NOT NULL,
  event_id      text NOT NULL UNIQUE,
  body          text NOT NULL,
  hash          text NOT NULL,
  PRIMARY KEY (connection_id, seq)
);

CREATE TABLE ledger (
  id              bigserial PRIMARY KEY,
  org_id          text NOT NULL REFERENCES orgs(id),
  kind            text NOT NULL,
  amount_nc       bigint NOT NULL,
  balance_after_nc bigint NOT NULL,
  created_at      timestamptz NOT NULL,
  note            text
);
CREATE INDEX ledger_org ON ledger (org_id, id);
`,
  },
  {
    version: 2,
    name: 'query reservations (money held while a query runs)',
    sql: `
CREATE TABLE reservations (
  id         text PRIMARY KEY,
  org_id     text NOT NULL REFERENCES orgs(id),
  payer      text NOT NULL CHECK (payer IN ('trial', 'wallet')),
  held_nc    bigint NOT NULL CHECK (held_nc >= 0),
  created_at timestamptz NOT NULL
);
CREATE INDEX reservations_age ON reservations (created_at);
`,
  },
  {
    version: 3,
    name: 'certificate authority, relays, enrollment tokens, relay certificates and events',
    sql: `
CREATE TABLE ca (
  id          integer PRIMARY KEY CHECK (id = 1),
  cert_pem    text NOT NULL,
  key_sealed  text NOT NULL,
  created_at  timestamptz NOT NULL
);

CREATE TABLE relays (
  id            text PRIMARY KEY,
  org_id        text NOT NULL REFERENCES orgs(id),
  name          text NOT NULL,
  created_at    timestamptz NOT NULL,
  revoked_at    timestamptz,
  last_seen_at  timestamptz,
  version       text
);
CREATE INDEX relays_org ON relays (org_id, created_at);

CREATE TABLE relay_enroll_tokens (
  token_hash  text PRIMARY KEY,
  org_id      text NOT NULL REFERENCES orgs(id),
  name        text,
  created_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz,
  relay_id    text
);

CREATE TABLE relay_certificates (
  serial        text PRIMARY KEY,
  fingerprint   text NOT NULL UNIQUE,
  key_fingerprint text NOT NULL,
  relay_id      text NOT NULL REFERENCES relays(id),
  not_before    timestamptz NOT NULL,
  not_after     timestamptz NOT NULL,
  issued_at     timestamptz NOT NULL,
  superseded_at timestamptz,
  overlap_until timestamptz,
  revoked_at    timestamptz,
  revoked_reason text
);
CREATE INDEX relay_certificates_relay ON relay_certificates (relay_id, issued_at);

CREATE TABLE relay_events (
  id        bigserial PRIMARY KEY,
  relay_id  text,
  org_id    text NOT NULL,
  kind      text NOT NULL,
  at        timestamptz NOT NULL,
  detail    jsonb NOT NULL
);
CREATE INDEX relay_events_relay ON relay_events (relay_id, id);
`,
  },
  {
    version: 4,
    name: 'webhooks: endpoints, durable delivery outbox, attempts, chaos profile, expiry notices',
    sql: `
CREATE TABLE webhook_endpoints (
  org_id        text NOT NULL REFERENCES orgs(id),
  connection_id text NOT NULL DEFAULT '',
  url           text NOT NULL,
  secret_sealed text NOT NULL,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  PRIMARY KEY (org_id, connection_id)
);

CREATE TABLE webhook_deliveries (
  id              text PRIMARY KEY,
  org_id          text NOT NULL REFERENCES orgs(id),
  connection_id   text,
  event           text NOT NULL,
  body            text NOT NULL,
  status          text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,
  run_attempts    integer NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL,
  next_attempt_at timestamptz,
  lease_until     timestamptz,
  last_attempt_at timestamptz,
  completed_at    timestamptz
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_org ON webhook_deliveries (org_id, connection_id, created_at DESC);

CREATE TABLE webhook_attempts (
  id            bigserial PRIMARY KEY,
  delivery_id   text NOT NULL REFERENCES webhook_deliveries(id),
  attempt       integer NOT NULL,
  kind          text NOT NULL,
  started_at    timestamptz NOT NULL,
  duration_ms   integer NOT NULL,
  url           text,
  status_code   integer,
  error_class   text,
  error_message text,
  response_excerpt text,
  chaos         text,
  retry_after_ms integer
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);

CREATE TABLE webhook_chaos (
  org_id     text PRIMARY KEY REFERENCES orgs(id),
  mode       text NOT NULL,
  options    jsonb NOT NULL,
  updated_at timestamptz NOT NULL
);

ALTER TABLE connections ADD COLUMN expiry_notified_at timestamptz;
UPDATE connections SET expiry_notified_at = expires_at WHERE expires_at <= now();
CREATE INDEX connections_expiry_pending ON connections (expires_at) WHERE expiry_notified_at IS NULL AND revoked_at IS NULL;
`,
  },
  {
    version: 5,
    name: 'credentials: one sealed bring-your-own credential per connector kind per organization',
    sql: `
CREATE TABLE credentials (
  org_id         text NOT NULL REFERENCES orgs(id),
  connector_kind text NOT NULL,
  sealed         text NOT NULL,
  key_id         text NOT NULL,
  hint           text NOT NULL,
  created_at     timestamptz NOT NULL,
  last_used_at   timestamptz,
  PRIMARY KEY (org_id, connector_kind)
);
CREATE INDEX credentials_key ON credentials (key_id);
`,
  },
  {
    version: 6,
    name: 'webhooks: per-organization fair claiming, the slow chaos hold as a scheduled delay',
    sql: `
ALTER TABLE webhook_deliveries ADD COLUMN held_since timestamptz;
CREATE INDEX webhook_deliveries_org_due ON webhook_deliveries (org_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (org_id) WHERE lease_until IS NOT NULL;
`,
  },
  {
    version: 7,
    name: 'trial egress held while trial queries run (reserved up front like money)',
    sql: `
ALTER TABLE orgs ADD COLUMN trial_egress_held bigint NOT NULL DEFAULT 0 CHECK (trial_egress_held >= 0);
ALTER TABLE reservations ADD COLUMN egress_held bigint NOT NULL DEFAULT 0 CHECK (egress_held >= 0);
`,
  },
  {
    version: 8,
    name: 'the query path in one statement per phase: reserve, settle or refund with its audit event, append an audit event',
    sql: QUERY_PATH_FUNCTIONS,
  },
  {
    version: 9,
    name: 'rate limit buckets shared by the replicas of a PostgreSQL store (unlogged: a crash refills them)',
    sql: `
CREATE UNLOGGED TABLE rate_buckets (
  key    text PRIMARY KEY,
  tokens double precision NOT NULL,
  at     timestamptz NOT NULL,
  ok     boolean NOT NULL
);
`,
  },
  {
    version: 10,
    name: 'the replica holding each relay tunnel, under a renewed lease',
    sql: `
ALTER TABLE relays ADD COLUMN tunnel_replica text;
ALTER TABLE relays ADD COLUMN tunnel_address text;
ALTER TABLE relays ADD COLUMN tunnel_until timestamptz;
`,
  },
  {
    version: 11,
    name: 'when the holder of each relay tunnel claimed it (the newest tunnel holds the lease)',
    sql: `
ALTER TABLE relays ADD COLUMN tunnel_since timestamptz;
`,
  },
  {
    version: 12,
    // other revoked rows keep a null reason, read as `revoked` (connections/index.ts): rewriting every
    // one of them would hold the table's lock through a back-fill as long as the store is old
    name: 'why a connection was revoked; the connections of relays deleted before now are revoked with their relay',
    sql: `
ALTER TABLE connections ADD COLUMN revoked_reason text;
UPDATE connections c SET revoked_at = r.revoked_at, revoked_reason = 'relay_deleted'
  FROM relays r
 WHERE r.revoked_at IS NOT NULL AND c.org_id = r.org_id AND c.revoked_at IS NULL AND c.expires_at > r.revoked_at
   AND c.target_id = 'postgres-relay' AND c.scopes @> jsonb_build_array('relay:' || r.id);
`,
  },
  {
    version: 13,
    // unlogged: a crash only ends holds early (each is seconds long); demo/shares.ts
    name: 'demo senders held back on every replica while the worker their statement cost is replaced',
    sql: `
CREATE UNLOGGED TABLE demo_holds (
  tenant  text NOT NULL,
  replica text NOT NULL,
  until   timestamptz NOT NULL,
  PRIMARY KEY (tenant, replica)
);
`,
  },
  {
    version: 14,
    name: "a query's settlement locks and writes its connection's row once",
    sql: [SETTLE_ONE_WRITE],
  },
  {
    version: 15,
    // billing/index.ts topup: a top-up sent again with the same Idempotency-Key credits once
    name: 'top-ups remember their idempotency keys for a day',
    sql: `
CREATE TABLE topup_requests (
  org_id          text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  idempotency_key text NOT NULL,
  request_hash    text NOT NULL,
  response        text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, idempotency_key)
);
`,
  },
  {
    version: 16,
    // relays/index.ts upgrade_required: what the relay's last tunnel negotiated, for every replica
    name: "a relay's tunnel features, as its last handshake negotiated them",
    sql: `ALTER TABLE relays ADD COLUMN features text[];`,
  },
  {
    version: 17,
    // billing/index.ts sweepTopupKeys: every minute, the keys older than 24 h across organizations
    name: 'top-up idempotency keys by age, for their sweep',
    sql: `CREATE INDEX topup_requests_created_at ON topup_requests (created_at);`,
  },
  {
    version: 18,
    // a replica whose clock lags the store's no longer answers a connection past its expiry
    name: "svc_settle judges expiry by the later of the caller's clock and the store's",
    sql: [SETTLE_STORE_CLOCK],
  },
];

/** Apply every migration not yet applied; returns the versions applied now. */
export async function migrate(store: Store, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  await store.query(`CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
  const applied: number[] = [];
  for (const m of migrations) {
    try {
      const done = await store.tx(async (sql) => {
        // one migrator at a time across replicas
        await sql.query('SELECT pg_advisory_xact_lock(7361001)');
        const rows = await sql.query('SELECT 1 FROM schema_migrations WHERE version = $1', [m.version]);
        if (rows.length > 0) return false;
        for (const statement of typeof m.sql === 'string' ? splitStatements(m.sql) : m.sql) await sql.query(statement);
        await sql.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
        return true;
      });
      if (done) applied.push(m.version);
    } catch (err) {
      throw new StoreError('STORE_ERR_MIGRATION', `migration ${m.version} (${m.name}) failed: ${(err as Error).message}`, { cause: err });
    }
  }
  return applied;
}

/** Our migrations hold no semicolons inside literals or bodies, so splitting on `;` at line ends is exact. */
function splitStatements(sql: string): string[] {
  return sql
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}
